#!/bin/sh
# End to end on a machine with an NVIDIA GPU and a CUDA toolkit: a llama.cpp built from
# gpuprobe's own output works there and says what gpuprobe intended. Not part of CI (no GPU).
#
#   scripts/e2e-gpu.sh GPUPROBE SDIST.tar.gz WORK [vmm|legacy|all]
#
#   vmm     probe, `gpuprobe cmake-flags --llama-cpp SRC > build.sh`, `sh build.sh` (llama-cli and
#           test-backend-ops only), then check: llama-cli sees the GPU; the device line says
#           `VMM: yes`; libggml-cuda carries no NO_VMM feature; test-backend-ops passes MUL_MAT and
#           FLASH_ATTN_EXT on CUDA0; `gpuprobe check-build` finds no problem.
#   legacy  the same plan forced to the legacy pool (--force-no-vmm): the build must say `VMM: no`
#           and carry NO_VMM, and check-build must flag it (exit 1).
#   Both phases end with `gpuprobe check-build --exercise` on the build (test-backend-ops on every
#   GPU, the pool-heavy subset): it must pass on each GPU and say the VMM pool is compiled in
#   (vmm) or out (legacy); its wall time, verdict and JSON (WORK/exercise-PHASE.json) are printed.
# Each phase can run in its own call while WORK persists. Fails loudly: exit 1 with the reason.
set -u
gp=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
sdist=$2
work=$3
phase=${4:-all}
jobs=$(getconf _NPROCESSORS_ONLN)
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "E2E FAIL: $*"; exit 1; }
t() { date +%s; }

src=$work/src
if [ ! -f "$src/CMakeLists.txt" ]; then
    t0=$(t)
    mkdir -p "$work/unpack" && tar -xzf "$sdist" -C "$work/unpack" || fail "cannot unpack $sdist"
    top=$(find "$work/unpack" -maxdepth 2 -type d -name llama.cpp | head -1)
    [ -n "$top" ] || fail "no llama.cpp/ inside $sdist"
    mv "$top" "$src"
    echo "unpacked $(basename "$sdist") in $(( $(t) - t0 )) s"
fi
build=$(basename "$sdist" | sed -n 's/.*-\([0-9][0-9]*\)\.0\.0\.tar\.gz/\1/p')

# run_phase NAME EXTRA_FLAGS EXPECT_VMM(yes|no)
run_phase() {
    name=$1 extra=$2 want=$3
    out=$work/build-$name
    echo "==== phase $name"
    # shellcheck disable=SC2086
    "$gp" cmake-flags --llama-cpp "$src" --llama-build "$build" $extra >"$work/build-$name.sh" 2>"$work/plan-$name.txt" \
        || { cat "$work/plan-$name.txt"; fail "cmake-flags failed"; }
    grep -- '-D' "$work/build-$name.sh" | grep 'set --'
    t0=$(t)
    LLAMA_CPP_DIR=$src LLAMA_BUILD_DIR=$out LLAMA_BUILD_JOBS=$jobs LLAMA_BUILD_TARGETS="llama-cli test-backend-ops" \
        LLAMA_CMAKE_ARGS="-G Ninja -DLLAMA_BUILD_TESTS=ON" sh "$work/build-$name.sh" >"$work/build-$name.log" 2>&1 \
        || { tail -40 "$work/build-$name.log"; fail "build ($name) failed"; }
    echo "build ($name): $(( $(t) - t0 )) s with $jobs jobs"
    cli=$out/bin/llama-cli
    tbo=$out/bin/test-backend-ops
    "$cli" --version 2>&1 | tee "$work/version-$name.txt"
    "$cli" --list-devices 2>&1 | tee "$work/devices-$name.txt"
    grep -q 'CUDA0' "$work/devices-$name.txt" || fail "llama-cli --list-devices does not show CUDA0"
    lib=$(find "$out" -name 'libggml-cuda.so*' -type f | head -1)
    if [ -n "$lib" ] && strings "$lib" | grep -qx 'NO_VMM'; then has_no_vmm=yes; else has_no_vmm=no; fi
    echo "libggml-cuda NO_VMM feature string present: $has_no_vmm"
    t0=$(t)
    "$tbo" -b CUDA0 -o MUL_MAT -j 16 >"$work/tbo-mulmat-$name.txt" 2>&1; rc_mm=$?
    grep -E '^  Device|ggml_cuda_init' "$work/tbo-mulmat-$name.txt" | head -4
    tail -3 "$work/tbo-mulmat-$name.txt"
    echo "test-backend-ops MUL_MAT ($name): rc=$rc_mm in $(( $(t) - t0 )) s"
    grep -q "VMM: $want" "$work/tbo-mulmat-$name.txt" || fail "device line does not say VMM: $want"
    [ "$rc_mm" -eq 0 ] || fail "test-backend-ops MUL_MAT failed"
    if [ "$name" = vmm ]; then
        [ "$has_no_vmm" = no ] || fail "the VMM build carries NO_VMM"
        t0=$(t)
        # A head-size-128 subset of the flash-attention cases: the pool-heavy path in minutes, not tens.
        "$tbo" -b CUDA0 -o FLASH_ATTN_EXT -p "${E2E_FA_FILTER:-hsk=128}" -j 16 >"$work/tbo-fa-$name.txt" 2>&1 || { tail -20 "$work/tbo-fa-$name.txt"; fail "test-backend-ops FLASH_ATTN_EXT failed"; }
        tail -2 "$work/tbo-fa-$name.txt"
        echo "test-backend-ops FLASH_ATTN_EXT ($name): ok in $(( $(t) - t0 )) s"
    else
        [ "$has_no_vmm" = yes ] || fail "the legacy-pool build does not carry NO_VMM"
    fi
    # check-build --exercise: llama.cpp's own operator tests on every GPU, judged by gpuprobe.
    t0=$(t)
    "$gp" check-build --exercise --build-dir "$out" --llama-build "$build" --exercise-timeout 240 \
        --output "$work/exercise-$name.json" >"$work/exercise-$name.txt" 2>"$work/exercise-$name.err"; rc_ex=$?
    cat "$work/exercise-$name.txt"
    echo "exercise ($name): exit $rc_ex, wall $(( $(t) - t0 )) s"
    cat "$work/exercise-$name.json"
    [ "$rc_ex" -eq 0 ] || { cat "$work/exercise-$name.err"; fail "check-build --exercise did not pass ($name)"; }
    grep -q '"outcome": "pass"' "$work/exercise-$name.json" || fail "no device passed the exercise ($name)"
    if grep -q '"outcome": "\(fail\|hang\|crash\|not-run\)"' "$work/exercise-$name.json"; then fail "a device did not pass the exercise ($name)"; fi
    if [ "$name" = vmm ]; then want_vmm=true; else want_vmm=false; fi
    grep -q "\"vmm\": $want_vmm" "$work/exercise-$name.json" || fail "the exercise did not find the VMM pool $want_vmm ($name)"
    "$gp" check-build --binary "$cli" --llama-build "$build" >"$work/check-$name.txt" 2>&1; rc_cb=$?
    cat "$work/check-$name.txt"
    echo "check-build ($name): exit $rc_cb"
    if [ "$name" = vmm ]; then
        [ "$rc_cb" -eq 0 ] || fail "check-build found a problem with the VMM build"
    else
        [ "$rc_cb" -eq 1 ] || fail "check-build did not flag the legacy-pool build"
    fi
}

"$gp" detect | tee "$work/detect.txt"
"$gp" detect --json >"$work/detect.json" || fail "detect --json failed"
case $phase in
    vmm) run_phase vmm "" yes ;;
    legacy) run_phase legacy "--force-no-vmm" no ;;
    all) run_phase vmm "" yes && run_phase legacy "--force-no-vmm" no ;;
    *) fail "unknown phase $phase" ;;
esac
echo "E2E OK ($phase)"
