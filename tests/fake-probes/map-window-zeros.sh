#!/bin/sh
# FAKE probe: freshly mapped memory that reads back zeros a few milliseconds later
# (rocm-systems#11693, gfx1201): the write and verify kernels queued right after the map agree
# (they went through the same stale translation), every cycle-0 check on the GPU passes, and then,
# after the host slept, verifying pool 0 again finds the last long growth (748 MiB at offset
# 308 MiB, growth 12) all zeros. A complete report (exit 0).
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle0_until -1 -
for g in 9 10 11 12; do
    emit_stage busy 0 0 "$g"
    emit_growth_stages 0 "$g" verify
done
emit_stage sync 0 0 0
emit_stage settle 0 0 0
emit_stage sync 0 0 0
words=$((748 * MIB / 4))
S_OUTCOME=fail S_STAGE='"settle"' S_CYCLE=0 S_POOL=0 S_CYCLES_DONE=0 S_MISMATCHES=$words \
S_BAD_OFFSET=$((308 * MIB)) S_BAD_VALUE=0 S_EXPECTED=$(pattern $((308 * MIB / 4)) 0) S_BAD_CHECK='"settle"' \
S_ERROR="{\"api\":\"gpuprobe_verify\",\"code\":0,\"name\":\"MISMATCH\",\"message\":\"$words words read again after the host waited were wrong\"}" \
S_HOST=0 S_ELAPSED=45.500 \
emit_smoke
emit_done
exit 0
