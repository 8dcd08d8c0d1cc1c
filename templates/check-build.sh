# Checks the llama.cpp build in ./build against the gpuprobe plan, on a runner without a GPU.
#
#  1. The VMM decision, read from the built ggml-hip / ggml-cuda library itself. llama.cpp puts
#     the string "NO_VMM" into the backend's feature list (what system_info prints as
#     `NO_VMM = 1`) only when the VMM pool is compiled out, so the string's presence in the
#     library is the compile-time truth, and reading it needs no GPU and no driver.
#  2. The VMM option in CMakeCache.txt (what CMake was told).
#  3. `llama-cli --version` runs and reports the expected build number; `--list-devices` is
#     shown for information (hosted runners have no GPU).
# Inputs (environment): GPUPROBE_OS, GPUPROBE_BACKEND, GPUPROBE_GROUP, GPUPROBE_TARGETS,
# GPUPROBE_VMM_FLAG, GPUPROBE_EXPECT_NO_VMM (1, 0, or empty when not checkable),
# GPUPROBE_CLI_NEEDS (libcuda-stub, nvcuda.dll or empty), LLAMA_CPP_REF, LLAMA_CPP_EXPECTED_BUILD.
set +e -u
failures=0
rows=""
cell() { printf '%s' "$1" | tr -d '\r' | tr '\n' ' ' | sed 's/|/\\|/g'; }
row() { rows+="| $(cell "$1") | $(cell "$2") | $(cell "$3") | $(cell "$4") |"$'\n'; }
fail() {
  failures=$((failures + 1))
  echo "::error title=gpuprobe build check (${GPUPROBE_GROUP})::$1"
}

# 1. The VMM pool, from the library.
lib_name="ggml-${GPUPROBE_BACKEND}"
lib=$(find build -type f \( -name "lib${lib_name}.so" -o -name "lib${lib_name}.so.*" -o -name "${lib_name}.dll" \) -print -quit)
if [ -z "$lib" ]; then
  lib=$(find build -type f \( -name "lib${lib_name}.a" -o -name "${lib_name}.lib" \) -print -quit)
fi
case "$GPUPROBE_EXPECT_NO_VMM" in
  1) want="compiled out (NO_VMM)" ;;
  0) want="compiled in" ;;
  *) want="not checked (the VMM option is not declared in this llama.cpp build)" ;;
esac
if [ -z "$lib" ]; then
  fail "no ${lib_name} library under build/: the GPU backend was not built"
  row "VMM pool" "$want" "no ${lib_name} library" "FAIL"
else
  if grep -a -q -F 'NO_VMM' "$lib"; then
    have=1
    found="compiled out (NO_VMM)"
  else
    have=0
    found="compiled in"
  fi
  if [ -z "$GPUPROBE_EXPECT_NO_VMM" ]; then
    result="-"
  elif [ "$have" = "$GPUPROBE_EXPECT_NO_VMM" ]; then
    result="ok"
  else
    result="MISMATCH"
    fail "the VMM pool is ${found} in ${lib}, but the plan wants it ${want}"
  fi
  row "VMM pool in ${lib##*/}" "$want" "$found" "$result"
fi

# 2. The VMM option in the CMake cache.
if [ -n "$GPUPROBE_VMM_FLAG" ]; then
  case "$GPUPROBE_EXPECT_NO_VMM" in
    1) want_cache=ON ;;
    0) want_cache=OFF ;;
    *) want_cache="" ;;
  esac
  cache=$(sed -nE "s/^${GPUPROBE_VMM_FLAG}:[A-Z]+=(.*)$/\\1/p" build/CMakeCache.txt | head -n 1)
  if [ -z "$cache" ]; then
    cache="(not in CMakeCache.txt)"
  fi
  if [ "$cache" = "$want_cache" ]; then
    result="ok"
  else
    result="MISMATCH"
    fail "${GPUPROBE_VMM_FLAG} is ${cache} in build/CMakeCache.txt, the plan sets ${want_cache}"
  fi
  row "${GPUPROBE_VMM_FLAG} in CMakeCache.txt" "$want_cache" "$cache" "$result"
fi

# 3. The built llama-cli.
cli=""
for c in build/bin/llama-cli build/bin/llama-cli.exe build/bin/main build/bin/main.exe; do
  if [ -f "$c" ]; then
    cli="$c"
    break
  fi
done
if [ -n "$LLAMA_CPP_EXPECTED_BUILD" ]; then
  want_version="build ${LLAMA_CPP_EXPECTED_BUILD}"
else
  want_version="runs (${LLAMA_CPP_REF} is not a bN tag: build number not checked)"
fi
skip=""
case "${GPUPROBE_CLI_NEEDS:-}" in
  libcuda-stub)
    # No NVIDIA driver in the container: the toolkit's stub libcuda lets the binary load; CUDA
    # then reports no device.
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
      stub=$(find /usr/local/cuda/ -path '*/stubs/libcuda.so' -print -quit 2>/dev/null)
      if [ -n "$stub" ]; then
        mkdir -p "$RUNNER_TEMP/libcuda-stub"
        ln -sf "$stub" "$RUNNER_TEMP/libcuda-stub/libcuda.so.1"
        export LD_LIBRARY_PATH="$RUNNER_TEMP/libcuda-stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      else
        skip="no libcuda.so.1 and no toolkit stub to stand in for it"
      fi
    fi
    ;;
  nvcuda.dll)
    sysdir=$(cygpath -u "${SYSTEMROOT:-C:\\Windows}" 2>/dev/null || echo /c/Windows)
    if [ ! -f "$sysdir/System32/nvcuda.dll" ]; then
      skip="no NVIDIA driver (nvcuda.dll) on this runner, so ggml-cuda.dll cannot load; the library check above still applies"
    fi
    ;;
esac
devices=""
if [ -z "$cli" ]; then
  fail "no llama-cli under build/bin"
  row "llama-cli --version" "$want_version" "no llama-cli under build/bin" "FAIL"
elif [ -n "$skip" ]; then
  echo "not running ${cli}: ${skip}"
  row "llama-cli --version" "$want_version" "not run: ${skip}" "-"
else
  out=$("$cli" --version 2>&1)
  rc=$?
  printf '%s\n' "$out"
  line=$(printf '%s\n' "$out" | tr -d '\r' | grep -m 1 -E 'version: ')
  build=$(printf '%s\n' "$line" | sed -nE 's/.*version: ([0-9]+) \(.*/\1/p; s/.*\(build ([0-9]+),.*/\1/p' | head -n 1)
  if [ "$rc" -ne 0 ]; then
    result="FAIL"
    fail "${cli} --version exited with ${rc}"
  elif [ -n "$LLAMA_CPP_EXPECTED_BUILD" ] && [ "$build" != "$LLAMA_CPP_EXPECTED_BUILD" ]; then
    result="MISMATCH"
    fail "${cli} --version reports build '${build}', expected ${LLAMA_CPP_EXPECTED_BUILD} (${LLAMA_CPP_REF})"
  else
    result="ok"
  fi
  row "llama-cli --version" "$want_version" "${line:-no version line}" "$result"
  devices=$("$cli" --list-devices 2>&1 | tail -n 40)
  printf '%s\n' "$devices"
fi

{
  echo "### llama.cpp ${LLAMA_CPP_REF}: ${GPUPROBE_OS} / ${GPUPROBE_GROUP}"
  echo
  echo "Targets: \`$(cell "$GPUPROBE_TARGETS")\`"
  echo
  echo "| check | plan | build | result |"
  echo "|---|---|---|---|"
  printf '%s' "$rows"
  if [ -n "$devices" ]; then
    echo
    echo "<details><summary>llama-cli --list-devices</summary>"
    echo
    echo '```text'
    printf '%s\n' "$devices"
    echo '```'
    echo "</details>"
  fi
  echo
} >> "${GITHUB_STEP_SUMMARY:-/dev/null}"
if [ "$failures" -gt 0 ]; then
  exit 1
fi
