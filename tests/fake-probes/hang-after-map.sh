#!/bin/sh
# FAKE probe: gfx1201 VMM page fault that blocks the host. The smoke test gets through reserve,
# create, map, release and set_access of chunk 0, launches the write kernel, and then never returns
# (the host thread waits forever on the completion signal of a faulted queue; dmesg would show an
# amdgpu page fault). The sleep runs in this shell's process group, so killing the group ends it.
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle 0
emit_stage reserve 0 0
emit_chunk_stages 0 write
while :; do sleep 3600; done
