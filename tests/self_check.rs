//! templates/package.sh and templates/self-check.sh, the release workflow's packing and proof.
//!
//! - On a real CPU build of llama.cpp 11434 made with the workflow's Linux flags
//!   (scripts/build-llama-cpu.sh, which scripts/test.sh runs and points GPUPROBE_LLAMA_CPU_PACKAGES
//!   at): the package is self-contained; the same build without `$ORIGIN` is not; a package that
//!   lost its LICENSE, an execute bit or a library is not.
//! - The packing logic (the loader-driven bundling, kernel folders filtered by target, the
//!   libraries a package must contain) on a small toolkit layout compiled here with cc: real ELF
//!   files, standing in for no GPU runtime.
//! - Windows import tables, read from a real PE file (pip's Windows launcher).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sh(script: &str, args: &[&Path], env: &[(&str, &str)]) -> Output {
    // As GitHub runs a workflow's bash steps.
    let mut c = Command::new("bash");
    c.args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(repo().join("templates").join(script))
        .args(args);
    c.env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GPUPROBE_DRIVER_LIBS")
        .env_remove("GPUPROBE_DRIVER_DIR")
        .env_remove("GPUPROBE_TARGETS");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn run(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
}

/// The archives scripts/build-llama-cpu.sh made, or None (skipped) outside CI.
fn packages() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUPROBE_LLAMA_CPU_PACKAGES")
        .map(PathBuf::from)
        .filter(|d| d.join("llama-cpu.tar.gz").is_file());
    if dir.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "GPUPROBE_LLAMA_CPU_PACKAGES must point at the packed CPU build in CI"
        );
        eprintln!("skipped: GPUPROBE_LLAMA_CPU_PACKAGES not set (scripts/test.sh builds it)");
    }
    dir
}

#[test]
fn the_real_cpu_package_is_self_contained() {
    let Some(dir) = packages() else { return };
    let summary = tempfile::NamedTempFile::new().unwrap();
    let o = sh(
        "self-check.sh",
        &[&dir.join("llama-cpu.tar.gz")],
        &[("GITHUB_STEP_SUMMARY", summary.path().to_str().unwrap())],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("ok: LICENSE is in the package"), "{out}");
    assert!(
        out.contains(
            "llama-cli --version runs from the unpacked package with a clean environment: version: "
        ),
        "{out}"
    );
    assert!(
        out.contains("resolve every library inside the package or from the system"),
        "{out}"
    );
    let needs = out
        .lines()
        .find(|l| l.starts_with("requires from the base system: "))
        .unwrap_or_else(|| panic!("no requirements line: {out}"));
    assert!(needs.contains("GLIBC >= 2."), "{needs}");
    assert!(
        out.contains("self-check: llama-cpu is self-contained"),
        "{out}"
    );
    let md = std::fs::read_to_string(summary.path()).unwrap();
    assert!(md.contains("### Self-check of llama-cpu"), "{md}");
    assert!(!md.contains("| FAIL |"), "{md}");
}

#[test]
fn the_same_build_without_origin_fails() {
    let Some(dir) = packages() else { return };
    let o = sh(
        "self-check.sh",
        &[&dir.join("llama-cpu-no-origin.tar.gz")],
        &[],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("outside the package"), "{out}");
    assert!(
        out.contains("CMAKE_INSTALL_RPATH"),
        "the fix is named: {out}"
    );
    assert!(out.contains("is NOT self-contained"), "{out}");
}

/// Unpacks `archive` into a temporary directory, lets `change` edit the package directory, and
/// packs it again under the same name.
fn repacked(archive: &Path, change: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir.path()));
    let name = archive
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_end_matches(".tar.gz")
        .to_string();
    change(&dir.path().join(&name));
    let out = dir.path().join(format!("{name}.tar.gz"));
    run(Command::new("tar")
        .arg("-C")
        .arg(dir.path())
        .arg("-czf")
        .arg(&out)
        .arg(&name));
    (dir, out)
}

#[test]
fn a_package_that_lost_its_licence_or_an_execute_bit_fails() {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = packages() else { return };
    let (_keep, bad) = repacked(&dir.join("llama-cpu.tar.gz"), |pkg| {
        std::fs::remove_file(pkg.join("LICENSE")).unwrap();
        std::fs::set_permissions(
            pkg.join("llama-cli"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    });
    let o = sh("self-check.sh", &[&bad], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL: no LICENSE"), "{out}");
    assert!(
        out.contains("FAIL: llama-cli has lost its execute bit"),
        "{out}"
    );
}

#[test]
fn a_package_missing_a_library_fails() {
    let Some(dir) = packages() else { return };
    let (_keep, bad) = repacked(&dir.join("llama-cpu.tar.gz"), |pkg| {
        for e in std::fs::read_dir(pkg).unwrap() {
            let p = e.unwrap().path();
            if p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("libllama.so")
            {
                std::fs::remove_file(p).unwrap();
            }
        }
    });
    let o = sh("self-check.sh", &[&bad], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("needs libllama.so")
            && out.contains("neither in the package nor on this system"),
        "{out}"
    );
}

/// Compiles a small AMDGPU code object for `arch` with clang-19 and ld.lld-19 (both installed by
/// scripts/install-toolchains.sh) into `dir/name`.
fn amdgpu_code_object(dir: &Path, name: &str, arch: &str) {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, "void k(int *p) { *p = 1; }\n").unwrap();
    run(Command::new("clang-19")
        .args(["-x", "c", "--target=amdgcn-amd-amdhsa", "-nogpulib", "-O1"])
        .arg(format!("-mcpu={arch}"))
        .arg("-o")
        .arg(dir.join(name))
        .arg(&src));
    std::fs::remove_file(&src).unwrap();
    let head = std::fs::read(dir.join(name)).unwrap();
    assert_eq!(&head[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([head[18], head[19]]), 224, "EM_AMDGPU");
}

fn cc(args: &[&str], dir: &Path) {
    run(Command::new("cc").args(args).current_dir(dir));
}

/// A build tree and a toolkit directory with the shape of a ROCm build: llama-cli links
/// libggml-hip.so, which links the toolkit's librocblas.so.4; rocBLAS has a kernel folder with
/// files for several GPU targets. Every file is a real ELF file compiled here.
fn toolkit_layout() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let kit = root.path().join("rocm/lib");
    let build = root.path().join("build");
    let src = root.path().join("src");
    for d in [&kit, &build.join("bin"), &src] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        kit.join("blas.c"),
        "int rocblas_version(void) { return 4; }\n",
    )
    .unwrap();
    cc(
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,librocblas.so.4",
            "-o",
            "librocblas.so.4.2",
            "blas.c",
        ],
        &kit,
    );
    std::os::unix::fs::symlink("librocblas.so.4.2", kit.join("librocblas.so.4")).unwrap();
    let lib = kit.join("rocblas/library");
    std::fs::create_dir_all(&lib).unwrap();
    for f in [
        "TensileLibrary_lazy_gfx1100.dat",
        "TensileLibrary_Type_HH_gfx90a.co",
        "TensileManifest.txt",
    ] {
        std::fs::write(lib.join(f), f).unwrap();
    }
    // A real AMDGPU code object, as rocBLAS's kernel folders hold them: an ELF file that the
    // host loader cannot load.
    amdgpu_code_object(&lib, "Kernels.so-000-gfx1201.hsaco", "gfx1201");
    let bin = build.join("bin");
    std::fs::write(
        bin.join("hip.c"),
        "int rocblas_version(void); int ggml_hip(void) { return rocblas_version(); }\n",
    )
    .unwrap();
    let kit_s = kit.to_str().unwrap();
    cc(
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libggml-hip.so",
            "hip.c",
            "-L",
            kit_s,
            "-l:librocblas.so.4",
            "-Wl,-rpath,$ORIGIN",
        ],
        &bin,
    );
    std::fs::write(
        bin.join("cli.c"),
        "#include <stdio.h>\nint ggml_hip(void);\nint main(void) { printf(\"version: 1 (layout test %d)\\n\", ggml_hip()); return 0; }\n",
    )
    .unwrap();
    cc(
        &[
            "-o",
            "llama-cli",
            "cli.c",
            "-L.",
            "-lggml-hip",
            "-L",
            kit_s,
            "-Wl,-rpath,$ORIGIN",
            "-Wl,-rpath-link",
            kit_s,
        ],
        &bin,
    );
    for f in ["hip.c", "cli.c"] {
        std::fs::remove_file(bin.join(f)).unwrap();
    }
    (root, build, src, kit)
}

#[test]
fn packing_bundles_what_the_loader_needs_and_only_the_built_targets_kernels() {
    let (root, build, src, kit) = toolkit_layout();
    let out = root.path().join("dist");
    let kit_s = kit.to_str().unwrap().to_string();
    let env = [
        ("GPUPROBE_OS", "linux"),
        ("GPUPROBE_RUNTIME_DIRS", kit_s.as_str()),
        ("GPUPROBE_BUNDLE_EXPECT", "librocblas.so.*"),
        ("GPUPROBE_BUNDLE_DATA", "librocblas.so.*=rocblas/library"),
        ("GPUPROBE_TARGETS", "gfx1100;gfx1201"),
    ];
    let o = sh(
        "package.sh",
        &[&build, &src, &out, Path::new("llama-test")],
        &env,
    );
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("bundled librocblas.so.4 from"), "{log}");
    assert!(
        log.contains(
            "rocblas/library: 3 files for the built targets (1 for other targets left out)"
        ),
        "{log}"
    );
    let pkg = out.join("llama-test");
    assert!(
        pkg.join("rocblas/library/TensileLibrary_lazy_gfx1100.dat")
            .is_file()
    );
    assert!(
        !pkg.join("rocblas/library/TensileLibrary_Type_HH_gfx90a.co")
            .exists()
    );
    let readme = std::fs::read_to_string(pkg.join("README.package.txt")).unwrap();
    assert!(readme.contains("librocblas.so.4"), "{readme}");
    assert!(readme.contains("Linux with GLIBC"), "{readme}");

    // The toolkit directory is gone on the user's machine: the package still runs.
    let archive = out.join("llama-test.tar.gz");
    std::fs::rename(&kit, root.path().join("moved")).unwrap();
    let ok = sh(
        "self-check.sh",
        &[&archive],
        &[("GPUPROBE_TARGETS", "gfx1100;gfx1201")],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    assert!(
        text(&ok).contains("rocblas/library is next to librocblas.so.4"),
        "{}",
        text(&ok)
    );
    // A target whose kernels are not in the package.
    let bad = sh(
        "self-check.sh",
        &[&archive],
        &[("GPUPROBE_TARGETS", "gfx1100;gfx1030")],
    );
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        text(&bad).contains("rocblas/library has no kernels for gfx1030"),
        "{}",
        text(&bad)
    );
}

#[test]
fn packing_fails_when_an_expected_runtime_library_is_not_found() {
    let (root, build, src, _kit) = toolkit_layout();
    let out = root.path().join("dist");
    // No runtime directories: librocblas cannot be found, so it cannot be bundled.
    let o = sh(
        "package.sh",
        &[&build, &src, &out, Path::new("llama-test")],
        &[
            ("GPUPROBE_OS", "linux"),
            ("GPUPROBE_BUNDLE_EXPECT", "librocblas.so.*"),
        ],
    );
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("cannot find librocblas.so.4"), "{log}");
    assert!(
        log.contains("nothing matching librocblas.so.* (GPUPROBE_BUNDLE_EXPECT) was bundled"),
        "{log}"
    );
}

/// A real Windows PE file: the launcher pip ships for console scripts.
fn windows_launcher() -> Option<PathBuf> {
    let python = std::env::var_os("GPUPROBE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "python3".into());
    let o = Command::new(python)
        .args([
            "-c",
            "import os, pip._vendor.distlib as d; print(os.path.join(os.path.dirname(d.__file__), 't64.exe'))",
        ])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    p.is_file().then_some(p)
}

fn zip_package(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("llama-win");
    std::fs::create_dir(&pkg).unwrap();
    for (name, bytes) in files {
        std::fs::write(pkg.join(name), bytes).unwrap();
    }
    let zip = dir.path().join("llama-win.zip");
    run(Command::new("python3")
        .args(["-m", "zipfile", "-c"])
        .arg(&zip)
        .arg("llama-win")
        .current_dir(dir.path()));
    (dir, zip)
}

#[test]
fn windows_import_tables_are_read_from_real_pe_files() {
    let Some(exe) = windows_launcher() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "pip's t64.exe is needed in CI"
        );
        eprintln!("skipped: no pip t64.exe found");
        return;
    };
    let pe = std::fs::read(&exe).unwrap();
    let license = b"MIT\n".to_vec();
    // It imports KERNEL32.dll and SHLWAPI.dll, both part of Windows.
    let (_a, good) = zip_package(&[("llama-cli.exe", pe.clone()), ("LICENSE", license.clone())]);
    let o = sh("self-check.sh", &[Path::new("--no-run"), &good], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("shlwapi.dll"), "{}", text(&o));

    // The same file importing a DLL that is neither Windows' nor in the package.
    let at = pe
        .windows(11)
        .position(|w| w.eq_ignore_ascii_case(b"SHLWAPI.dll"))
        .expect("the launcher imports SHLWAPI.dll");
    let mut other = pe.clone();
    other[at..at + 11].copy_from_slice(b"GGMLXYZ.dll");
    let (_b, bad) = zip_package(&[
        ("llama-cli.exe", other.clone()),
        ("LICENSE", license.clone()),
    ]);
    let o = sh("self-check.sh", &[Path::new("--no-run"), &bad], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("imports GGMLXYZ.dll, which is neither in the package"),
        "{}",
        text(&o)
    );

    // ... and with that DLL next to it (names compared without case).
    let (_c, fixed) = zip_package(&[
        ("llama-cli.exe", other),
        ("ggmlxyz.dll", pe.clone()),
        ("LICENSE", license),
    ]);
    let o = sh("self-check.sh", &[Path::new("--no-run"), &fixed], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Without --no-run a Windows package cannot be judged on Linux: it fails, never passes.
    let o = sh("self-check.sh", &[&good], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn bad_usage_exits_2() {
    let o = sh("self-check.sh", &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    let o = sh(
        "self-check.sh",
        &[Path::new("/no/such/archive.tar.gz")],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = sh("package.sh", &[Path::new("a")], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_library_without_kernels_for_the_targets_needs_no_kernel_folder() {
    // hipBLASLt as TheRock ships it for gfx103X: the library, and no kernels for those targets.
    let (root, build, src, kit) = toolkit_layout();
    std::fs::write(
        kit.join("lt.c"),
        "int hipblaslt_version(void) { return 1; }\n",
    )
    .unwrap();
    cc(
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libhipblaslt.so.1",
            "-o",
            "libhipblaslt.so.1",
            "lt.c",
        ],
        &kit,
    );
    let kit_s = kit.to_str().unwrap().to_string();
    let pack = |data: &str| {
        let out = root.path().join(format!("dist-{}", data.len()));
        let o = sh(
            "package.sh",
            &[&build, &src, &out, Path::new("llama-test")],
            &[
                ("GPUPROBE_OS", "linux"),
                ("GPUPROBE_RUNTIME_DIRS", kit_s.as_str()),
                ("GPUPROBE_BUNDLE_EXTRA", "libhipblaslt.so.*"),
                ("GPUPROBE_BUNDLE_DATA", data),
                ("GPUPROBE_TARGETS", "gfx1100"),
            ],
        );
        (o, out.join("llama-test.tar.gz"))
    };
    let none = "librocblas.so.*=rocblas/library=gfx1100;libhipblaslt.so.*=hipblaslt/library=";
    let (o, archive) = pack(none);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("has no hipblaslt/library, and the toolkit builds its kernels for none"),
        "{}",
        text(&o)
    );
    let check = |data: &str| {
        sh(
            "self-check.sh",
            &[&archive],
            &[
                ("GPUPROBE_TARGETS", "gfx1100"),
                ("GPUPROBE_BUNDLE_DATA", data),
            ],
        )
    };
    let ok = check(none);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    // Where the toolkit does build its kernels for a target, the folder must be there.
    let needed =
        "librocblas.so.*=rocblas/library=gfx1100;libhipblaslt.so.*=hipblaslt/library=gfx1100";
    let (o, _) = pack(needed);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("hipblaslt/library does not exist"),
        "{}",
        text(&o)
    );
    let bad = check(needed);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        text(&bad).contains(
            "libhipblaslt.so.1 is in the package but its kernel folder hipblaslt/library is not (needed for: gfx1100)"
        ),
        "{}",
        text(&bad)
    );
}

// TheRock 7.13+ keeps device code in .kpack archives that a library finds through search paths
// it carries (ELF section .rocm_kpack_ref, PE section .kpackrf: a msgpack map of `kernel_name`
// and `kpack_search_paths`, each path relative to the library's directory with @GFXARCH@ for the
// GPU's target); an archive starts with KPAK, a version and the offset of a msgpack table of
// contents listing its `gfx_arches`. No TheRock toolkit can be installed here, so the layout is
// made here as documented (TheRock RELEASES.md, docs/packaging/python_packaging.md): real ELF
// and PE files with a real marker section added by objcopy, and archives with the documented
// header and table of contents. It is failure injection of a file layout, not a stand-in for
// TheRock's libraries.

fn mp_str(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut v = if b.len() < 32 {
        vec![0xa0 | b.len() as u8]
    } else {
        vec![0xd9, b.len() as u8]
    };
    v.extend_from_slice(b);
    v
}

fn kpack_marker(kernel_name: &str, paths: &[&str]) -> Vec<u8> {
    let mut v = vec![0x82];
    v.extend(mp_str("kernel_name"));
    v.extend(mp_str(kernel_name));
    v.extend(mp_str("kpack_search_paths"));
    v.push(0x90 | paths.len() as u8);
    for p in paths {
        v.extend(mp_str(p));
    }
    v
}

fn kpack_archive(archs: &[&str]) -> Vec<u8> {
    let blob = b"device code".to_vec();
    let mut toc = vec![0x83];
    toc.extend(mp_str("format_version"));
    toc.push(0x01);
    toc.extend(mp_str("gfx_arches"));
    toc.push(0x90 | archs.len() as u8);
    for a in archs {
        toc.extend(mp_str(a));
    }
    toc.extend(mp_str("toc"));
    toc.push(0x80);
    let mut v = b"KPAK".to_vec();
    v.extend(1u32.to_le_bytes());
    v.extend((64 + blob.len() as u64).to_le_bytes());
    v.resize(64, 0);
    v.extend(blob);
    v.extend(toc);
    v
}

/// Adds `section` holding a kpack marker with `paths` to the ELF or PE file at `path`.
fn add_kpack_marker(path: &Path, section: &str, paths: &[&str]) {
    let marker = path.with_extension("marker");
    std::fs::write(&marker, kpack_marker("lib/x", paths)).unwrap();
    let out = path.with_extension("marked");
    run(Command::new("objcopy")
        .arg("--add-section")
        .arg(format!("{section}={}", marker.display()))
        .arg(path)
        .arg(&out));
    std::fs::rename(&out, path).unwrap();
    std::fs::remove_file(&marker).unwrap();
}

const BLAS_KPACK: &str = "../.kpack/blas_lib_@GFXARCH@.kpack";

/// toolkit_layout() with TheRock 7.13's device code layout: librocblas carries the search path
/// ../.kpack/blas_lib_@GFXARCH@.kpack, and the toolkit's .kpack holds archives for gfx1100,
/// gfx1201 and gfx90a.
fn kpack_toolkit() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let (root, build, src, kit) = toolkit_layout();
    add_kpack_marker(
        &kit.join("librocblas.so.4.2"),
        ".rocm_kpack_ref",
        &[BLAS_KPACK],
    );
    let kpack = kit.parent().unwrap().join(".kpack");
    std::fs::create_dir_all(&kpack).unwrap();
    for t in ["gfx1100", "gfx1201", "gfx90a"] {
        std::fs::write(
            kpack.join(format!("blas_lib_{t}.kpack")),
            kpack_archive(&[t]),
        )
        .unwrap();
    }
    (root, build, src, kit)
}

fn pack_kpack(
    root: &Path,
    build: &Path,
    src: &Path,
    runtime: &str,
    targets: &str,
) -> (Output, PathBuf, PathBuf) {
    let out = root.join(format!("dist-{}", targets.replace(';', "-")));
    let o = sh(
        "package.sh",
        &[build, src, &out, Path::new("llama-kp")],
        &[
            ("GPUPROBE_OS", "linux"),
            ("GPUPROBE_RUNTIME_DIRS", runtime),
            ("GPUPROBE_BUNDLE_EXPECT", "librocblas.so.*"),
            ("GPUPROBE_BUNDLE_DATA", "librocblas.so.*=rocblas/library"),
            ("GPUPROBE_TARGETS", targets),
        ],
    );
    let archive = out.join("llama-kp.tar.gz");
    (o, out.join("llama-kp"), archive)
}

fn check_kpack(archive: &Path, targets: &str) -> (Option<i32>, String) {
    let o = sh(
        "self-check.sh",
        &[archive],
        &[
            ("GPUPROBE_TARGETS", targets),
            ("GPUPROBE_BUNDLE_DATA", "librocblas.so.*=rocblas/library"),
        ],
    );
    (o.status.code(), text(&o))
}

#[test]
fn kpack_device_code_is_packed_where_the_libraries_look_for_it() {
    let (root, build, src, kit) = kpack_toolkit();
    let kit_s = kit.to_str().unwrap().to_string();
    let (o, pkg, archive) = pack_kpack(root.path(), &build, &src, &kit_s, "gfx1100;gfx1201");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("programs and libraries go in bin/"), "{log}");
    assert!(
        log.contains("2 device code archive(s) for the built targets (1 for other targets or libraries left out)"),
        "{log}"
    );
    // The toolkit's layout, kept: bin/ holds what lib/ held, .kpack/ sits beside it.
    for f in [
        "bin/llama-cli",
        "bin/libggml-hip.so",
        "bin/librocblas.so.4",
        "bin/rocblas/library/TensileLibrary_lazy_gfx1100.dat",
        ".kpack/blas_lib_gfx1100.kpack",
        ".kpack/blas_lib_gfx1201.kpack",
        "LICENSE",
        "README.package.txt",
    ] {
        assert!(pkg.join(f).is_file(), "{f}: {log}");
    }
    assert!(!pkg.join(".kpack/blas_lib_gfx90a.kpack").exists(), "{log}");
    assert!(!pkg.join("llama-cli").exists());
    let readme = std::fs::read_to_string(pkg.join("README.package.txt")).unwrap();
    assert!(
        readme.contains("run the programs from its bin/"),
        "{readme}"
    );

    // The toolkit is gone on the user's machine: the package alone passes.
    std::fs::rename(kit.parent().unwrap(), root.path().join("moved")).unwrap();
    let (code, out) = check_kpack(&archive, "gfx1100;gfx1201");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ok: 1 library finds its kpack device code for every target: librocblas.so.4"),
        "{out}"
    );
    assert!(out.contains("runs from the unpacked package"), "{out}");

    // Broken packages, each failing with what is missing.
    let broken = |change: &dyn Fn(&Path), says: &str| {
        let (_d, bad) = repacked(&archive, |p| change(p));
        let (code, out) = check_kpack(&bad, "gfx1100;gfx1201");
        assert_eq!(code, Some(1), "{says}: {out}");
        assert!(out.contains(says), "should say `{says}`: {out}");
        assert!(out.contains("is NOT self-contained"), "{out}");
    };
    broken(
        &|p| std::fs::remove_file(p.join(".kpack/blas_lib_gfx1201.kpack")).unwrap(),
        "FAIL: bin/librocblas.so.4 finds no device code for gfx1201 (looked for ../.kpack/blas_lib_gfx1201.kpack, relative to its directory)",
    );
    broken(
        &|p| {
            std::fs::write(
                p.join(".kpack/blas_lib_gfx1201.kpack"),
                kpack_archive(&["gfx1100"]),
            )
            .unwrap()
        },
        "../.kpack/blas_lib_gfx1201.kpack lists gfx1100, not gfx1201",
    );
    broken(
        &|p| std::fs::write(p.join(".kpack/blas_lib_gfx1100.kpack"), b"not an archive").unwrap(),
        "../.kpack/blas_lib_gfx1100.kpack is no kpack archive",
    );
    // Flattened (the libraries at the top): ../.kpack leads out of the package.
    broken(
        &|p| {
            for e in std::fs::read_dir(p.join("bin")).unwrap() {
                let e = e.unwrap();
                std::fs::rename(e.path(), p.join(e.file_name())).unwrap();
            }
            std::fs::remove_dir(p.join("bin")).unwrap();
        },
        "FAIL: librocblas.so.4 finds no device code for gfx1100",
    );
    // A target the package was not built for is not in it.
    let (code, out) = check_kpack(&archive, "gfx1100;gfx90a");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("finds no device code for gfx90a"), "{out}");
}

#[test]
fn packing_fails_when_the_toolkit_has_no_device_code_for_a_target() {
    let (root, build, src, kit) = kpack_toolkit();
    let kit_s = kit.to_str().unwrap().to_string();
    let (o, _pkg, archive) = pack_kpack(root.path(), &build, &src, &kit_s, "gfx1100;gfx1030");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(
        log.contains("librocblas.so.4 needs ../.kpack/blas_lib_gfx1030.kpack (from "),
        "{log}"
    );
    assert!(log.contains("rocm[device-<target>]"), "{log}");
    assert!(!archive.exists(), "{log}");
    // No targets named: nothing to pick the archives by, so nothing is packed.
    let (o, _pkg, archive) = pack_kpack(root.path(), &build, &src, &kit_s, "");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(
        log.contains("librocblas.so.4 looks for its device code per GPU target, and GPUPROBE_TARGETS names none"),
        "{log}"
    );
    assert!(!archive.exists(), "{log}");
}

#[test]
fn a_kpack_search_path_that_leaves_the_layout_is_refused() {
    for (path, says) in [
        (
            "../../.kpack/blas_lib_@GFXARCH@.kpack",
            "looks for its device code 2 directories above its own",
        ),
        (
            "/opt/rocm/.kpack/blas_lib_@GFXARCH@.kpack",
            "carries a kpack search path that cannot be followed ('/opt/rocm/.kpack/blas_lib_@GFXARCH@.kpack')",
        ),
        ("../.kpack/../../x_@GFXARCH@.kpack", "cannot be followed"),
    ] {
        let (root, build, src, kit) = toolkit_layout();
        add_kpack_marker(&kit.join("librocblas.so.4.2"), ".rocm_kpack_ref", &[path]);
        let kit_s = kit.to_str().unwrap().to_string();
        let (o, _, archive) = pack_kpack(root.path(), &build, &src, &kit_s, "gfx1100");
        let log = text(&o);
        assert_eq!(o.status.code(), Some(1), "{path}: {log}");
        assert!(log.contains(says), "{path}: should say `{says}`: {log}");
        assert!(!archive.exists());
    }
}

#[test]
fn windows_packages_carry_kpack_device_code_beside_bin() {
    // The Windows package step is the same bash script (Git Bash on the runner); PE files here
    // are pip's real Windows launcher, one of them carrying a .kpackrf section.
    let Some(exe) = windows_launcher() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "pip's t64.exe is needed in CI"
        );
        eprintln!("skipped: no pip t64.exe found");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let build = root.path().join("build");
    let kit = root.path().join("rocm/bin");
    let src = root.path().join("src");
    for d in [&build.join("bin"), &kit, &src] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::copy(&exe, build.join("bin/llama-cli.exe")).unwrap();
    std::fs::copy(&exe, kit.join("rocblas.dll")).unwrap();
    add_kpack_marker(&kit.join("rocblas.dll"), ".kpackrf", &[BLAS_KPACK]);
    std::fs::create_dir_all(kit.join("rocblas/library")).unwrap();
    std::fs::write(
        kit.join("rocblas/library/TensileLibrary_lazy_gfx1100.dat"),
        "x",
    )
    .unwrap();
    let kpack = root.path().join("rocm/.kpack");
    std::fs::create_dir_all(&kpack).unwrap();
    for t in ["gfx1100", "gfx1201"] {
        std::fs::write(
            kpack.join(format!("blas_lib_{t}.kpack")),
            kpack_archive(&[t]),
        )
        .unwrap();
    }
    let out = root.path().join("dist");
    let kit_s = kit.to_str().unwrap().to_string();
    let o = sh(
        "package.sh",
        &[&build, &src, &out, Path::new("llama-win")],
        &[
            ("GPUPROBE_OS", "windows"),
            ("GPUPROBE_RUNTIME_DIRS", kit_s.as_str()),
            ("GPUPROBE_BUNDLE_EXTRA", "*rocblas.dll"),
            ("GPUPROBE_BUNDLE_EXPECT", "*rocblas.dll"),
            ("GPUPROBE_BUNDLE_DATA", "*rocblas.dll=rocblas/library"),
            ("GPUPROBE_TARGETS", "gfx1100"),
        ],
    );
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let pkg = out.join("llama-win");
    for f in [
        "bin/llama-cli.exe",
        "bin/rocblas.dll",
        "bin/rocblas/library/TensileLibrary_lazy_gfx1100.dat",
        ".kpack/blas_lib_gfx1100.kpack",
    ] {
        assert!(pkg.join(f).is_file(), "{f}: {log}");
    }
    assert!(!pkg.join(".kpack/blas_lib_gfx1201.kpack").exists(), "{log}");
    let zip = out.join("llama-win.zip");
    let check = |z: &Path| {
        let o = sh(
            "self-check.sh",
            &[Path::new("--no-run"), z],
            &[("GPUPROBE_TARGETS", "gfx1100")],
        );
        (o.status.code(), text(&o))
    };
    let (code, outp) = check(&zip);
    assert_eq!(code, Some(0), "{outp}");
    assert!(
        outp.contains("1 library finds its kpack device code for every target: rocblas.dll"),
        "{outp}"
    );
    // The same package without its archive.
    std::fs::remove_file(pkg.join(".kpack/blas_lib_gfx1100.kpack")).unwrap();
    let bad = root.path().join("llama-win.zip");
    run(Command::new("python3")
        .args(["-m", "zipfile", "-c"])
        .arg(&bad)
        .arg("llama-win")
        .current_dir(&out));
    let (code, outp) = check(&bad);
    assert_eq!(code, Some(1), "{outp}");
    assert!(
        outp.contains("bin/rocblas.dll finds no device code for gfx1100"),
        "{outp}"
    );
}

#[test]
fn both_scripts_read_kpack_markers_with_the_same_text() {
    let block = |script: &str| -> String {
        let text = std::fs::read_to_string(repo().join("templates").join(script)).unwrap();
        let start = text
            .find("# --- kpack readers")
            .unwrap_or_else(|| panic!("{script}: no kpack readers"));
        let end = text.find("# --- end of kpack readers ---").unwrap();
        text[start..end].to_string()
    };
    assert_eq!(block("package.sh"), block("self-check.sh"));
}

/// Debian's HIP compiler and runtime, or None (skipped) outside CI.
fn debian_hip() -> Option<(PathBuf, PathBuf)> {
    let hipcc = ["/opt/rocm/bin/hipcc", "/usr/bin/hipcc"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let runtime = PathBuf::from("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    let patchelf = Command::new("patchelf").arg("--version").output().is_ok();
    match hipcc {
        Some(h) if runtime.exists() && patchelf => Some((h, runtime)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI installs hipcc, libamdhip64-dev and patchelf (scripts/test.sh)"
            );
            eprintln!("skipped: no hipcc, Debian libamdhip64 or patchelf here");
            None
        }
    }
}

#[test]
fn a_hip_program_on_debians_rocm_runtime_with_kpack_code_packs_and_checks() {
    // Real files: a HIP program built with Debian's hipcc (ROCm 5.2), linked to Debian's
    // libamdhip64.so.5, whose libraries (libhsa-runtime64, libhsakmt, ...) the package bundles.
    // The toolkit's copy of libamdhip64 is given what a kpack-split TheRock library has: an
    // $ORIGIN-relative RUNPATH and a .rocm_kpack_ref section (added here: the layout injection),
    // with the toolkit's .kpack beside its lib/.
    let Some((hipcc, runtime)) = debian_hip() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let build = root.path().join("build");
    let kit = root.path().join("rocm/lib");
    let src = root.path().join("src");
    for d in [&build.join("bin"), &kit, &src] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        build.join("cli.hip"),
        "#include <hip/hip_runtime.h>\n#include <stdio.h>\nint main(void) {\n  int v = 0;\n  hipError_t e = hipRuntimeGetVersion(&v);\n  printf(\"version: 1 (HIP runtime %d, %s)\\n\", v, hipGetErrorName(e));\n  return 0;\n}\n",
    )
    .unwrap();
    // Debian's hipcc picks the NVIDIA platform when an nvcc is on PATH (the test run puts PyPI's
    // there): ask for AMD, as gpuprobe's own probe build does.
    run(Command::new(&hipcc)
        .env("HIP_PLATFORM", "amd")
        .args(["--offload-arch=gfx1030", "-o", "bin/llama-cli", "cli.hip"])
        .arg("-Wl,-rpath,$ORIGIN")
        .current_dir(&build));
    std::fs::remove_file(build.join("cli.hip")).unwrap();
    let lib = kit.join("libamdhip64.so.5");
    std::fs::copy(std::fs::canonicalize(&runtime).unwrap(), &lib).unwrap();
    run(Command::new("patchelf")
        .args(["--set-rpath", "$ORIGIN:$ORIGIN/rocm_sysdeps/lib"])
        .arg(&lib));
    add_kpack_marker(
        &lib,
        ".rocm_kpack_ref",
        &["../.kpack/hip_lib_@GFXARCH@.kpack"],
    );
    let kpack = root.path().join("rocm/.kpack");
    std::fs::create_dir_all(&kpack).unwrap();
    std::fs::write(
        kpack.join("hip_lib_gfx1030.kpack"),
        kpack_archive(&["gfx1030"]),
    )
    .unwrap();
    let runtime_dirs = format!("{};/usr/lib/x86_64-linux-gnu", kit.display());
    let pack = |targets: &str| {
        let out = root.path().join(format!("dist-{targets}"));
        let o = sh(
            "package.sh",
            &[&build, &src, &out, Path::new("llama-hip")],
            &[
                ("GPUPROBE_OS", "linux"),
                ("GPUPROBE_RUNTIME_DIRS", runtime_dirs.as_str()),
                ("GPUPROBE_BUNDLE_EXPECT", "libamdhip64.so.*"),
                ("GPUPROBE_TARGETS", targets),
            ],
        );
        (o, out.join("llama-hip.tar.gz"))
    };
    let (o, archive) = pack("gfx1030");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("bundled libamdhip64.so.5 from"), "{log}");
    assert!(log.contains("bundled libhsa-runtime64.so.1 from"), "{log}");
    assert!(
        log.contains("libamdhip64.so.5 keeps its own RUNPATH (a kpack-split library"),
        "{log}"
    );
    assert!(
        log.contains("1 device code archive(s) for the built targets"),
        "{log}"
    );
    let o = sh(
        "self-check.sh",
        &[&archive],
        &[("GPUPROBE_TARGETS", "gfx1030")],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains(
            "ok: 1 library finds its kpack device code for every target: libamdhip64.so.5"
        ),
        "{out}"
    );
    assert!(out.contains("version: 1 (HIP runtime 5"), "{out}");
    // The toolkit without that target's device code: nothing is packed.
    let (o, archive) = pack("gfx1030;gfx1100");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(
        log.contains("libamdhip64.so.5 needs ../.kpack/hip_lib_gfx1100.kpack"),
        "{log}"
    );
    assert!(!archive.exists());
}

/// The rendered `Package the build` and `Self-check the package` steps of the Linux job of
/// `gpuprobe workflow ARGS`, with the job's and step's env for its first matrix entry (matrix
/// expressions replaced by the entry's values), as GitHub would run them.
struct RenderedSteps {
    package: (String, Vec<(String, String)>),
    check: (String, Vec<(String, String)>),
    targets: Vec<String>,
}

fn rendered_linux_steps(args: &[&str]) -> RenderedSteps {
    let config = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpuprobe"))
        .arg("workflow")
        .args(args)
        .env("XDG_CONFIG_HOME", config.path())
        .env_remove("GPUPROBE_QUIRKS_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let script = r#"
import json, re, sys, yaml
d = yaml.safe_load(sys.stdin)
job = d["jobs"]["linux"]
entry = job["strategy"]["matrix"]["include"][0]
def sub(v):
    v = str(v)
    v = re.sub(r"\$\{\{ matrix\.([a-z_]+) \}\}", lambda m: str(entry[m.group(1)]), v)
    assert "${{" not in v, v
    return v
def step(prefix):
    s = next(s for s in job["steps"] if s.get("name", "").startswith(prefix))
    env = {k: sub(v) for k, v in job["env"].items()}
    env.update({k: sub(v) for k, v in (s.get("env") or {}).items()})
    return {"run": s["run"], "env": sorted(env.items())}
print(json.dumps({"package": step("Package the build"), "check": step("Self-check the package"),
                  "targets": entry["targets"].split(";")}))
"#;
    let python = std::env::var_os("GPUPROBE_PYTHON").unwrap_or_else(|| "python3".into());
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let step = |k: &str| {
        let env = v[k]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_str().unwrap().to_string(),
                    p[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (v[k]["run"].as_str().unwrap().to_string(), env)
    };
    RenderedSteps {
        package: step("package"),
        check: step("check"),
        targets: v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect(),
    }
}

/// Runs one rendered step as GitHub's `shell: bash` does, in `dir`, with its env plus `extra`.
fn run_step(step: &(String, Vec<(String, String)>), dir: &Path, extra: &[(&str, &str)]) -> Output {
    let file = dir.join(".step.sh");
    std::fs::write(&file, &step.0).unwrap();
    let mut c = Command::new("bash");
    c.args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&file)
        .current_dir(dir)
        .env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in &step.1 {
        c.env(k, v);
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    std::fs::remove_file(&file).unwrap();
    o
}

fn shared_lib(dir: &Path, soname: &str, file: &str, body: &str, link: &[&str]) {
    let c = dir.join(format!("{file}.c"));
    std::fs::write(&c, body).unwrap();
    let mut args = vec![
        "-shared".to_string(),
        "-fPIC".into(),
        format!("-Wl,-soname,{soname}"),
        "-o".into(),
        file.into(),
        c.file_name().unwrap().to_str().unwrap().into(),
        "-L.".into(),
    ];
    args.extend(link.iter().map(|l| l.to_string()));
    run(Command::new("cc").args(&args).current_dir(dir));
    std::fs::remove_file(&c).unwrap();
    if soname != file {
        std::os::unix::fs::symlink(file, dir.join(soname)).unwrap();
    }
}

#[test]
fn the_rendered_therock_package_and_self_check_steps_pass_a_kpack_toolkit_and_fail_a_broken_one() {
    // `gpuprobe workflow --targets gfx110X --rocm 7.14.0 --os linux`, its Linux package and
    // self-check steps run as rendered, on a toolkit laid out as TheRock 7.13+ documents it
    // (lib/ with rocBLAS, hipBLAS, hipBLASLt, the HIP runtime and comgr; kernel folders; .kpack/
    // beside lib/; rocBLAS and hipBLASLt carrying kpack search paths). The libraries are real
    // ELF files compiled here, standing in for no GPU code (the layout is what is tested).
    let steps =
        rendered_linux_steps(&["--targets", "gfx110X", "--rocm", "7.14.0", "--os", "linux"]);
    assert_eq!(steps.targets, ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]);
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    let kit = root.path().join("rocm/lib");
    let bin = work.join("build/bin");
    for d in [
        &kit,
        &bin,
        &work.join("llama.cpp"),
        &root.path().join("temp"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(work.join("llama.cpp/LICENSE"), "MIT\n").unwrap();
    shared_lib(
        &kit,
        "libamdhip64.so.7",
        "libamdhip64.so.7.14.0",
        "int hip(void) { return 7; }\n",
        &[],
    );
    shared_lib(
        &kit,
        "libamd_comgr.so.3",
        "libamd_comgr.so.3.0.0",
        "int comgr(void) { return 3; }\n",
        &[],
    );
    shared_lib(
        &kit,
        "librocblas.so.5",
        "librocblas.so.5.0.0",
        "int rocblas(void) { return 5; }\n",
        &[],
    );
    shared_lib(
        &kit,
        "libhipblaslt.so.1",
        "libhipblaslt.so.1.0.0",
        "int lt(void) { return 1; }\n",
        &[],
    );
    shared_lib(
        &kit,
        "libhipblas.so.3",
        "libhipblas.so.3.0.0",
        "int rocblas(void); int hipblas(void) { return rocblas(); }\n",
        &["-l:librocblas.so.5"],
    );
    for lib in ["librocblas.so.5.0.0", "libhipblaslt.so.1.0.0"] {
        add_kpack_marker(&kit.join(lib), ".rocm_kpack_ref", &[BLAS_KPACK]);
    }
    let kpack = root.path().join("rocm/.kpack");
    std::fs::create_dir_all(&kpack).unwrap();
    for t in ["gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1201"] {
        std::fs::write(
            kpack.join(format!("blas_lib_{t}.kpack")),
            kpack_archive(&[t]),
        )
        .unwrap();
        for folder in ["rocblas/library", "hipblaslt/library"] {
            std::fs::create_dir_all(kit.join(folder)).unwrap();
            std::fs::write(
                kit.join(folder)
                    .join(format!("TensileLibrary_lazy_{t}.dat")),
                t,
            )
            .unwrap();
        }
    }
    let kit_s = kit.to_str().unwrap().to_string();
    shared_lib(
        &bin,
        "libggml-hip.so",
        "libggml-hip.so",
        "int hip(void); int rocblas(void); int hipblas(void);\nint ggml_hip(void) { return hip() + rocblas() + hipblas(); }\n",
        &[
            "-L",
            &kit_s,
            "-l:libamdhip64.so.7",
            "-l:librocblas.so.5",
            "-l:libhipblas.so.3",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    std::fs::write(
        bin.join("cli.c"),
        "#include <stdio.h>\nint ggml_hip(void);\nint main(void) { printf(\"version: 11434 (%d)\\n\", ggml_hip()); return 0; }\n",
    )
    .unwrap();
    cc(
        &[
            "-o",
            "llama-cli",
            "cli.c",
            "-L.",
            "-lggml-hip",
            "-Wl,-rpath,$ORIGIN",
            "-Wl,-rpath-link",
            &kit_s,
        ],
        &bin,
    );
    std::fs::remove_file(bin.join("cli.c")).unwrap();
    let runtime_dirs = kit_s.clone();
    let temp = root.path().join("temp");
    let extra = [
        ("GPUPROBE_RUNTIME_DIRS", runtime_dirs.as_str()),
        ("RUNNER_TEMP", temp.to_str().unwrap()),
    ];
    let o = run_step(&steps.package, &work, &extra);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(
        log.contains("4 device code archive(s) for the built targets (1 for other targets or libraries left out)"),
        "{log}"
    );
    let name = "llama-b11434-bin-ubuntu-rocm-7.14.0-gfx110X-x64";
    let pkg = work.join("dist").join(name);
    for f in [
        "bin/llama-cli",
        "bin/librocblas.so.5",
        "bin/libhipblaslt.so.1",
        "bin/libamd_comgr.so.3",
        "bin/hipblaslt/library/TensileLibrary_lazy_gfx1103.dat",
        ".kpack/blas_lib_gfx1103.kpack",
    ] {
        assert!(pkg.join(f).is_file(), "{f}: {log}");
    }
    assert!(!pkg.join(".kpack/blas_lib_gfx1201.kpack").exists());
    let readme = std::fs::read_to_string(pkg.join("README.package.txt")).unwrap();
    assert!(readme.contains("/dev/kfd"), "the job's notes: {readme}");
    std::fs::rename(root.path().join("rocm"), root.path().join("moved")).unwrap();
    let o = run_step(&steps.check, &work, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("ok: 2 libraries find their kpack device code for every target:"),
        "{out}"
    );
    assert!(out.contains("version: 11434"), "{out}");

    // The same toolkit without gfx1102's device code: the rendered package step fails on it.
    std::fs::rename(root.path().join("moved"), root.path().join("rocm")).unwrap();
    std::fs::remove_file(kpack.join("blas_lib_gfx1102.kpack")).unwrap();
    std::fs::remove_dir_all(work.join("dist")).unwrap();
    let o = run_step(&steps.package, &work, &extra);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(
        log.contains("librocblas.so.5 needs ../.kpack/blas_lib_gfx1102.kpack"),
        "{log}"
    );
    assert!(!work.join(format!("dist/{name}.tar.gz")).exists());
}
