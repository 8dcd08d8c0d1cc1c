#!/bin/sh
# `gpuprobe prebuilt` with a live probe on a GPU machine: the text answer, the JSON document and
# the URLs, each with its exit code, written to OUT; exits 1 unless a Linux CUDA asset was chosen
# on an NVIDIA machine. Each run is bounded by `timeout` (the probe itself takes seconds).
#   scripts/prebuilt-gpu.sh BIN OUT    (BIN: the gpuprobe binary; OUT: a directory to write to)
set -u
BIN=${1:?usage: prebuilt-gpu.sh BIN OUT}
OUT=${2:?usage: prebuilt-gpu.sh BIN OUT}
mkdir -p "$OUT"
timeout 120 "$BIN" prebuilt >"$OUT/prebuilt.txt" 2>"$OUT/prebuilt.stderr"
echo "text: exit $?" >"$OUT/exit-codes.txt"
timeout 120 "$BIN" prebuilt --format json >"$OUT/prebuilt.json" 2>>"$OUT/prebuilt.stderr"
echo "json: exit $?" >>"$OUT/exit-codes.txt"
timeout 120 "$BIN" prebuilt --format url >"$OUT/prebuilt.url" 2>>"$OUT/prebuilt.stderr"
echo "url: exit $?" >>"$OUT/exit-codes.txt"
timeout 120 "$BIN" detect --json --no-smoke >"$OUT/detect.json" 2>>"$OUT/prebuilt.stderr"
cat "$OUT/prebuilt.txt" "$OUT/exit-codes.txt"
if grep -q '"backend": "cuda"' "$OUT/detect.json" 2>/dev/null; then
    grep -q -- '-bin-ubuntu-cuda-' "$OUT/prebuilt.url" || { echo "prebuilt-gpu: no Linux CUDA asset chosen" >&2; exit 1; }
fi
echo "prebuilt-gpu: results in $OUT"
