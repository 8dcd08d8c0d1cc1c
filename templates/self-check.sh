#!/usr/bin/env bash
# Proves that a packaged llama.cpp build is self-contained: unpacks ARCHIVE into an empty
# directory, checks that every library its programs load comes from the package itself or is part
# of the base system or the GPU driver, and runs llama-cli --version from there with a clean
# environment. Exit 0: self-contained; 1: not (each problem printed); 2: usage.
#
#   self-check.sh [--no-run] [--list-devices] ARCHIVE
#
# ARCHIVE is NAME.tar.gz (Linux, ELF) or NAME.zip (Windows, PE) holding one top-level directory
# with LICENSE and llama-cli in it (or in its bin/, next to a .kpack/ of device code archives).
# - Both: a library with kpack search paths (TheRock 7.13+) must find, for each target, an
#   archive inside the package whose table of contents lists the target.
# - Linux: every program, and every library that nothing in the package links (a backend module
#   that ggml loads at run time), is handed to the system's own dynamic loader with its cache
#   switched off (LD_TRACE_LOADED_OBJECTS=1 ld.so --inhibit-cache): each library it resolves must lie inside the
#   package, or be on the allow-list below; GPU driver libraries may also be missing here.
# - Windows: the import table of every .exe and .dll (objdump -p, llvm-objdump -p or dumpbin
#   /dependents) must name DLLs that are in the package, Windows system DLLs or driver DLLs.
# Environment:
#   GPUPROBE_DRIVER_LIBS  library names the GPU driver provides (libcuda.so.1, nvcuda.dll)
#   GPUPROBE_DRIVER_DIR   a directory holding only driver libraries (or a toolkit's stand-in for
#                         them) to put on the loader path when the programs run
#   GPUPROBE_TARGETS      the GPU targets built (gfx1100;gfx1201)
#   GPUPROBE_BUNDLE_DATA  LIBRARY=FOLDER[=TARGETS] pairs, ';'-separated: where LIBRARY is in the
#                         package, FOLDER next to it must hold kernels for each of TARGETS
#                         (comma-separated; default: every target built), and so must the .kpack
#                         archives it looks for (TheRock 7.13+). Default: the rocBLAS and
#                         hipBLASLt kernel folders
#   GITHUB_STEP_SUMMARY   when set, a summary is appended to it
# --no-run        static checks only (a Windows package looked at from Linux)
# --list-devices  also run llama-cli --list-devices and require exit 0
# GitHub runs bash with -e: every failure here is counted and reported instead.
set +e -uo pipefail

usage() {
    sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

run_programs=1
list_devices=0
archive=""
while [ $# -gt 0 ]; do
    case "$1" in
        --no-run) run_programs=0 ;;
        --list-devices) list_devices=1 ;;
        -h | --help) usage ;;
        -*) echo "self-check: unknown option $1" >&2; usage ;;
        *) [ -z "$archive" ] || usage; archive=$1 ;;
    esac
    shift
done
[ -n "$archive" ] || usage
[ -f "$archive" ] || { echo "self-check: $archive is not a file" >&2; exit 2; }

# Libraries every Linux system that can run these programs has: the C library family and the
# GCC runtime (what the glibc/GLIBCXX versions below are measured against).
LINUX_BASE="linux-vdso.so.1 linux-gate.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libc.so.6
libm.so.6 libmvec.so.1 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2
libanl.so.1 libstdc++.so.6 libgcc_s.so.1"
# OpenSSL 3, used from the system so that HTTPS finds the distribution's CA certificates: every
# mainstream distribution since 2022 has it; the package's README states it where it is linked.
LINUX_STATED="libssl.so.3 libcrypto.so.3"
# DLLs that are part of Windows itself (compared without case). The C runtime of Windows 10 and
# later (ucrtbase, api-ms-win-crt-*) is; Visual C++'s (vcruntime140, msvcp140, vcomp140) is not.
WINDOWS_BASE="kernel32.dll kernelbase.dll ntdll.dll user32.dll gdi32.dll advapi32.dll shell32.dll
ole32.dll oleaut32.dll ws2_32.dll mswsock.dll bcrypt.dll ncrypt.dll crypt32.dll secur32.dll
shlwapi.dll version.dll winmm.dll iphlpapi.dll psapi.dll dbghelp.dll comdlg32.dll comctl32.dll
userenv.dll cfgmgr32.dll setupapi.dll rpcrt4.dll imm32.dll powrprof.dll winhttp.dll wininet.dll
normaliz.dll wintrust.dll dxgi.dll d3d12.dll dxcore.dll ucrtbase.dll"
driver_libs=" ${GPUPROBE_DRIVER_LIBS:-} "
driver_dir=${GPUPROBE_DRIVER_DIR:-}

failures=0
rows=""
fail() {
    failures=$((failures + 1))
    echo "FAIL: $*"
    rows+="| FAIL | $(printf '%s' "$*" | tr '\n|' ' /') |"$'\n'
}
ok() {
    echo "ok: $*"
    rows+="| ok | $(printf '%s' "$*" | tr '\n|' ' /') |"$'\n'
}
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
in_words() { case " $(printf '%s' "$2" | tr '\n' ' ') " in *" $1 "*) return 0 ;; esac; return 1; }
is_driver_lib() { in_words "$1" "$driver_libs" || in_words "$(lower "$1")" "$(lower "$driver_libs")"; }
linux_allowed() { in_words "$1" "$LINUX_BASE" || in_words "$1" "$LINUX_STATED" || is_driver_lib "$1"; }
windows_allowed() {
    local n
    n=$(lower "$1")
    case "$n" in api-ms-win-* | ext-ms-*) return 0 ;; esac
    in_words "$n" "$WINDOWS_BASE" || is_driver_lib "$n"
}

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

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuprobe-self-check.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir "$work/unpacked"
case "$archive" in
    *.tar.gz | *.tgz)
        os=linux
        tar -xzf "$archive" -C "$work/unpacked" || { echo "self-check: cannot unpack $archive"; exit 1; }
        ;;
    *.zip)
        os=windows
        if command -v unzip >/dev/null 2>&1; then
            unzip -q "$archive" -d "$work/unpacked"
        elif command -v 7z >/dev/null 2>&1; then
            7z x -y -o"$work/unpacked" "$archive" >/dev/null
        else
            python3 -m zipfile -e "$archive" "$work/unpacked"
        fi || { echo "self-check: cannot unpack $archive"; exit 1; }
        ;;
    *) echo "self-check: $archive is neither .tar.gz nor .zip" >&2; exit 2 ;;
esac

tops=()
for d in "$work"/unpacked/* "$work"/unpacked/.[!.]*; do
    [ -e "$d" ] || [ -L "$d" ] || continue
    tops+=("$d")
done
if [ ${#tops[@]} -ne 1 ] || [ ! -d "${tops[0]}" ] || [ -L "${tops[0]}" ]; then
    echo "FAIL: $archive must hold exactly one top-level directory (found ${#tops[@]} entries)"
    exit 1
fi
pkg=$(cd "${tops[0]}" && pwd -P)
name=${pkg##*/}
echo "self-check: $archive unpacked into $pkg ($os)"

inside() { case "$1" in "$pkg" | "$pkg"/*) return 0 ;; esac; return 1; }

# Symbolic links must stay inside the package.
while IFS= read -r -d '' l; do
    target=$(readlink -f "$l" 2>/dev/null || true)
    if [ -z "$target" ] || ! inside "$target"; then
        fail "${l#"$pkg"/} is a link to ${target:-a missing file} outside the package"
    fi
done < <(find "$pkg" -type l -print0)

if [ -f "$pkg/LICENSE" ]; then ok "LICENSE is in the package"; else fail "no LICENSE at the top of the package"; fi

# The programs and libraries are at the top, or in bin/ when the toolkit's libraries look for
# their device code one directory up (../.kpack, templates/package.sh).
cli=""
for c in llama-cli llama-cli.exe main main.exe bin/llama-cli bin/llama-cli.exe bin/main bin/main.exe; do
    if [ -f "$pkg/$c" ]; then cli="$pkg/$c"; break; fi
done
libdir=$pkg
[ -z "$cli" ] || libdir=$(dirname "$cli")
if [ -z "$cli" ]; then
    fail "no llama-cli in the package"
elif [ "$os" = linux ] && [ ! -x "$cli" ]; then
    fail "${cli##*/} has lost its execute bit"
fi

# Kernel folders of ROCm's BLAS libraries: without the kernels for a GPU, rocBLAS stops at the
# first matrix product on it. GPUPROBE_BUNDLE_DATA names them as LIBRARY=FOLDER=TARGETS (the
# targets the folder must cover; without =TARGETS, every target built); a library built with no
# kernels for any of the targets needs no folder.
check_kernels() { # LIBRARY_GLOB FOLDER TARGETS
    local lib folder t found
    lib=$(find "$libdir" -maxdepth 1 -iname "$1" -print -quit)
    [ -n "$lib" ] || return 0
    folder="$libdir/$2"
    if [ ! -d "$folder" ]; then
        if [ -z "$(printf '%s' "$3" | tr -d ' ')" ]; then
            ok "${lib##*/} has no kernel folder $2, and the toolkit builds its kernels for none of the targets"
        else
            fail "${lib##*/} is in the package but its kernel folder $2 is not (needed for: $(printf '%s' "$3" | xargs))"
        fi
        return
    fi
    for t in $3; do
        found=$(find "$folder" -type f | grep -E "${t}([^0-9a-z]|\$)" | head -n 1)
        if [ -z "$found" ]; then fail "$2 has no kernels for $t"; fi
    done
    ok "$2 is next to ${lib##*/} ($(find "$folder" -type f | wc -l | tr -d ' ') files)"
}
all_targets=$(printf '%s' "${GPUPROBE_TARGETS:-}" | tr ';,' '  ')
bundle_data=${GPUPROBE_BUNDLE_DATA:-librocblas.so*=rocblas/library;libhipblaslt.so*=hipblaslt/library;*rocblas.dll=rocblas/library;*hipblaslt.dll=hipblaslt/library}
while IFS= read -r pair; do
    [ -n "$pair" ] || continue
    lib_glob=${pair%%=*}
    rest=${pair#*=}
    folder=${rest%%=*}
    if [ "$rest" = "$folder" ]; then need=$all_targets; else need=$(printf '%s' "${rest#*=}" | tr ',' ' '); fi
    check_kernels "$lib_glob" "$folder" "$need"
done < <(printf '%s\n' "$bundle_data" | tr ';' '\n')

requirements=""

elf_machine() { # FILE -> e_machine of an ELF file (16 bits at offset 18, in the file's byte order)
    if [ "$(od -An -tu1 -j5 -N1 "$1" | tr -d ' ')" = 2 ]; then
        od -An -tu1 -j18 -N2 "$1" | awk '{ print $1 * 256 + $2 }'
    else
        od -An -tu1 -j18 -N2 "$1" | awk '{ print $2 * 256 + $1 }'
    fi
}

check_linux() {
    command -v readelf >/dev/null 2>&1 || { fail "readelf (binutils) is needed to read the ELF files"; return; }
    local f elves=() needed_all="" roots=() interp="" n code_objects=0
    while IFS= read -r -d '' f; do
        [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
        # GPU code objects (rocBLAS's .hsaco, Tensile's .co) are ELF files for the GPU, not for
        # the host loader: told apart by the header's e_machine, EM_AMDGPU (224), not by name.
        if [ "$(elf_machine "$f")" = 224 ]; then
            code_objects=$((code_objects + 1))
            continue
        fi
        elves+=("$f")
    done < <(find "$pkg" -type f -print0)
    [ "$code_objects" -eq 0 ] || echo "note: $code_objects AMDGPU code object(s) (ELF e_machine 224) are GPU kernels, not handed to the host loader"
    if [ ${#elves[@]} -eq 0 ]; then fail "no ELF files in the package"; return; fi
    for f in "${elves[@]}"; do
        needed_all+=" $(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
        while IFS= read -r n; do
            # shellcheck disable=SC2016 # the literal text $ORIGIN, for the loader
            case "$n" in
                *'$ORIGIN'* | *'${ORIGIN}'*) ;;
                /*) echo "warning: ${f#"$pkg"/} searches $n on the user's machine (RUNPATH/RPATH outside the package)" ;;
            esac
        done < <(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' | tr ':' '\n')
    done
    for f in "${elves[@]}"; do
        local i soname
        i=$(readelf -lW "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
        if [ -n "$i" ]; then
            roots+=("$f")
            [ -n "$interp" ] || interp=$i
            continue
        fi
        soname=$(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
        if ! in_words "${soname:-${f##*/}}" "$needed_all" && ! in_words "${f##*/}" "$needed_all"; then
            roots+=("$f")
        fi
    done
    if [ -z "$interp" ] || [ ! -x "$interp" ]; then
        fail "no program in the package names a dynamic loader present here (${interp:-none})"
        return
    fi
    local env_cmd=(env -i "PATH=/usr/bin:/bin")
    [ -n "$driver_dir" ] && env_cmd+=("LD_LIBRARY_PATH=$driver_dir")
    local seen=" " root out line lib path real bad system_libs=" " before=$failures
    for root in "${roots[@]}"; do
        # ld.so --list stops at the first missing library of a shared object; the trace lists all.
        out=$("${env_cmd[@]}" LD_TRACE_LOADED_OBJECTS=1 "$interp" --inhibit-cache "$root" 2>&1)
        bad=0
        while IFS= read -r line; do
            case "$line" in *' => '*) ;; *) continue ;; esac
            lib=$(printf '%s' "$line" | sed 's/^[[:space:]]*\([^ ]*\) => .*/\1/')
            path=$(printf '%s' "$line" | sed 's/^[^=]*=> \(.*\) (0x[0-9a-f]*)$/\1/; s/^[^=]*=> //')
            case " $seen " in *" ${root##*/}:$lib "*) continue ;; esac
            seen+="${root##*/}:$lib "
            if [ "$path" = "not found" ]; then
                if is_driver_lib "$lib"; then
                    echo "note: $lib (GPU driver) is not on this machine; ${root#"$pkg"/} needs it where it runs"
                else
                    fail "${root#"$pkg"/} needs $lib, which is neither in the package nor on this system"
                    bad=1
                fi
                continue
            fi
            real=$(readlink -f "$path" 2>/dev/null || printf '%s' "$path")
            if inside "$real"; then
                continue
            elif linux_allowed "$lib"; then
                system_libs+="$lib "
            else
                fail "${root#"$pkg"/} loads $lib from $path, outside the package (bundle it, or build with -DCMAKE_INSTALL_RPATH='\$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON)"
                bad=1
            fi
        done <<< "$out"
        if [ "$bad" -eq 0 ] && printf '%s' "$out" | grep -q -E 'not a dynamic|cannot|error'; then
            fail "the loader could not read ${root#"$pkg"/}: $(printf '%s' "$out" | head -n 2 | tr '\n' ' ')"
        fi
    done
    [ "$failures" -eq "$before" ] && ok "${#roots[@]} program(s)/module(s) of ${#elves[@]} ELF files resolve every library inside the package or from the system:$(printf '%s' "$system_libs" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ *$//; s/^ */ /')"
    if in_words libssl.so.3 "$system_libs"; then requirements+="OpenSSL 3 (libssl.so.3); "; fi
    # Symbol versions the package needs from the base system: its glibc and libstdc++ minimum.
    local needs
    needs=$(for f in "${elves[@]}"; do
        readelf -VW "$f" 2>/dev/null | awk '
            /Version needs section/ { on = 1; next }
            /Version (definition|symbols) section/ { on = 0 }
            on && /File: / { file = $0; sub(/.*File: /, "", file); sub(/ .*/, "", file) }
            on && /Name: / { n = $0; sub(/.*Name: /, "", n); sub(/ .*/, "", n); print file, n }'
    done | sort -u)
    local kind max
    for kind in GLIBC GLIBCXX CXXABI; do
        max=$(printf '%s\n' "$needs" | while read -r file ver; do
            if [ -n "$file" ] && linux_allowed "$file"; then printf '%s\n' "$ver"; fi
        done | sed -n "s/^${kind}_\([0-9.]*\)$/\1/p" | sort -V | tail -n 1)
        [ -n "$max" ] && requirements+="${kind} >= ${max}; "
    done
}

pe_imports() { # FILE -> one DLL name a line
    if command -v objdump >/dev/null 2>&1 && objdump -p "$1" >/dev/null 2>&1; then
        objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: *//p'
    elif command -v llvm-objdump >/dev/null 2>&1; then
        llvm-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: *//p'
    elif command -v dumpbin >/dev/null 2>&1; then
        dumpbin /nologo /dependents "$1" | awk '/has the following dependencies/ { on = 1; next } on && /^ *$/ { if (seen) exit; next } on { seen = 1; sub(/^ +/, ""); print }'
    else
        return 3
    fi | tr -d '\r'
}

check_windows() {
    local f dll have bad=0 n=0 system_dlls=" "
    have=" $(find "$libdir" -maxdepth 1 -type f -iname '*.dll' -exec basename {} \; | tr '[:upper:]' '[:lower:]' | tr '\n' ' ') "
    while IFS= read -r -d '' f; do
        n=$((n + 1))
        local imports
        if ! imports=$(pe_imports "$f"); then
            fail "no objdump, llvm-objdump or dumpbin to read the import table of ${f#"$pkg"/}"
            return
        fi
        while IFS= read -r dll; do
            [ -n "$dll" ] || continue
            if in_words "$(lower "$dll")" "$have"; then
                continue
            elif windows_allowed "$dll"; then
                system_dlls+="$(lower "$dll") "
            else
                fail "${f#"$pkg"/} imports $dll, which is neither in the package nor part of Windows or the GPU driver"
                bad=1
            fi
        done <<< "$imports"
    done < <(find "$pkg" -type f \( -iname '*.exe' -o -iname '*.dll' \) -print0)
    if [ "$n" -eq 0 ]; then fail "no .exe or .dll in the package"; return; fi
    [ "$bad" -eq 0 ] && ok "$n PE files import only DLLs in the package or from Windows/the driver:$(printf '%s' "$system_dlls" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ *$//; s/^ */ /')"
}

# The targets a library's device code must cover: GPUPROBE_BUNDLE_DATA's TARGETS for it, as for
# its kernel folder, else every target built.
targets_for() {
    local pair glob rest
    while IFS= read -r pair; do
        [ -n "$pair" ] || continue
        glob=${pair%%=*}
        rest=${pair#*=}
        # shellcheck disable=SC2254
        case "$(lower "$1")" in $(lower "$glob"))
            if [ "${rest#*=}" != "$rest" ]; then printf '%s' "${rest#*=}" | tr ',' ' '; return; fi ;;
        esac
    done < <(printf '%s\n' "$bundle_data" | tr ';' '\n')
    printf '%s' "$all_targets"
}

# Every library that carries kpack search paths (TheRock 7.13 and later) must find, for each
# target its device code covers, an archive inside the package that lists the target.
check_kpacks() {
    local f paths p t rel path real archs found tried why need name libs=0 before=$failures names=""
    while IFS= read -r -d '' f; do
        if [ "$os" = linux ]; then
            [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
            [ "$(elf_machine "$f")" != 224 ] || continue
        else
            case "$(lower "$f")" in *.dll | *.exe) ;; *) continue ;; esac
        fi
        paths=$(kpack_paths "$f")
        [ -n "$paths" ] || continue
        libs=$((libs + 1))
        name=${f#"$pkg"/}
        names+=" ${f##*/}"
        if printf '%s\n' "$paths" | grep -q -x '!'; then
            fail "$name carries a kpack marker that cannot be read"
            continue
        fi
        if [ -z "$(printf '%s' "$all_targets" | tr -d ' ')" ]; then
            fail "$name looks for its device code per GPU target, and GPUPROBE_TARGETS names none to check"
            continue
        fi
        need=$(targets_for "${f##*/}")
        for t in $need; do
            found=0
            tried=""
            why=""
            while IFS= read -r p; do
                rel=${p//@GFXARCH@/$t}
                tried+=" $rel"
                path="$(dirname "$f")/$rel"
                [ -f "$path" ] || continue
                real=$(readlink -f "$path" 2>/dev/null || printf '%s' "$path")
                if ! inside "$real"; then why+="; $rel is outside the package"; continue; fi
                archs=$(kpack_archs "$path")
                if [ "$archs" = "!" ]; then why+="; $rel is no kpack archive (no KPAK header and table of contents)"; continue; fi
                if printf '%s\n' "$archs" | grep -q -x -F "$t"; then found=1; break; fi
                why+="; $rel lists $(printf '%s' "$archs" | tr '\n' ' ' | sed 's/ *$//'), not $t"
            done <<< "$paths"
            if [ "$found" -eq 0 ]; then
                fail "$name finds no device code for $t (looked for${tried}, relative to its directory${why})"
            fi
        done
    done < <(find "$pkg" -type f -print0)
    if [ "$libs" -gt 0 ] && [ "$failures" -eq "$before" ]; then
        if [ "$libs" -eq 1 ]; then
            ok "1 library finds its kpack device code for every target:$names"
        else
            ok "$libs libraries find their kpack device code for every target:$names"
        fi
    fi
}

if [ "$os" = linux ]; then check_linux; else check_windows; fi
check_kpacks

run_cli() { # ARGS... ; prints the output, returns the exit status
    local env_cmd
    if [ "$os" = linux ]; then
        env_cmd=(env -i "PATH=/usr/bin:/bin" "HOME=$work" "LANG=C")
        [ -n "$driver_dir" ] && env_cmd+=("LD_LIBRARY_PATH=$driver_dir")
    else
        local sysroot
        sysroot=$(cygpath -u "${SYSTEMROOT:-C:\\Windows}" 2>/dev/null || echo /c/Windows)
        env_cmd=(env -i "PATH=$sysroot/System32:$sysroot${driver_dir:+:$driver_dir}"
            "SYSTEMROOT=${SYSTEMROOT:-C:\\Windows}" "WINDIR=${WINDIR:-C:\\Windows}"
            "TEMP=${TEMP:-$work}" "TMP=${TMP:-$work}")
    fi
    local limit=()
    command -v timeout >/dev/null 2>&1 && limit=(timeout 120)
    # From a directory outside the package: nothing may depend on the working directory.
    (cd "$work" && "${limit[@]}" "${env_cmd[@]}" "$cli" "$@" 2>&1)
}

if [ -n "$cli" ] && [ "$run_programs" -eq 1 ]; then
    if [ "$os" = windows ] && ! uname -s | grep -q -i -E 'mingw|msys|cygwin'; then
        fail "a Windows package cannot be run here (use --no-run for the static checks only)"
    else
        out=$(run_cli --version)
        rc=$?
        printf '%s\n' "$out" | sed 's/^/  | /'
        version=$(printf '%s\n' "$out" | tr -d '\r' | grep -m 1 'version: ')
        if [ "$rc" -ne 0 ]; then
            fail "${cli##*/} --version exited with $rc in a clean environment"
        elif [ -z "$version" ]; then
            fail "${cli##*/} --version printed no version line"
        else
            ok "${cli##*/} --version runs from the unpacked package with a clean environment: $version"
        fi
        if [ "$list_devices" -eq 1 ]; then
            out=$(run_cli --list-devices)
            rc=$?
            printf '%s\n' "$out" | sed 's/^/  | /'
            if [ "$rc" -ne 0 ]; then
                fail "${cli##*/} --list-devices exited with $rc"
            else
                ok "${cli##*/} --list-devices: $(printf '%s\n' "$out" | grep -c -E '^  [A-Za-z]+[0-9]+: ') device(s)"
            fi
        fi
    fi
fi

if [ -n "$requirements" ]; then
    echo "requires from the base system: ${requirements%; }"
fi
{
    echo "### Self-check of ${name}"
    echo
    echo "| result | check |"
    echo "|---|---|"
    printf '%s' "$rows"
    [ -z "$requirements" ] || printf '\nRequires from the base system: %s\n' "${requirements%; }"
    echo
} >> "${GITHUB_STEP_SUMMARY:-/dev/null}"
if [ "$failures" -gt 0 ]; then
    echo "self-check: $name is NOT self-contained ($failures problem(s))"
    exit 1
fi
echo "self-check: $name is self-contained"
