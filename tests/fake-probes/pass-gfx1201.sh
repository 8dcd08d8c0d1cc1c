#!/bin/sh
# FAKE probe (test double, NOT a measurement): a complete, passing run on a simulated gfx1201
# (R9700) for decision/resolver tests. Real gfx1201 results are welcome as fixtures; this is not one.
# Honours --cycles and --chunks: prints every cycle line and the cycle-0 stages of every chunk.
set -u
. "$(dirname "$0")/common.sh"
echo "$FAKE_NAME: simulated output from a fake probe, not a measurement" >&2
fake_preamble "$@"
c=0
while [ "$c" -lt "$CYCLES" ]; do
    emit_cycle "$c"
    if [ "$c" = 0 ]; then
        emit_stage reserve 0 0
        k=0
        while [ "$k" -lt "$CHUNKS" ]; do emit_chunk_stages "$k" verify; k=$((k + 1)); done
        k=0
        while [ "$k" -lt "$CHUNKS" ]; do emit_stage unmap 0 "$k"; k=$((k + 1)); done
        emit_stage free 0 0
    fi
    c=$((c + 1))
done
emit_stage vram_check "$CYCLES" 0
emit_smoke pass null null "$CYCLES" 0 null null null null "$FAKE_VRAM_FREE" "$CYCLES.500"
emit_done
exit 0
