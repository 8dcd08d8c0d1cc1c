#!/usr/bin/env bash
# Real out-of-memory logs of llama.cpp's CUDA memory pools, on a CUDA machine.
#
#   scripts/gpu-pool-oom.sh GPUPROBE_BIN SDIST.tar.gz WORK OUTDIR vmm|legacy [FROM_MIB] [TO_MIB] [STEP_MIB]
#
# Builds llama.cpp from the sdist and runs the inference exercise's long-context memory run through
# scripts/gpu-inference.sh (which leaves the synthetic model and text in WORK/memory-PHASE), then
# runs that same llama-perplexity command again while a second process holds all of the GPU's
# free memory but X MiB, for X from FROM_MIB (default 2800) down to TO_MIB (default 1200) in steps
# of STEP_MIB (default 50). Each run that fails keeps its whole log in OUTDIR/oom-PHASE-X.log; the
# legacy pool's runs pass -lv 4, which prints the pool's flush-and-retry line. OUTDIR/oom-PHASE.tsv
# holds X, the exit status and the error line of each run. What fails first as X shrinks is the
# allocation made last: the memory pool growing while the model computes.
set -euo pipefail

[ $# -ge 5 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
gp=$1; sdist=$2; work=$3; outdir=$4; phase=$5
from=${6:-2800}; to=${7:-1200}; step_mib=${8:-50}
here=$(dirname "$(realpath "$0")")
mkdir -p "$work" "$outdir"
work=$(realpath "$work"); outdir=$(realpath "$outdir")

KEEP_WORK=1 TARGETS=llama-perplexity MEMORY_MIB=1024 MEMORY_CTX=32768 bash "$here/gpu-inference.sh" "$gp" "$sdist" "$work" "$outdir" "$phase" 64 20 \
    > "$outdir/inference-run-$phase.log" 2>&1 || echo "gpu-pool-oom: the exercise exited $?" >&2
tail -n 15 "$outdir/inference-run-$phase.log"

mem="$work/memory-$phase"
model=$(find "$mem" -maxdepth 1 -name 'synthetic-dense.gguf' | head -n 1)
text="$mem/text-long.txt"
if [ -z "$model" ] || [ ! -f "$text" ]; then
    echo "gpu-pool-oom: no model or text in $mem" >&2
    ls -la "$mem" >&2 || true
    exit 3
fi

cat > "$work/hog.cu" <<'EOF'
// Holds all of the device's free memory but argv[1] MiB until stdin closes.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
int main(int argc, char ** argv) {
    size_t leave = (size_t) atoll(argv[1]) << 20, free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess || free_b <= leave) { printf("nothing to hold\n"); return 1; }
    void * p = nullptr;
    if (cudaMalloc(&p, free_b - leave) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    cudaMemGetInfo(&free_b, &total);
    printf("holding; %zu MiB free\n", free_b >> 20);
    fflush(stdout);
    while (getchar() != EOF) {}
    return 0;
}
EOF
nvcc -O2 -o "$work/hog" "$work/hog.cu"

build="$work/build-$phase/bin"
extra=()
[ "$phase" = legacy ] && extra=(-lv 4)
printf 'leave_mib\tfree_mib\trc\terror\n' > "$outdir/oom-$phase.tsv"
for ((x = from; x >= to; x -= step_mib)); do
    fifo="$work/hog-in"; rm -f "$fifo"; mkfifo "$fifo"
    "$work/hog" "$x" < "$fifo" > "$work/hog.out" 2>&1 &
    hog=$!
    exec 9>"$fifo"
    for _ in $(seq 50); do grep -q . "$work/hog.out" && break; sleep 0.1; done
    free=$(sed -n 's/^holding; \([0-9]*\) MiB free$/\1/p' "$work/hog.out")
    log="$work/run.log"
    set +e
    timeout 60 "$build/llama-perplexity" -m "$model" -c 32768 -b 2048 --chunks 3 --seed 1 -t 4 -f "$text" \
        -dev CUDA0 -ngl 999 -fa on -ctk q8_0 -ctv q8_0 -fit off "${extra[@]}" > "$log" 2>&1
    rc=$?
    set -e
    exec 9>&-
    wait "$hog" || true
    err=$(grep -m 1 -E 'error|failed|abort' "$log" | tr '\t' ' ' | cut -c 1-200 || true)
    printf '%s\t%s\t%s\t%s\n' "$x" "${free:-?}" "$rc" "$err" >> "$outdir/oom-$phase.tsv"
    [ "$rc" = 0 ] || cp "$log" "$outdir/oom-$phase-$x.log"
done
cat "$outdir/oom-$phase.tsv"
