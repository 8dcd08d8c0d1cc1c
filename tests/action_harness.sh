#!/usr/bin/env bash
# Runs the composite action in action.yml locally, the way a GitHub runner would, and checks what
# it produces. Driven by tests/workflow.rs (`action_yml_runs_in_the_local_harness`).
#
#   tests/action_harness.sh PATH/TO/gpuprobe
#
# The run: steps are taken from action.yml with Python's yaml module and run one after another
# with `bash --noprofile --norc -eo pipefail` (GitHub's `shell: bash`), each with its own
# GITHUB_OUTPUT file, a shared GITHUB_ENV, GITHUB_PATH and GITHUB_STEP_SUMMARY, and the env: block
# of the step with its ${{ }} expressions evaluated (inputs, steps.*.outputs, runner.*; anything
# else is an error, so action.yml cannot drift into something this harness does not model).
# `uses:` steps (the cache) are skipped: they produce no outputs, as a cache miss would. The
# gpuprobe under test is found through `install: path`.
#
# Needs: bash, python3 with PyYAML (GPUPROBE_PYTHON overrides the interpreter).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:?usage: tests/action_harness.sh PATH/TO/gpuprobe}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
python=${GPUPROBE_PYTHON:-python3}
if ! "$python" -c 'import yaml' 2>/dev/null; then
    echo "action_harness: $python has no PyYAML: pip install pyyaml, or set GPUPROBE_PYTHON" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$bin" "$work/bin/gpuprobe"

cat > "$work/run_action.py" <<'PY'
"""Runs a composite action's steps; prints a JSON result on stdout."""
import json, os, re, subprocess, sys, yaml

action_path, work, inputs_json = sys.argv[1], sys.argv[2], sys.argv[3]
given = json.loads(inputs_json)
action = yaml.safe_load(open(os.path.join(action_path, "action.yml")))
assert action["runs"]["using"] == "composite", "not a composite action"
declared = action.get("inputs", {})
for name in given:
    assert name in declared, f"input {name} is not declared in action.yml"
inputs = {k: str(v.get("default", "")) for k, v in declared.items()}
inputs.update(given)

for d in ("workspace", "temp", "toolcache", "home", "config"):
    os.makedirs(os.path.join(work, d), exist_ok=True)
files = {k: os.path.join(work, k) for k in ("env", "path", "summary")}
for f in files.values():
    open(f, "w").close()
runner = {"os": "Linux", "arch": "X64", "temp": os.path.join(work, "temp"),
          "tool_cache": os.path.join(work, "toolcache")}
base_env = {
    "PATH": os.path.join(work, "bin") + ":/usr/local/bin:/usr/bin:/bin",
    "HOME": os.path.join(work, "home"),
    "XDG_CONFIG_HOME": os.path.join(work, "config"),
    "LANG": "C.UTF-8",
    "CI": "true",
    "GITHUB_ACTIONS": "true",
    "GITHUB_ACTION_PATH": action_path,
    "GITHUB_WORKSPACE": os.path.join(work, "workspace"),
    "GITHUB_ENV": files["env"],
    "GITHUB_PATH": files["path"],
    "GITHUB_STEP_SUMMARY": files["summary"],
    "RUNNER_OS": runner["os"],
    "RUNNER_ARCH": runner["arch"],
    "RUNNER_TEMP": runner["temp"],
    "RUNNER_TOOL_CACHE": runner["tool_cache"],
}
steps = {}

def expr(text):
    text = text.strip()
    m = re.fullmatch(r"inputs\.([A-Za-z0-9_-]+)", text)
    if m:
        return inputs[m.group(1)]
    m = re.fullmatch(r"steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)", text)
    if m:
        return steps.get(m.group(1), {}).get(m.group(2), "")
    m = re.fullmatch(r"runner\.(os|arch|temp|tool_cache)", text)
    if m:
        return runner[m.group(1)]
    m = re.fullmatch(r"(.+?)\s*(==|!=)\s*'([^']*)'", text)
    if m:
        same = expr(m.group(1)) == m.group(3)
        return "true" if same == (m.group(2) == "==") else ""
    raise SystemExit(f"harness: unsupported expression ${{{{ {text} }}}}")

def substitute(value):
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: expr(m.group(1)), str(value))

def read_outputs(path):
    out, lines, i = {}, open(path).read().split("\n"), 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_-]+)<<(.+)", line)
        if m:
            body = []
            while lines[i] != m.group(2):
                body.append(lines[i])
                i += 1
            i += 1
            out[m.group(1)] = "\n".join(body)
        else:
            key, _, value = line.partition("=")
            out[key] = value
    return out

result = {"ok": True, "steps": []}
extra_env, extra_path = {}, []
for n, step in enumerate(action["runs"]["steps"]):
    sid = step.get("id", f"step{n}")
    cond = step.get("if")
    if cond is not None and not expr(str(cond).removeprefix("${{").removesuffix("}}")):
        result["steps"].append({"id": sid, "skipped": "if"})
        continue
    if "uses" in step:
        result["steps"].append({"id": sid, "skipped": "uses"})
        continue
    script = step["run"]
    assert "${{" not in script, f"step {sid}: an expression inside run:"
    assert step.get("shell") == "bash", f"step {sid}: shell must be bash"
    output = os.path.join(work, f"output-{n}")
    open(output, "w").close()
    env = dict(base_env)
    env.update(extra_env)
    if extra_path:
        env["PATH"] = ":".join(extra_path[::-1] + [env["PATH"]])
    env["GITHUB_OUTPUT"] = output
    for k, v in (step.get("env") or {}).items():
        env[k] = substitute(v)
    script_file = os.path.join(work, f"step-{n}.sh")
    open(script_file, "w").write(script)
    p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script_file],
                       cwd=env["GITHUB_WORKSPACE"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    steps[sid] = read_outputs(output)
    result["steps"].append({"id": sid, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
    extra_env.update(read_outputs(files["env"]))
    extra_path = [l for l in open(files["path"]).read().split("\n") if l]
    if p.returncode != 0:
        result.update(ok=False, failed_step=sid, rc=p.returncode)
        break
result["outputs"] = {k: substitute(v["value"]) for k, v in action.get("outputs", {}).items()} if result["ok"] else {}
result["summary"] = open(files["summary"]).read()
result["home"] = work
json.dump(result, sys.stdout)
PY

failures=0
check() { # MESSAGE, then a python expression over `r` (the result) that must be true
    local message=$1 expression=$2
    if "$python" -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if ($expression) else 1)" "$result"; then
        echo "ok   - $message"
    else
        echo "FAIL - $message"
        "$python" -c "import json,sys; r=json.load(open(sys.argv[1])); [print('  step', s.get('id'), 'rc', s.get('rc'), '\n  stdout:', s.get('stdout','')[-2000:], '\n  stderr:', s.get('stderr','')[-2000:]) for s in r['steps']]; print('  outputs:', r.get('outputs'))" "$result"
        failures=$((failures + 1))
    fi
}
run() { # NAME INPUTS_JSON [BIN_DIR]
    result="$work/result-$1.json"
    rm -rf "$work/run-$1"
    mkdir -p "$work/run-$1"
    cp -r "${3:-$work/bin}" "$work/run-$1/bin"
    "$python" "$work/run_action.py" "$root" "$work/run-$1" "$2" > "$result"
}

# 1. Targets-only, HIP, with a plan file in shell format.
run hip '{"targets": "gfx1151,gfx120X,gfx110X", "rocm": "7.2.1", "llama-ref": "b11434", "probe": "never", "install": "path", "format": "shell"}'
check "hip: every step succeeds" 'r["ok"]'
check "hip: cmake-args has explicit GPU_TARGETS and keeps the legacy pool on ROCm 7.2.1" '"-DGPU_TARGETS=" in r["outputs"]["cmake-args"] and "-DGGML_HIP_NO_VMM=ON" in r["outputs"]["cmake-args"] and "native" not in r["outputs"]["cmake-args"]'
check "hip: matrix is JSON with one entry per group, each with cmake-args" 'all("cmake-args" in e for e in json.loads(r["outputs"]["matrix"])["include"]) and len(json.loads(r["outputs"]["matrix"])["include"]) >= 1'
check "hip: report names a plan JSON file" 'json.load(open(r["outputs"]["report"]))["schema"] == "gpuprobe.plan/v1"'
check "hip: plan output is the same JSON document" 'json.loads(r["outputs"]["plan"])["schema"] == "gpuprobe.plan/v1"'
check "hip: targets-only, nothing probed" 'r["outputs"]["probed"] == "false" and r["outputs"]["probe-report"] == ""'
check "hip: the step summary has the plan table" '"| group | targets | VMM | flags | why |" in r["summary"] and "targets-only" in r["summary"]'
check "hip: the summary carries every runtime note of the plan (warnings, may-apply notes, env advice)" 'all(n["message"][:60] in r["summary"].replace("\\", "") for k in ("warnings", "notes") for n in json.loads(r["outputs"]["plan"])[k]) and all("`%s=%s`" % (e["name"], e["value"]) in r["summary"] for g in json.loads(r["outputs"]["plan"])["groups"] for e in g["env"]) and len(json.loads(r["outputs"]["plan"])["notes"]) > 0'
check "hip: warnings become ::warning annotations" 'any(l.startswith("::warning") for s in r["steps"] for l in s.get("stdout", "").splitlines())'
check "hip: format shell wrote a script" 'open(r["outputs"]["file"]).read().count("cmake") >= 1'
check "hip: the env output is NAME=VALUE lines" 'all("=" in l for l in r["outputs"]["env"].splitlines())'

check "hip: plan-file is the plan, as the deprecated report output" 'r["outputs"]["plan-file"] == r["outputs"]["report"] and json.load(open(r["outputs"]["plan-file"]))["schema"] == "gpuprobe.plan/v1"'
check "hip: no deprecation warning for the current names" 'not any("deprecated" in s.get("stdout", "") for s in r["steps"])'

# 1b. The earlier names still work, each with a warning naming the new input.
run oldnames '{"targets": "sm_86,sm_90", "toolchain-version": "12.8", "llama-cpp-dir": "", "llama-ref": "b11434", "probe": "never", "install": "path"}'
check "old names: toolchain-version still plans CUDA 12.8" 'r["ok"] and json.loads(r["outputs"]["plan"])["toolkit"]["version"] == "12.8"'
check "old names: a ::warning names rocm/cuda" 'any(l.startswith("::warning") and "toolchain-version is deprecated" in l and "cuda" in l for s in r["steps"] for l in s.get("stdout", "").splitlines())'

# 1c. Evidence (from), os and machine, as the CLI names them: a measured gfx1101 pass on ROCm
#     7.14 (Linux) turns its VMM pool on; without it the legacy pool stays.
pass_report="$root/tests/fixtures/synthetic/gfx1101-rocm7.14-linux-smoke-pass.json"
run evidence "$("$python" -c 'import json,sys; print(json.dumps({"targets": "gfx1101", "rocm": "7.14.0", "from": sys.argv[1], "os": "linux", "llama-ref": "b11434", "probe": "never", "install": "path"}))' "$pass_report")"
check "from: a measured pass lifts HIP VMM" 'r["ok"] and "-DGGML_HIP_NO_VMM=OFF" in r["outputs"]["cmake-args"]'
run noevidence '{"targets": "gfx1101", "rocm": "7.14.0", "os": "linux", "llama-ref": "b11434", "probe": "never", "install": "path"}'
check "from: without evidence the legacy pool stays" 'r["ok"] and "-DGGML_HIP_NO_VMM=ON" in r["outputs"]["cmake-args"]'
run machine '{"machine": "gfx1201,gfx1103", "rocm": "7.14.0", "os": "windows", "llama-ref": "b11434", "probe": "never", "install": "path"}'
check "machine and os: one build for both GPUs, planned for Windows" 'r["ok"] and "gfx1201;gfx1103" in r["outputs"]["cmake-args"] and json.loads(r["outputs"]["plan"])["os"] == "windows"'
run bados '{"targets": "gfx1100", "os": "macos", "probe": "never", "install": "path"}'
check "os: an unknown OS is exit 2" 'not r["ok"] and r["rc"] == 2'

# 2. probe: auto on a machine without a GPU falls back to the targets; CUDA from the targets.
run cuda '{"targets": "sm_86,sm_90", "cuda": "12.8", "llama-ref": "b11434", "install": "path"}'
check "cuda: auto without a GPU plans from the targets" 'r["ok"] and r["outputs"]["probed"] == "false"'
check "cuda: explicit CUDA architectures" '"-DCMAKE_CUDA_ARCHITECTURES=86;90" in r["outputs"]["cmake-args"]'

# 3. A hostile targets input is data: gpuprobe rejects it (exit 2) and nothing runs it.
marker="/tmp/pwned-gpuprobe-$$-$RANDOM"
rm -f "$marker"
run hostile "$("$python" -c 'import json,sys; print(json.dumps({"targets": "$(touch " + sys.argv[1] + ")", "probe": "never", "install": "path"}))' "$marker")"
check "hostile: the plan step fails with exit 2" 'not r["ok"] and r["failed_step"] == "plan" and r["rc"] == 2'
check "hostile: gpuprobe says the target is unknown" '"unknown GPU target" in r["steps"][-1]["stderr"]'
if [ -e "$marker" ]; then
    echo "FAIL - hostile: $marker was created: an input was executed"
    rm -f "$marker"
    failures=$((failures + 1))
else
    echo "ok   - hostile: $marker was never created"
fi
run newline '{"targets": "gfx1100\n::error::spoofed", "probe": "never", "install": "path"}'
check "newline: a multi-line input is refused before gpuprobe sees it" 'not r["ok"] and r["rc"] == 2 and "::error::spoofed" not in r["steps"][-1]["stdout"] + r["steps"][-1]["stderr"]'

# 4. A self-hosted runner with a gfx1101 (`detect` replays a probe report of one; everything else
#    is the real gpuprobe) and declared targets: the declared targets are what is built.
mkdir -p "$work/gpu-bin"
report="$root/tests/fixtures/synthetic/gfx1101-rocm7.14-linux-smoke-pass.json"
cat > "$work/gpu-bin/gpuprobe" <<SH
#!/bin/sh
if [ "\$1" = detect ]; then cat '$report'; exit 0; fi
exec '$bin' "\$@"
SH
chmod +x "$work/gpu-bin/gpuprobe"
run gpu '{"targets": "gfx110X,gfx120X", "rocm": "7.14.0", "llama-ref": "b11434", "install": "path"}' "$work/gpu-bin"
check "gpu runner: declared targets win over the probed gfx1101" 'r["ok"] and "gfx1201" in r["outputs"]["cmake-args"] and "gfx1103" in r["outputs"]["cmake-args"] and r["outputs"]["probed"] == "false"'
check "gpu runner: the probe is still reported" 'r["outputs"]["probe-report"].endswith("detect.json")'
run gpuonly '{"backend": "hip", "rocm": "7.14.0", "llama-ref": "b11434", "install": "path"}' "$work/gpu-bin"
check "gpu runner without targets: planned from the probe" 'r["ok"] and r["outputs"]["probed"] == "true" and "gfx1101" in r["outputs"]["cmake-args"] and "gfx1201" not in r["outputs"]["cmake-args"]'

# 5. Targets whose flags agree are one build: gfx1103 (an APU with its own runtime advice) is in
#    cmake-args with the other gfx110X (a plan that needs two builds names the targets cmake-args
#    leaves to the matrix: tests/resolver.rs).
run onebuild '{"targets": "gfx110X,gfx120X", "rocm": "7.14.0", "llama-ref": "b11434", "probe": "never", "install": "path"}'
check "one build: every declared target is in cmake-args" 'r["ok"] and all(t in r["outputs"]["cmake-args"] for t in ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1200", "gfx1201")) and len(json.loads(r["outputs"]["matrix"])["include"]) == 1'
check "one build: no annotation about groups left out" 'not any("cmake-args holds" in s.get("stdout", "") for s in r["steps"])'

# 6. Usage errors fail cleanly.
run notargets '{"probe": "never", "install": "path"}'
check "never without targets: exit 2" 'not r["ok"] and r["failed_step"] == "plan" and r["rc"] == 2'
run badurl '{"targets": "gfx1100", "install": "url", "binary-url": "http://example.invalid/gpuprobe", "binary-sha256": "00"}'
check "install url: a non-https URL is refused before any download" 'not r["ok"] and r["failed_step"] == "install" and r["rc"] == 2'
# 7. install: url with a pinned SHA-256. No gpuprobe release exists to download and this machine
#    has no network, so `curl` is a stand-in that serves the gpuprobe under test for any https
#    URL (failure injection of the download): what is checked is the Action's own verification.
mkdir -p "$work/url-bin"
cat > "$work/url-bin/curl" <<SH
#!/bin/sh
out=""; url=""
while [ \$# -gt 0 ]; do
    case "\$1" in --output) out=\$2; shift ;; https://*) url=\$1 ;; esac
    shift
done
[ -n "\$out" ] && [ -n "\$url" ] || exit 22
cp '$bin' "\$out"
SH
chmod +x "$work/url-bin/curl"
sha=$(sha256sum "$bin" | cut -d' ' -f1)
run urlok '{"targets": "gfx1100", "rocm": "7.2.1", "probe": "never", "install": "url", "binary-url": "https://example.invalid/gpuprobe", "binary-sha256": "'"$sha"'"}' "$work/url-bin"
check "install url: the file with the pinned SHA-256 is the gpuprobe that plans" 'r["ok"] and "-DGPU_TARGETS=gfx1100" in r["outputs"]["cmake-args"]'
wrong=$(printf '%s' "$sha" | tr '0-9a-f' '1-9a-f0')
run urlbad '{"targets": "gfx1100", "rocm": "7.2.1", "probe": "never", "install": "url", "binary-url": "https://example.invalid/gpuprobe", "binary-sha256": "'"$wrong"'"}' "$work/url-bin"
check "install url: another SHA-256 fails the install, and nothing runs" 'not r["ok"] and r["failed_step"] == "install" and r["rc"] == 2 and "does not have the SHA-256 given in binary-sha256" in r["steps"][-1]["stdout"] and not __import__("os").path.exists(r["home"] + "/temp/gpuprobe-bin/gpuprobe")'
run badprobe '{"targets": "gfx1100", "probe": "sometimes", "install": "path"}'
check "probe: an unknown value is refused" 'not r["ok"] and r["failed_step"] == "plan" and r["rc"] == 2'

if [ "$failures" -gt 0 ]; then
    echo "action_harness: $failures check(s) failed"
    exit 1
fi
echo "action_harness: all checks passed"
