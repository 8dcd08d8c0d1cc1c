#!/bin/sh
# FAKE probe: every device passes its own smoke test, but a device reading another device's VMM
# pool (access granted to it, as llama.cpp does with GGML_CUDA_P2P or an RCCL build) reads wrong
# data: with --peers, every pair reports the first 6 MiB chunk of the pool (1572864 words) wrong.
# Ordinary peer copies work. A complete report (exit 0).
set -u
. "$(dirname "$0")/common.sh"
case " $* " in
    *" --peers "*)
        fake_parse_args "$@"
        emit_hello
        emit_peers false 1572864 '"peer_verify"'
        emit_done
        exit 0 ;;
esac
fake_preamble "$@"
emit_clean_run
emit_done
exit 0
