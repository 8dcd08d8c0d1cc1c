#!/bin/sh
# FAKE probe: prints something that is not the protocol (e.g. a runtime that writes its own
# messages to stdout, or a wrong binary), then exits 0 without any valid JSON line.
set -u
. "$(dirname "$0")/common.sh"
fake_parse_args "$@"
echo "HIP Library Path: /opt/rocm/lib/libamdhip64.so.7"
echo "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"
echo "{event: hello, protocol: 1"
printf '\001\002binary\377junk\n'
exit 0
