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
for version in 1.30.0 1.34.0; do
    for f in "$root"/deploy/*.yaml; do
        if ! "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$version" "$f"; then
            status=1
        fi
    done
done
exit "$status"
