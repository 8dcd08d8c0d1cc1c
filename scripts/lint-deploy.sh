#!/usr/bin/env bash
# Validates the Kubernetes manifests under deploy/ against Kubernetes' own API schemas with
# kubernetes-validate (PyPI; --strict also rejects fields the API does not have), for the
# oldest and newest Kubernetes versions it carries schemas for that we name here. kubectl
# itself is not installable from the registries CI reaches, so `kubectl apply --dry-run=client`
# is not run.
#
#   scripts/lint-deploy.sh       installs kubernetes-validate into a venv on first use
#                                (GPUPROBE_K8S_VENV, default $GPUPROBE_TOOLS/k8s)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${GPUPROBE_K8S_VENV:-${GPUPROBE_TOOLS:-$root/.cache/tools}/k8s}
tool="kubernetes-validate==1.37.0"
if [ ! -x "$venv/bin/kubernetes-validate" ] || [ "$(cat "$venv/.gpuprobe-k8s-tools" 2>/dev/null)" != "$tool" ]; then
    echo "lint-deploy: installing $tool into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$tool"
    echo "$tool" > "$venv/.gpuprobe-k8s-tools"
fi
status=0
# The node dumps `--from` reads in the tests: each node of each list must be a valid Node, so the
# fixtures keep the shape `kubectl get nodes -o json` prints (the validator has no schema for
# the List wrapper itself).
nodes_dir=$(mktemp -d)
trap 'rm -rf "$nodes_dir"' EXIT
python3 - "$nodes_dir" "$root"/tests/fixtures/kubectl-nodes/*.json <<'PY'
import json, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    dump = json.load(open(path))
    items = dump["items"] if dump.get("kind") == "List" else [dump]
    for i, item in enumerate(items):
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        with open(f"{out}/{name}-{i}.json", "w") as f:
            json.dump(item, f)
PY
for version in 1.30.0 1.34.0; do
    for f in "$nodes_dir"/*.json; do
        if ! "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$version" "$f"; then
            status=1
        fi
    done
done
for version in 1.30.0 1.34.0; do
    for f in "$root"/deploy/*.yaml; do
        if ! "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$version" "$f"; then
            status=1
        fi
    done
done
exit "$status"
