#!/bin/sh
# FAKE probe: quirk Q3 as the smoke test meets it on ROCm 7.0-7.2. hipMemSetAccess checks the size
# against the reservation's sub-buffers added up from the FIRST one (ROCm/clr hip_vm.cpp before
# rocm-systems PR #2451), so it passes for equal chunks and fails as soon as a growth has another
# size: pool 0's second growth (2 MiB after a 6 MiB first chunk, growth 3 of cycle 0) gets
# hipErrorInvalidValue; access over the whole mapped range (6 + 2 MiB, a prefix sum) works. The
# probe reports it (no abort: it checks the error itself). A complete report (exit 0).
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle0_until 3 set_access
S_OUTCOME=fail S_STAGE='"set_access"' S_CYCLE=0 S_POOL=0 S_GROWTH=3 S_CYCLES_DONE=0 \
S_ERROR='{"api":"hipMemSetAccess","code":1,"name":"hipErrorInvalidValue","message":"invalid argument"}' \
S_WHOLE=true S_POOL_MAX=$((6 * MIB)) S_LARGEST=$((6 * MIB)) S_SMALLEST=$((6 * MIB)) S_HOST=0 \
S_ELAPSED=0.750 S_LONG_MS=null \
emit_smoke
emit_done
exit 0
