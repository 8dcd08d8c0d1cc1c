#!/bin/sh
# FAKE probe: hello, then half a device line (no newline), then exit 0 without "done": a stream
# cut off in the middle, which the parent must report as partial/bad output, not as a result.
set -u
. "$(dirname "$0")/common.sh"
fake_parse_args "$@"
emit_hello
printf '{"event":"device","index":%d,"name":"AMD Radeon AI PRO R9700","arch":"gfx1201","arch_fea' "$DEVICE"
exit 0
