#!/usr/bin/env bash
# Packs a llama.cpp build tree into one archive that runs where the user has only the GPU driver:
# the programs and every shared library of the build in one flat directory (Linux programs carry
# RUNPATH $ORIGIN, Windows looks next to the .exe first), the GPU runtime libraries they load
# bundled next to them, LICENSE, and README.package.txt saying what is inside and what the
# machine must provide. Where the toolkit's libraries find their device code in .kpack archives
# one directory above their own (TheRock 7.13+: ../.kpack/NAME_gfxNNNN.kpack), the programs and
# libraries go in bin/ and the archives of the built targets in .kpack/ beside it, as in the
# toolkit. templates/self-check.sh proves the result.
#
#   package.sh BUILD_DIR SRC_DIR OUT_DIR NAME
#
# Writes OUT_DIR/NAME.tar.gz (Linux; execute bits kept) or OUT_DIR/NAME.zip (Windows) and prints
# its path on the last line. Exit 1 when something cannot be packed, 2 on bad usage.
# Environment (all optional):
#   GPUPROBE_OS            linux or windows (default: this machine's)
#   GPUPROBE_RUNTIME_DIRS  ';'-separated directories where the GPU toolkit keeps its runtime
#                          libraries (the libraries CMake linked are found from CMakeCache.txt too)
#   GPUPROBE_BUNDLE_EXTRA  ';'-separated file names (globs) to bundle from those directories although
#                          nothing links them (libraries the runtime opens by itself)
#   GPUPROBE_BUNDLE_DATA   ';'-separated LIBRARY=FOLDER[=TARGETS]: FOLDER, next to LIBRARY in the
#                          toolkit, is copied next to it in the package (e.g. kernel libraries),
#                          without files for GPU targets that were not built; TARGETS
#                          (comma-separated) are those it has kernels for (default: all built):
#                          with none, a toolkit without FOLDER is no error
#   GPUPROBE_TARGETS       the GPU targets built (';'-separated)
#   GPUPROBE_DRIVER_LIBS   library names the GPU driver provides: never bundled
#   GPUPROBE_PACKAGE_NOTES a file whose text goes into README.package.txt (requirements, notes)
set -euo pipefail

[ $# -eq 4 ] || { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
build=$1
src=$2
out=$3
name=$4
case "$name" in
    *[!A-Za-z0-9._-]* | "" | .*) echo "package: NAME must be letters, digits, . _ - (got '$name')" >&2; exit 2 ;;
esac
[ -d "$build" ] || { echo "package: $build is not a directory" >&2; exit 2; }
[ -f "$src/LICENSE" ] || { echo "package: no LICENSE in $src" >&2; exit 2; }
os=${GPUPROBE_OS:-}
if [ -z "$os" ]; then
    case "$(uname -s)" in MINGW* | MSYS* | CYGWIN*) os=windows ;; *) os=linux ;; esac
fi

# Mirrors templates/self-check.sh: what the base system and the driver provide is never bundled.
LINUX_BASE="linux-vdso.so.1 linux-gate.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libc.so.6
libm.so.6 libmvec.so.1 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2
libanl.so.1 libstdc++.so.6 libgcc_s.so.1"
LINUX_STATED="libssl.so.3 libcrypto.so.3"
WINDOWS_BASE="kernel32.dll kernelbase.dll ntdll.dll user32.dll gdi32.dll advapi32.dll shell32.dll
ole32.dll oleaut32.dll ws2_32.dll mswsock.dll bcrypt.dll ncrypt.dll crypt32.dll secur32.dll
shlwapi.dll version.dll winmm.dll iphlpapi.dll psapi.dll dbghelp.dll comdlg32.dll comctl32.dll
userenv.dll cfgmgr32.dll setupapi.dll rpcrt4.dll imm32.dll powrprof.dll winhttp.dll wininet.dll
normaliz.dll wintrust.dll dxgi.dll d3d12.dll dxcore.dll ucrtbase.dll"
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
in_words() { case " $(printf '%s' "$2" | tr '\n' ' ') " in *" $1 "*) return 0 ;; esac; return 1; }
never_bundle() {
    local n
    n=$(lower "$1")
    case "$n" in api-ms-win-* | ext-ms-*) return 0 ;; esac
    in_words "$1" "$LINUX_BASE" || in_words "$1" "$LINUX_STATED" || in_words "$n" "$WINDOWS_BASE" || in_words "$n" "$(lower "${GPUPROBE_DRIVER_LIBS:-}")"
}
pe_imports() { # FILE -> one imported DLL name a line (same readers as templates/self-check.sh)
    if command -v objdump >/dev/null 2>&1 && objdump -p "$1" >/dev/null 2>&1; then
        objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: *//p'
    elif command -v llvm-objdump >/dev/null 2>&1; then
        llvm-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: *//p'
    elif command -v dumpbin >/dev/null 2>&1; then
        dumpbin /nologo /dependents "$1" | awk '/has the following dependencies/ { on = 1; next } on && /^ *$/ { if (seen) exit; next } on { seen = 1; sub(/^ +/, ""); print }'
    else
        echo "package: no objdump, llvm-objdump or dumpbin to read import tables" >&2
        return 3
    fi | tr -d '\r'
}
split() { printf '%s\n' "$1" | tr ';' '\n' | sed '/^[[:space:]]*$/d'; }
unix_path() { if [ "$os" = windows ] && command -v cygpath >/dev/null 2>&1; then cygpath -u "$1"; else printf '%s' "$1"; fi; }
# --- kpack readers (the same text in templates/package.sh and templates/self-check.sh) ---
# TheRock 7.13 and later keep the device code of ROCm's libraries in .kpack archives. A library
# carries a msgpack map {"kernel_name": ..., "kpack_search_paths": [...]} (ELF section
# .rocm_kpack_ref, PE section .kpackrf); each path is relative to the library's own directory,
# with @GFXARCH@ standing for the GPU's target (../.kpack/blas_lib_@GFXARCH@.kpack). An archive
# starts with "KPAK", a 32-bit version and the 64-bit offset of a msgpack table of contents
# whose "gfx_arches" lists its targets. (TheRock RELEASES.md and docs/packaging/
# python_packaging.md; rocm-systems shared/kpack: split_artifacts.py, the runtime's tests.)
mp_strings() { # KEY < od -tu1 bytes -> the strings of the array that follows the map key KEY
    awk -v key="$1" '
        { for (i = 1; i <= NF; i++) b[n++] = $i + 0 }
        END {
            k = length(key)
            for (i = 0; i + k < n; i++) {
                if (b[i] != 160 + k) continue
                for (j = 1; j <= k; j++) if (b[i + j] != ord[substr(key, j, 1)]) break
                if (j <= k) continue
                p = i + k + 1
                h = b[p++]
                if (h >= 144 && h <= 159) cnt = h - 144
                else if (h == 220) { cnt = b[p] * 256 + b[p + 1]; p += 2 }
                else { print "!"; exit }
                for (e = 0; e < cnt; e++) {
                    h = b[p++]
                    if (h >= 160 && h <= 191) len = h - 160
                    else if (h == 217) len = b[p++]
                    else if (h == 218) { len = b[p] * 256 + b[p + 1]; p += 2 }
                    else { print "!"; exit }
                    if (p + len > n) { print "!"; exit }
                    s = ""
                    for (j = 0; j < len; j++) {
                        c = b[p + j]
                        if (c < 33 || c > 126) { print "!"; exit }
                        s = s sprintf("%c", c)
                    }
                    p += len
                    print s
                }
                exit
            }
        }
        BEGIN { for (c = 33; c < 127; c++) ord[sprintf("%c", c)] = c }'
}
# FILE -> its kpack search paths, one a line; nothing for a file without them; "!" for a marker
# that cannot be read. The key is found by its bytes (0xb2, a msgpack string of 18 bytes, then
# the name): the kpack runtime's own messages name it without that byte.
kpack_paths() {
    local off
    grep -q -a -F kpack_search_paths "$1" 2>/dev/null || return 0
    grep -a -b -o -F kpack_search_paths "$1" 2>/dev/null | cut -d: -f1 | while IFS= read -r off; do
        [ "$off" -gt 0 ] || continue
        [ "$(tail -c +"$off" "$1" | head -c 1 | od -An -tu1 | tr -d ' ')" = 178 ] || continue
        tail -c +"$off" "$1" | head -c 8192 | od -An -tu1 -v | mp_strings kpack_search_paths || true
    done
}
# ARCHIVE -> the targets its table of contents lists, one a line; "!" when it is no kpack archive.
kpack_archs() {
    local toc
    if [ "$(head -c 4 "$1" 2>/dev/null)" != KPAK ]; then echo "!"; return; fi
    toc=$(od -An -tu1 -j8 -N8 "$1" | awk '{ v = 0; for (i = NF; i >= 1; i--) v = v * 256 + $i; print v }')
    if [ -z "$toc" ] || [ "$toc" -lt 16 ] || [ "$toc" -ge "$(($(wc -c < "$1")))" ]; then echo "!"; return; fi
    tail -c +"$((toc + 1))" "$1" | head -c 1048576 | od -An -tu1 -v | mp_strings gfx_arches || true
}
# --- end of kpack readers ---

mkdir -p "$out"
out=$(cd "$out" && pwd -P)
pkg="$out/$name"
rm -rf "$pkg"
mkdir "$pkg"

# Where bundled libraries may come from: the toolkit directories given, then the directories of
# every library CMake linked.
runtime_dirs=()
while IFS= read -r d; do
    d=$(unix_path "$d")
    [ -d "$d" ] && runtime_dirs+=("$d")
done < <(split "${GPUPROBE_RUNTIME_DIRS:-}"
    [ -f "$build/CMakeCache.txt" ] && sed -n 's/^[A-Za-z0-9_]*_LIBRARY[A-Za-z_]*:FILEPATH=\(.*\)$/\1/p' "$build/CMakeCache.txt" \
        | grep -v -- '-NOTFOUND$' | while IFS= read -r f; do dirname "$f"; done | sort -u)

bundled=""  # "name<TAB>source" lines
bundle() { # SOURCE_PATH NAME
    [ -e "$pkg/$2" ] && return 1
    cp -L "$1" "$pkg/$2"
    chmod 0755 "$pkg/$2"
    bundled+="$2"$'\t'"$1"$'\n'
    echo "package: bundled $2 from $1"
}

# 1. The build: programs from bin/, every shared library wherever the build put it.
if [ "$os" = linux ]; then
    while IFS= read -r -d '' f; do
        [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && cp -P "$f" "$pkg/"
    done < <(find "$build/bin" -maxdepth 1 \( -type f -o -type l \) -perm -u+x ! -name '*.so*' -print0)
    while IFS= read -r -d '' f; do
        [ -e "$pkg/${f##*/}" ] || cp -P "$f" "$pkg/"
    done < <(find "$build" \( -type f -o -type l \) \( -name '*.so' -o -name '*.so.*' \) ! -path '*/CMakeFiles/*' -print0)
else
    while IFS= read -r -d '' f; do
        [ -e "$pkg/${f##*/}" ] || cp "$f" "$pkg/"
    done < <(find "$build" -type f \( -iname '*.exe' -o -iname '*.dll' \) ! -path '*/CMakeFiles/*' -print0)
fi
# Tests are not part of a release.
find "$pkg" -maxdepth 1 \( -name 'test-*' -o -name 'Test*' \) -delete
if ! find "$pkg" -maxdepth 1 \( -name 'llama-cli' -o -name 'llama-cli.exe' -o -name main -o -name main.exe \) | grep -q .; then
    echo "package: no llama-cli in $build" >&2
    exit 1
fi

# 2. Libraries the runtime opens by itself.
find_in_runtime() { # NAME-GLOB -> first match
    local d
    for d in "${runtime_dirs[@]}"; do
        find "$d" -maxdepth 1 -iname "$1" \( -type f -o -type l \) -print 2>/dev/null
    done | head -n 1
}
# A Linux library goes in under its SONAME (the name the loader asks for), once.
soname_of() {
    local n=""
    [ "$os" = linux ] && n=$(readelf -dW "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    printf '%s' "${n:-${1##*/}}"
}
while IFS= read -r g; do
    hits=$(for d in "${runtime_dirs[@]}"; do find "$d" -maxdepth 1 -iname "$g" \( -type f -o -type l \) 2>/dev/null; done)
    if [ -z "$hits" ]; then
        echo "package: note: $g (GPUPROBE_BUNDLE_EXTRA) is in none of: ${runtime_dirs[*]:-no runtime directories}"
        continue
    fi
    while IFS= read -r hit; do
        bundle "$hit" "$(soname_of "$hit")" || true
    done <<< "$hits"
done < <(split "${GPUPROBE_BUNDLE_EXTRA:-}")

# 3. Every library the programs need that is neither in the package nor from the base system or
#    the driver, until nothing is missing.
missing=""
if [ "$os" = linux ]; then
    interp=""
    for f in "$pkg"/*; do
        [ -f "$f" ] || continue
        interp=$(readelf -lW "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
        [ -n "$interp" ] && break
    done
    [ -n "$interp" ] || { echo "package: no program with a dynamic loader in $pkg" >&2; exit 1; }
    search=$(IFS=:; printf '%s' "${runtime_dirs[*]:-}")
    for _round in 1 2 3 4 5 6 7 8; do
        added=0
        for f in "$pkg"/*; do
            if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
            [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
            while IFS= read -r line; do
                case "$line" in *' => '*) ;; *) continue ;; esac
                lib=$(printf '%s' "$line" | sed 's/^[[:space:]]*\([^ ]*\) => .*/\1/')
                path=$(printf '%s' "$line" | sed 's/^[^=]*=> \(.*\) (0x[0-9a-f]*)$/\1/; s/^[^=]*=> //')
                [ -e "$pkg/$lib" ] && continue
                never_bundle "$lib" && continue
                if [ "$path" = "not found" ]; then
                    in_words "$lib" "$missing" || missing+="$lib "
                    continue
                fi
                bundle "$path" "$lib" && added=1
            done < <(LD_TRACE_LOADED_OBJECTS=1 LD_LIBRARY_PATH="$search${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$interp" "$f" 2>/dev/null || true)
        done
        [ "$added" -eq 1 ] || break
    done
else
    for _round in 1 2 3 4 5 6 7 8; do
        added=0
        while IFS= read -r -d '' f; do
            imports=$(pe_imports "$f" || true)
            while IFS= read -r dll; do
                [ -n "$dll" ] || continue
                find "$pkg" -maxdepth 1 -iname "$dll" | grep -q . && continue
                never_bundle "$dll" && continue
                hit=$(find_in_runtime "$dll")
                if [ -z "$hit" ]; then
                    in_words "$dll" "$missing" || missing+="$dll "
                    continue
                fi
                bundle "$hit" "${hit##*/}" && added=1
            done <<< "$imports"
        done < <(find "$pkg" -maxdepth 1 -type f \( -iname '*.exe' -o -iname '*.dll' \) -print0)
        [ "$added" -eq 1 ] || break
    done
fi
# The toolkit's own libraries may look for each other in its directory layout (e.g.
# $ORIGIN/rocm_sysdeps/lib); flat in the package they must look next to themselves.
if [ "$os" = linux ] && [ -n "$bundled" ]; then
    if command -v patchelf >/dev/null 2>&1; then
        while IFS=$'\t' read -r n _; do
            [ -n "$n" ] || continue
            # patchelf up to 0.18.0 corrupts the program headers of kpack-split libraries (their
            # PHDR in a trailing LOAD segment; TheRock docs/environment_setup_guide.md): those
            # keep their own RUNPATH, and the self-check shows whether it finds their libraries.
            if [ -n "$(kpack_paths "$pkg/$n")" ]; then
                echo "package: $n keeps its own RUNPATH (a kpack-split library, which patchelf would corrupt)"
                continue
            fi
            # shellcheck disable=SC2016 # the literal text $ORIGIN, for the loader
            patchelf --set-rpath '$ORIGIN' "$pkg/$n"
        done <<< "$bundled"
        echo "package: RUNPATH \$ORIGIN set on the bundled libraries (patchelf)"
    else
        echo "package: no patchelf: the bundled libraries keep their own RUNPATH"
    fi
fi
if [ -n "$missing" ]; then
    echo "package: cannot find ${missing% } in the build or in: ${runtime_dirs[*]:-no runtime directories}" >&2
    echo "package: the self-check will fail; set GPUPROBE_RUNTIME_DIRS to the toolkit's library directories" >&2
fi

# 4. Device code archives (TheRock 7.13 and later): a bundled library that carries kpack search
#    paths gets the archives they name for each built target, at the same place relative to the
#    library as in the toolkit. Paths that climb out of the library's directory
#    (../.kpack/...) put the programs and libraries in bin/ and the archives next to it.
targets=" $(printf '%s' "${GPUPROBE_TARGETS:-}" | tr ';,' '  ') "
targets_for() { # LIBRARY_NAME -> the targets its device code must cover (GPUPROBE_BUNDLE_DATA)
    local pair glob rest
    while IFS= read -r pair; do
        glob=${pair%%=*}
        rest=${pair#*=}
        # shellcheck disable=SC2254
        case "$(lower "$1")" in $(lower "$glob"))
            if [ "${rest#*=}" != "$rest" ]; then printf ' %s ' "$(printf '%s' "${rest#*=}" | tr ',' ' ')"; return; fi ;;
        esac
    done < <(split "${GPUPROBE_BUNDLE_DATA:-}")
    printf '%s' "$targets"
}
kpack_refs=""  # "name<TAB>source<TAB>path" lines
climb=0
if [ -n "$bundled" ]; then
    while IFS=$'\t' read -r n s; do
        [ -n "$n" ] || continue
        paths=$(kpack_paths "$pkg/$n")
        [ -n "$paths" ] || continue
        while IFS= read -r p; do
            rest=$p
            up=0
            while [ "${rest#../}" != "$rest" ]; do rest=${rest#../}; up=$((up + 1)); done
            case "/$rest/" in
                *//* | */../* | */./* | *\\*) rest="" ;;
            esac
            if [ "$p" = "!" ] || [ "${p#/}" != "$p" ] || [ "$rest" = "" ]; then
                echo "package: $n carries a kpack search path that cannot be followed ('$p')" >&2
                exit 1
            fi
            [ "$up" -le "$climb" ] || climb=$up
            kpack_refs+="$n"$'\t'"$s"$'\t'"$p"$'\n'
        done <<< "$paths"
    done <<< "$bundled"
fi
libdir=$pkg
if [ "$climb" -gt 1 ]; then
    echo "package: a bundled library looks for its device code $climb directories above its own; this package keeps its libraries one directory deep at most:" >&2
    printf '%s' "$kpack_refs" | awk -F '\t' '{ print "  " $1 ": " $3 }' >&2
    exit 1
elif [ "$climb" -eq 1 ]; then
    if [ -e "$pkg/bin" ]; then echo "package: the build has a file named bin at the top, where the programs go" >&2; exit 1; fi
    mkdir "$pkg/.bin"
    find "$pkg" -mindepth 1 -maxdepth 1 ! -name .bin -exec mv {} "$pkg/.bin/" \;
    mv "$pkg/.bin" "$pkg/bin"
    libdir=$pkg/bin
    echo "package: the toolkit's libraries find their device code in ../.kpack: programs and libraries go in bin/"
fi
if [ -n "$kpack_refs" ] && [ -z "$(printf '%s' "$targets" | tr -d ' ')" ]; then
    echo "package: $(printf '%s' "$kpack_refs" | cut -f1 | sort -u | tr '\n' ' ')looks for its device code per GPU target, and GPUPROBE_TARGETS names none: set it to the targets built (e.g. GPUPROBE_TARGETS='gfx1100;gfx1201')" >&2
    exit 1
fi
if [ -n "$kpack_refs" ]; then
    copied=0
    missing_code=""
    found=" "
    while IFS=$'\t' read -r n s p; do
        [ -n "$n" ] || continue
        for t in $(targets_for "$n"); do
            rel=${p//@GFXARCH@/$t}
            from="$(dirname "$s")/$rel"
            if [ -f "$from" ]; then
                found+="$n:$t "
                if [ ! -e "$libdir/$rel" ]; then
                    mkdir -p "$(dirname "$libdir/$rel")"
                    cp -L "$from" "$libdir/$rel"
                    copied=$((copied + 1))
                fi
            fi
        done
    done <<< "$kpack_refs"
    while IFS=$'\t' read -r n s p; do
        [ -n "$n" ] || continue
        for t in $(targets_for "$n"); do
            case "$found" in *" $n:$t "*) continue ;; esac
            case "$missing_code" in *"$n needs "*" for $t "*) continue ;; esac
            missing_code+="$n needs ${p//@GFXARCH@/$t} (from $(dirname "$s")) for $t
"
        done
    done <<< "$kpack_refs"
    if [ -n "$missing_code" ]; then
        printf 'package: device code the toolkit does not have:\n%s' "$missing_code" | sed '2,$s/^/  /' >&2
        echo "package: install the toolkit's device code for these targets (TheRock: rocm[device-<target>]), or leave the targets out" >&2
        exit 1
    fi
    # What the toolkit's archive folders hold besides: other targets' code, other libraries'.
    total=$(printf '%s' "$kpack_refs" | while IFS=$'\t' read -r _ s p; do
        [ -n "$s" ] && dirname "$(dirname "$s")/$p"
    done | sort -u | while IFS= read -r d; do
        [ -d "$d" ] && find "$d" -maxdepth 1 -type f -name '*.kpack'
    done | wc -l | tr -d ' ')
    left=$((total > copied ? total - copied : 0))
    echo "package: $copied device code archive(s) for the built targets ($left for other targets or libraries left out)"
fi

status=0
while IFS= read -r g; do
    if ! find "$libdir" -maxdepth 1 -iname "$g" | grep -q .; then
        echo "package: nothing matching $g (GPUPROBE_BUNDLE_EXPECT) was bundled" >&2
        status=1
    fi
done < <(split "${GPUPROBE_BUNDLE_EXPECT:-}")
[ "$status" -eq 0 ] || exit 1

# 5. Data folders (kernel libraries) next to the library that reads them, for the built targets.
targets=" $(printf '%s' "${GPUPROBE_TARGETS:-}" | tr ';,' '  ') "
while IFS= read -r pair; do
    lib_glob=${pair%%=*}
    rest=${pair#*=}
    folder=${rest%%=*}
    # LIBRARY=FOLDER=TARGETS: the targets the toolkit builds this library's kernels for.
    if [ "$rest" = "$folder" ]; then need=$targets; else need=" $(printf '%s' "${rest#*=}" | tr ',' ' ') "; fi
    source=""
    while IFS=$'\t' read -r n s; do
        # shellcheck disable=SC2254
        case "$(lower "$n")" in $(lower "$lib_glob")) source=$s; break ;; esac
    done <<< "$bundled"
    [ -n "$source" ] || continue
    from="$(dirname "$source")/$folder"
    if [ ! -d "$from" ]; then
        if [ -z "$(printf '%s' "$need" | tr -d ' ')" ]; then
            echo "package: note: $(basename "$source") has no $folder, and the toolkit builds its kernels for none of the targets"
            continue
        fi
        echo "package: $(basename "$source") is bundled but $from does not exist (its kernels are needed for:$need)" >&2
        exit 1
    fi
    kept=0
    skipped=0
    while IFS= read -r -d '' f; do
        rel=${f#"$from"/}
        archs=$(printf '%s' "${rel##*/}" | grep -o -E 'gfx[0-9a-f]{3,4}' | sort -u || true)
        keep=1
        if [ -n "$archs" ]; then
            keep=0
            for a in $archs; do in_words "$a" "$targets" && keep=1; done
        fi
        if [ "$keep" -eq 1 ]; then
            mkdir -p "$libdir/$folder/$(dirname "$rel")"
            cp -L "$f" "$libdir/$folder/$rel"
            kept=$((kept + 1))
        else
            skipped=$((skipped + 1))
        fi
    done < <(find "$from" \( -type f -o -type l \) -print0)
    echo "package: $folder: $kept files for the built targets ($skipped for other targets left out)"
done < <(split "${GPUPROBE_BUNDLE_DATA:-}")

# 6. LICENSE and what the package needs.
cp "$src/LICENSE" "$pkg/LICENSE"
glibc=""
if [ "$os" = linux ]; then
    needs=$(for f in "$libdir"/*; do
        if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
        readelf -VW "$f" 2>/dev/null | awk '
            /Version needs section/ { on = 1; next }
            /Version (definition|symbols) section/ { on = 0 }
            on && /File: / { file = $0; sub(/.*File: /, "", file); sub(/ .*/, "", file) }
            on && /Name: / { n = $0; sub(/.*Name: /, "", n); sub(/ .*/, "", n); print file, n }'
    done | sort -u)
    if printf '%s\n' "$needs" | grep -q '^libssl\.so\.3 '; then
        glibc+="OpenSSL 3 (libssl.so.3: the system OpenSSL of Ubuntu 22.04, Debian 12 and later); "
    fi
    for kind in GLIBC GLIBCXX; do
        max=$(printf '%s\n' "$needs" | while read -r file ver; do
            if [ -n "$file" ] && in_words "$file" "$LINUX_BASE"; then printf '%s\n' "$ver"; fi
        done | sed -n "s/^${kind}_\([0-9.]*\)$/\1/p" | sort -V | tail -n 1)
        [ -n "$max" ] && glibc+="${kind} ${max} or newer; "
    done
fi
{
    echo "$name"
    echo
    if [ "$libdir" = "$pkg" ]; then
        echo "Built by a workflow generated by gpuprobe. Unpack anywhere and run the programs from this"
        echo "directory; nothing needs to be installed besides what is listed under \"Needs\"."
    else
        echo "Built by a workflow generated by gpuprobe. Unpack anywhere and run the programs from its bin/"
        echo "directory; nothing needs to be installed besides what is listed under \"Needs\". The GPU"
        echo "device code of the toolkit's libraries is in .kpack/, where they look for it (../.kpack"
        echo "from bin/): keep the two together."
    fi
    echo
    echo "Contents: the llama.cpp programs and libraries of this build; LICENSE (llama.cpp's licence);"
    if [ -n "$bundled" ]; then
        echo "and these runtime libraries, bundled unchanged from the toolkit that built it (each keeps its"
        echo "own licence):"
        printf '%s' "$bundled" | while IFS=$'\t' read -r n s; do echo "  $n"; done
    else
        echo "no third-party runtime libraries."
    fi
    echo
    echo "Needs:"
    [ -z "$glibc" ] || echo "  - Linux with ${glibc%; } (measured from the binaries)"
    if [ -n "${GPUPROBE_PACKAGE_NOTES:-}" ] && [ -f "$GPUPROBE_PACKAGE_NOTES" ]; then
        cat "$GPUPROBE_PACKAGE_NOTES"
    fi
} > "$pkg/README.package.txt"

# 7. The archive.
if [ "$os" = linux ]; then
    archive="$out/$name.tar.gz"
    tar -C "$out" --owner=0 --group=0 -czf "$archive" "$name"
else
    archive="$out/$name.zip"
    rm -f "$archive"
    if command -v 7z >/dev/null 2>&1; then
        (cd "$out" && 7z a -tzip -bso0 "$name.zip" "$name" >/dev/null)
    else
        (cd "$out" && python3 -m zipfile -c "$name.zip" "$name")
    fi
fi
echo "package: $(find "$pkg" -type f | wc -l | tr -d ' ') files, $(du -sh "$archive" | cut -f1) packed"
echo "$archive"
