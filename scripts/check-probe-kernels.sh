#!/bin/sh
# Check that the kernels in a HIP build of the probe program are the ones probes/PROTOCOL.md's table
# "Kernels in the probe program's code objects" names, and that the entry points of probes/smoke.ptx
# are the kernels of its "Kernel ABI" list, so that a kernel renamed, added or dropped without the
# protocol changing fails.
#
# Usage: scripts/check-probe-kernels.sh FILE ARCH...
#   FILE: an executable or object from scripts/build-probe.sh hip / hip-clang (it carries the code
#         objects in its .hip_fatbin section).
#   ARCH: the --offload-arch values it was built for; it must carry a code object for each and no other.
# Each code object is unbundled with clang-offload-bundler and read with llvm-readelf (its ELF machine
# and architecture must be the expected ones); kernel symbols (NAME.kd) are demangled with
# llvm-cxxfilt and compared without namespace and parameters.
# LLVM tools: $GPUPROBE_HIP_LLVM_BIN, else /usr/lib/llvm-19/bin, else from .cache/tools/env.sh.
set -eu

usage() { echo "usage: $0 FILE ARCH..." >&2; exit 2; }
[ $# -ge 2 ] || usage
file=$1
shift

here=$(cd "$(dirname "$0")/.." && pwd)
protocol=$here/probes/PROTOCOL.md
ptx=$here/probes/smoke.ptx
env_sh=${GPUPROBE_TOOLS:-$here/.cache/tools}/env.sh

llvm=${GPUPROBE_HIP_LLVM_BIN:-}
if [ -z "$llvm" ] && [ -x /usr/lib/llvm-19/bin/llvm-readelf ]; then llvm=/usr/lib/llvm-19/bin; fi
if [ -z "$llvm" ] && [ -f "$env_sh" ]; then
    # shellcheck disable=SC1090
    . "$env_sh"
    llvm=${GPUPROBE_HIP_LLVM_BIN:-}
fi
for t in llvm-objcopy llvm-readelf llvm-cxxfilt clang-offload-bundler; do
    if ! [ -x "$llvm/$t" ]; then
        echo "check-probe-kernels: $t not found in '${llvm}'; run scripts/install-toolchains.sh" >&2
        exit 1
    fi
done
if ! [ -f "$file" ]; then
    echo "check-probe-kernels: no such file: $file" >&2
    exit 1
fi

fail() { echo "check-probe-kernels: $*" >&2; exit 1; }

# abi_kernels: the kernel names of PROTOCOL.md's "Kernel ABI" list ("* `NAME(...)`"), sorted.
abi_kernels() {
    names=$(awk '/^#+ / { in_abi = ($0 ~ /^#+ Kernel ABI/) } in_abi' "$protocol" \
        | sed -n -E 's/^\* `([A-Za-z_][A-Za-z0-9_]*)\(.*/\1/p' | sort)
    [ -n "$names" ] || fail "probes/PROTOCOL.md has no Kernel ABI list"
    printf '%s\n' "$names"
}

# expected IMPL: the kernel names of PROTOCOL.md's row for `IMPL`, one per line, sorted.
expected() {
    names=$(awk -F'|' -v key="\`$1\`" '{ gsub(/^ +| +$/, "", $2) } $2 == key { print $3 }' "$protocol" \
        | grep -o '`[^`]*`' | tr -d '`' | sort)
    [ -n "$names" ] || fail "probes/PROTOCOL.md has no kernel row for \`$1\`"
    printf '%s\n' "$names"
}

# same WHAT EXPECTED ACTUAL: both newline-separated sorted lists must be equal.
same() {
    if [ "$2" != "$3" ]; then
        echo "check-probe-kernels: $1: not what probes/PROTOCOL.md lists" >&2
        echo "  expected: $(printf '%s' "$2" | tr '\n' ' ')" >&2
        echo "  found:    $(printf '%s' "$3" | tr '\n' ' ')" >&2
        exit 1
    fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ---- smoke.ptx: its .entry points
want_ptx=$(abi_kernels)
got_ptx=$(sed -n -E 's/^[[:space:]]*(\.(visible|weak)[[:space:]]+)?\.entry[[:space:]]+([A-Za-z_$%][A-Za-z0-9_$]*).*/\3/p' "$ptx" | sort)
same "the entry points of probes/smoke.ptx" "$want_ptx" "$got_ptx"
echo "check-probe-kernels: probes/smoke.ptx ok ($(printf '%s' "$got_ptx" | tr '\n' ' '))"

# ---- the HIP build: which code objects it carries
want_cpp=$(expected probes/gpuprobe-probe.cpp)
"$llvm/llvm-objcopy" --dump-section=.hip_fatbin="$tmp/fatbin" "$file" "$tmp/rest" 2>"$tmp/err" \
    || fail "$file has no .hip_fatbin section (no AMD code objects): $(cat "$tmp/err")"
"$llvm/clang-offload-bundler" --list --type=o --input="$tmp/fatbin" >"$tmp/entries" \
    || fail "$file: its .hip_fatbin is no offload bundle"
prefix=hipv4-amdgcn-amd-amdhsa--
got_archs=$(sed -n "s/^$prefix//p" "$tmp/entries" | sort)
want_archs=$(printf '%s\n' "$@" | sort)
if [ "$got_archs" != "$want_archs" ]; then
    echo "check-probe-kernels: $file carries code objects for other architectures than asked" >&2
    echo "  expected: $(printf '%s' "$want_archs" | tr '\n' ' ')" >&2
    echo "  found:    $(printf '%s' "$got_archs" | tr '\n' ' ')" >&2
    exit 1
fi

# ---- each code object: an AMDGPU ELF for its architecture, carrying exactly the table's kernels
for arch in "$@"; do
    co=$tmp/$(printf '%s' "$arch" | tr -c 'A-Za-z0-9_\n-' '_').co
    "$llvm/clang-offload-bundler" --unbundle --type=o --input="$tmp/fatbin" \
        --targets="$prefix$arch" --output="$co"
    header=$("$llvm/llvm-readelf" --file-header "$co")
    base=${arch%%:*}
    printf '%s\n' "$header" | grep -Eq '^ *Machine: +EM_AMDGPU$' \
        || fail "$arch: the code object is no AMDGPU ELF"
    # A loadable code object is a shared object: the device link (lld) ran.
    printf '%s\n' "$header" | grep -Eq '^ *Type: +DYN ' \
        || fail "$arch: the code object is not linked: $(printf '%s\n' "$header" | grep Type:)"
    printf '%s\n' "$header" | grep -Eq "^ *Flags: +0x[0-9a-fA-F]+, $base(,|\$)" \
        || fail "$arch: the code object is built for another architecture: $(printf '%s\n' "$header" | grep Flags:)"
    got=$("$llvm/llvm-readelf" --dyn-symbols --wide "$co" | awk '$NF ~ /\.kd$/ { sub(/\.kd$/, "", $NF); print $NF }' \
        | "$llvm/llvm-cxxfilt" | sed -e 's/(anonymous namespace):://g' -e 's/(.*//' -e 's/.*:://' -e 's/.* //' | sort)
    same "the kernels of the $arch code object in $file" "$want_cpp" "$got"
    echo "check-probe-kernels: $arch ok ($(printf '%s' "$got" | tr '\n' ' '); $(wc -c <"$co" | tr -d ' ') bytes)"
done
