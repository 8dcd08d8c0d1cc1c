#!/bin/sh
# FAKE probe: every VMM call succeeds but a chunk mapped at an offset reads back zeros (a silent
# failure: no API error from the runtime). Pool 0's first chunk verifies; the verify queued after
# its second growth (2 MiB at offset 6 MiB, growth 3 of cycle 0) finds all of it wrong, the first
# word at byte offset 6291456 holding 0. A complete, clean report (exit 0).
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle0_until 8 verify
emit_stage sync 0 0 0
words=$((2 * MIB / 4))
S_OUTCOME=fail S_STAGE='"verify"' S_CYCLE=0 S_POOL=0 S_GROWTH=3 S_CYCLES_DONE=0 S_MISMATCHES=$words \
S_BAD_OFFSET=$((6 * MIB)) S_BAD_VALUE=0 S_EXPECTED=$(pattern $((6 * MIB / 4)) 0) S_BAD_CHECK='"gpu"' \
S_ERROR='{"api":"gpuprobe_verify","code":0,"name":"MISMATCH","message":"524288 words read back right after mapping were wrong"}' \
S_POOL_MAX=$((18 * MIB)) S_LARGEST=$((10 * MIB)) S_HOST=0 S_ELAPSED=1.250 S_LONG_MS=null \
emit_smoke
emit_done
exit 0
