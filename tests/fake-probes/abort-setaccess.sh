#!/bin/sh
# FAKE probe: hipMemSetAccess on a chunk mapped at an offset fails with hipErrorInvalidValue and
# llama.cpp-style error handling aborts (gfx1201 on ROCm 7.x, rocm-systems#2516; llama.cpp PR #26054).
# Chunk 0 (offset 0) passes; chunk 1's set_access starts, then "HipVMM Failure" and SIGABRT.
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle 0
emit_stage reserve 0 0
emit_chunk_stages 0 verify
emit_chunk_stages 1 set_access
echo "HipVMM Failure: invalid argument" >&2
kill -ABRT $$
sleep 1   # the signal is delivered before this; never reached
exit 1
