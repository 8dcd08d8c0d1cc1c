#!/bin/sh
# FAKE probe: the runtime crashes while initialising (driver segfault at init), before the probe
# prints anything at all.
. "$(dirname "$0")/common.sh"
kill -SEGV $$
sleep 1   # never reached
exit 1
