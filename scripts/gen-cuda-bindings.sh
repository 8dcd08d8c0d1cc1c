#!/bin/sh
# Regenerates src/probe/cuda/sys.rs with bindgen over the real cuda.h (PyPI nvidia-cuda-runtime,
# installed by scripts/install-toolchains.sh --cuda-only). The same generator is the test
# tests/cuda_bindings.rs, which fails when the committed file is stale.
set -eu
cd "$(dirname "$0")/.."
export LIBCLANG_PATH="${LIBCLANG_PATH:-/usr/lib/llvm-15/lib}"
GPUPROBE_BLESS=1 cargo test --test cuda_bindings
echo "regenerated src/probe/cuda/sys.rs"
