#!/bin/sh
# FAKE probe: every VMM call succeeds but the chunk mapped at an offset reads back zeros (a silent
# failure: no API error). Chunk 0 verifies; the verify after chunk 1 in cycle 0 finds all of chunk 1
# (524288 words) wrong, the first at byte offset 2097152 holding 0. A complete, clean report (exit 0).
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle 0
emit_stage reserve 0 0
emit_chunk_stages 0 verify
if [ "$CHUNKS" -lt 2 ]; then
    # Only chunk 0 (offset 0) is mapped: nothing at an offset, so the fault does not show.
    emit_stage unmap 0 0
    emit_stage free 0 0
    c=1
    while [ "$c" -lt "$CYCLES" ]; do emit_cycle "$c"; c=$((c + 1)); done
    emit_stage vram_check "$CYCLES" 0
    emit_smoke pass null null "$CYCLES" 0 null null null null "$FAKE_VRAM_FREE" "$CYCLES.500"
else
    emit_chunk_stages 1 verify
    words=$((FAKE_GRAN_REC / 4))
    emit_smoke fail '"verify"' null 0 "$words" "$FAKE_GRAN_REC" 0 "$(pattern "$words" 0)" null null 1.250
fi
emit_done
exit 0
