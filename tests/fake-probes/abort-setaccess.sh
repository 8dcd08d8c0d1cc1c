#!/bin/sh
# FAKE probe: hipMemSetAccess on a growth mapped at an offset fails with hipErrorInvalidValue and
# llama.cpp-style error handling aborts (gfx1201 on ROCm 7.x, rocm-systems#2516; llama.cpp PR #26054).
# The first growth of each pool (at its base) passes; pool 0's second growth (growth 3) reaches
# set_access, then "HipVMM Failure" and SIGABRT.
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle0_until 3 set_access
echo "HipVMM Failure: invalid argument" >&2
kill -ABRT $$
sleep 1   # the signal is delivered before this; never reached
exit 1
