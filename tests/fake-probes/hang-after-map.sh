#!/bin/sh
# FAKE probe: gfx1201 VMM page fault that blocks the host. The smoke test gets through create,
# reserve, map, release and set_access of the first growth, queues the write kernel, and then never
# returns (the host thread waits forever on the completion signal of a faulted queue; dmesg would
# show an amdgpu page fault). The sleep runs in this shell's process group, so killing the group
# ends it.
set -u
. "$(dirname "$0")/common.sh"
fake_preamble "$@"
emit_cycle0_until 0 write
while :; do sleep 3600; done
