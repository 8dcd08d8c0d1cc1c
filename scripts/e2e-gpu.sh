#!/bin/sh
# End to end on a machine with an NVIDIA GPU and a CUDA toolkit: a llama.cpp built from
# gpuprobe's own output works there and says what gpuprobe intended. Not part of CI (no GPU).
#
#   scripts/e2e-gpu.sh GPUPROBE SDIST.tar.gz WORK [vmm|legacy|package|all]
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
#   package a release package as a generated workflow makes it: the flags of
#           `gpuprobe workflow --targets <this GPU> --cuda <nvcc's version> --os linux` (the plan's
#           cmake_args and GPUPROBE_PACKAGE_ARGS; the prebuilt web UI needs a host this machine
#           may not reach, so -DLLAMA_USE_PREBUILT_UI=OFF),
#           packed by templates/package.sh with the workflow's bundle lists, then
#           templates/self-check.sh on the archive (unpacked into a fresh directory, the toolkit's
#           libraries must come from the package) and llama-cli --list-devices from a fresh unpack
#           with the loader cache off and only the driver's libcuda.so.1 on the library path:
#           CUDA0 must be listed. Then `gpuprobe check-build --exercise` from the unpacked archive:
#           the package leaves test programs out, so test-backend-ops (built with the same flags
#           in the same tree) is put next to the unpacked libraries and runs against them.
#           The time of each step is printed (TIME lines).
# Each phase can run in its own call while WORK persists. Fails loudly: exit 1 with the reason.
# WORK/summary.txt gets the result lines (TIME, checks, E2E OK / E2E FAIL) of this call.
# E2E_BUDGET_S (default 540): the package phase stops its build, with E2E FAIL, where finishing
# it would leave less than 150 s for packing and the checks, so a call ends inside its budget.
set -u
[ $# -ge 3 ] || { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
gp=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
sdist=$2
work=$3
phase=${4:-all}
jobs=$(getconf _NPROCESSORS_ONLN)
mkdir -p "$work"
work=$(cd "$work" && pwd)
summary=$work/summary.txt
: >"$summary"
say() { echo "$*"; echo "$*" >>"$summary"; }
fail() { say "E2E FAIL: $*"; exit 1; }
t() { date +%s; }
t_start=$(t)
budget=${E2E_BUDGET_S:-540}
left() { echo $((budget - ($(t) - t_start))); }
say "e2e-gpu $phase: $(date -u +%Y-%m-%dT%H:%M:%SZ), $jobs jobs, budget $budget s"

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

# The value of KEY (a `KEY: "value"` line) in the generated workflow FILE, first occurrence.
yaml_value() { sed -n "s/^ *-\{0,1\} *$2: \"\(.*\)\"\$/\1/p" "$1" | head -n 1; }

package_phase() {
    echo "==== phase package"
    root=$(cd "$(dirname "$0")/.." && pwd)
    arch=$(grep -o '"arch": "sm_[0-9]*' "$work/detect.json" | head -n 1 | sed 's/.*"sm_/sm_/')
    cuda=$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
    [ -n "$arch" ] && [ -n "$cuda" ] || fail "cannot tell this GPU's architecture ($arch) or nvcc's version ($cuda)"
    "$gp" workflow --targets "$arch" --cuda "$cuda" --os linux --llama-ref "b$build" >"$work/workflow.yml" 2>"$work/workflow.err" \
        || { cat "$work/workflow.err"; fail "gpuprobe workflow failed"; }
    plan_args=$(yaml_value "$work/workflow.yml" cmake_args)
    package_args=$(yaml_value "$work/workflow.yml" GPUPROBE_PACKAGE_ARGS)
    [ -n "$plan_args" ] && [ -n "$package_args" ] || fail "no cmake_args / GPUPROBE_PACKAGE_ARGS in the generated workflow"
    flags=""
    for f in $plan_args $package_args; do
        case "$f" in
            -DLLAMA_BUILD_BORINGSSL=*) flags="$flags -DLLAMA_OPENSSL=OFF" ;;
            # test-backend-ops for the exercise; package.sh leaves test programs out of the archive
            -DLLAMA_BUILD_TESTS=OFF) flags="$flags -DLLAMA_BUILD_TESTS=ON" ;;
            *) flags="$flags $f" ;;
        esac
    done
    case " $flags " in *" -DLLAMA_USE_PREBUILT_UI=OFF "*) ;; *) flags="$flags -DLLAMA_USE_PREBUILT_UI=OFF" ;; esac
    say "flags:$flags"
    out=$work/build-package
    t0=$(t)
    # shellcheck disable=SC2086
    cmake -S "$src" -B "$out" -G Ninja $flags >"$work/build-package.log" 2>&1 \
        || { tail -40 "$work/build-package.log"; fail "configure (package) failed"; }
    room=$(( $(left) - 150 ))
    [ "$room" -gt 60 ] || fail "only $(left) s of the $budget s budget left before the build"
    timeout "$room" cmake --build "$out" --target llama-cli test-backend-ops -j "$jobs" >>"$work/build-package.log" 2>&1
    rc_b=$?
    [ "$rc_b" -ne 124 ] || fail "the build (package) did not finish in $room s (budget $budget s, E2E_BUDGET_S); $(grep -c '^\[' "$work/build-package.log") build lines logged"
    [ "$rc_b" -eq 0 ] || { tail -40 "$work/build-package.log"; fail "build (package) failed"; }
    say "TIME build (package, llama-cli and test-backend-ops, with every backend module): $(( $(t) - t0 )) s with $jobs jobs"
    toolkit_lib=$(dirname "$(dirname "$(command -v nvcc)")")/lib64
    pkg=$work/pkg
    rm -rf "$pkg"
    t0=$(t)
    GPUPROBE_OS=linux GPUPROBE_TARGETS=$arch GPUPROBE_RUNTIME_DIRS=$toolkit_lib \
        GPUPROBE_DRIVER_LIBS=$(yaml_value "$work/workflow.yml" GPUPROBE_DRIVER_LIBS) \
        GPUPROBE_BUNDLE_EXPECT=$(yaml_value "$work/workflow.yml" GPUPROBE_BUNDLE_EXPECT) \
        GPUPROBE_BUNDLE_EXTRA=$(yaml_value "$work/workflow.yml" GPUPROBE_BUNDLE_EXTRA) \
        GPUPROBE_BUNDLE_DATA=$(yaml_value "$work/workflow.yml" bundle_data) \
        bash "$root/templates/package.sh" "$out" "$src" "$pkg" llama-e2e-cuda >"$work/package.txt" 2>&1
    rc_p=$?
    cat "$work/package.txt"
    [ "$rc_p" -eq 0 ] && [ -f "$pkg/llama-e2e-cuda.tar.gz" ] || fail "packing failed (exit $rc_p)"
    say "TIME pack: $(( $(t) - t0 )) s ($(du -h "$pkg/llama-e2e-cuda.tar.gz" | cut -f1))"
    archive=$pkg/llama-e2e-cuda.tar.gz
    # The driver alone: a directory holding only a link to the driver's libcuda.so.1.
    driver_lib=$(ldconfig -p | sed -n 's/^[[:space:]]*libcuda\.so\.1 (libc6,x86-64) => //p' | head -n 1)
    [ -n "$driver_lib" ] || fail "no libcuda.so.1 in the loader cache: is the NVIDIA driver installed?"
    mkdir -p "$work/driver-only"
    ln -sf "$driver_lib" "$work/driver-only/libcuda.so.1"
    t0=$(t)
    GPUPROBE_DRIVER_LIBS=libcuda.so.1 GPUPROBE_DRIVER_DIR=$work/driver-only GPUPROBE_TARGETS=$arch \
        bash "$root/templates/self-check.sh" --list-devices "$archive" >"$work/self-check.txt" 2>&1
    rc_s=$?
    cat "$work/self-check.txt"
    grep '^FAIL: ' "$work/self-check.txt" >>"$summary"
    [ "$rc_s" -eq 0 ] && grep -q 'is self-contained' "$work/self-check.txt" || fail "the self-check failed (exit $rc_s)"
    say "TIME self-check: $(( $(t) - t0 )) s"
    fresh=$work/fresh
    t0=$(t)
    rm -rf "$fresh" && mkdir -p "$fresh" && tar -xzf "$archive" -C "$fresh" || fail "cannot unpack $archive"
    say "TIME unpack alone: $(( $(t) - t0 )) s"
    t0=$(t)
    interp=$(readelf -lW "$fresh/llama-e2e-cuda/llama-cli" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
    # With the loader's cache off, only the package ($ORIGIN), the system's default directories
    # and the driver's directory are searched: nothing from the CUDA toolkit can be picked up.
    (cd "$fresh/llama-e2e-cuda" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$work/driver-only" \
        "$interp" --inhibit-cache ./llama-cli --list-devices) 2>&1 | tee "$work/devices-package.txt"
    grep -q 'CUDA0' "$work/devices-package.txt" || fail "the unpacked package does not list CUDA0 with only the driver on the library path"
    say "TIME llama-cli --list-devices from the unpacked archive: $(( $(t) - t0 )) s"
    # check-build --exercise on the unpacked libraries: test-backend-ops from the same build,
    # next to them (its RUNPATH is $ORIGIN), with only the driver from outside.
    cp "$out/bin/test-backend-ops" "$fresh/llama-e2e-cuda/" || fail "no test-backend-ops in $out/bin"
    t0=$(t)
    ex_limit=$(( $(left) - 15 ))
    [ "$ex_limit" -le 240 ] || ex_limit=240
    [ "$ex_limit" -gt 20 ] || fail "only $(left) s of the $budget s budget left for check-build --exercise"
    LD_LIBRARY_PATH="$work/driver-only" "$gp" check-build --exercise --llama-build "$build" --exercise-timeout "$ex_limit" \
        --binary "$fresh/llama-e2e-cuda/test-backend-ops" --output "$work/exercise-package.json" \
        >"$work/exercise-package.txt" 2>"$work/exercise-package.err"
    rc_ex=$?
    cat "$work/exercise-package.txt"
    say "TIME check-build --exercise from the unpacked archive: $(( $(t) - t0 )) s (exit $rc_ex)"
    [ "$rc_ex" -eq 0 ] || { cat "$work/exercise-package.err"; fail "check-build --exercise on the unpacked package exited $rc_ex (JSON: $work/exercise-package.json)"; }
    grep -q '"outcome": "pass"' "$work/exercise-package.json" || fail "no device passed the exercise from the unpacked package"
    say "package: $(grep -c '^package: bundled ' "$work/package.txt") runtime libraries bundled, self-check passed, CUDA0 listed, exercise passed"
}

"$gp" detect | tee "$work/detect.txt"
"$gp" detect --json >"$work/detect.json" || fail "detect --json failed"
case $phase in
    vmm) run_phase vmm "" yes ;;
    legacy) run_phase legacy "--force-no-vmm" no ;;
    package) package_phase ;;
    all) run_phase vmm "" yes && run_phase legacy "--force-no-vmm" no && package_phase ;;
    *) fail "unknown phase $phase" ;;
esac
say "E2E OK ($phase) in $(( $(t) - t_start )) s"
