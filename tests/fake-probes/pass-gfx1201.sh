#!/bin/sh
# FAKE probe (test double, NOT a measurement): a complete, passing run on a simulated gfx1201
# (R9700) for decision/resolver tests. Real gfx1201 results are welcome as fixtures; this is not one.
# Honours --cycles: prints every cycle line, the cycle-0 stages of every growth and the later
# cycles' per-growth lines.
set -u
. "$(dirname "$0")/common.sh"
echo "$FAKE_NAME: simulated output from a fake probe, not a measurement" >&2
fake_preamble "$@"
emit_clean_run
emit_done
exit 0
