//! Will this binary load here? Before a llama.cpp program is run, its ELF dynamic section and
//! those of everything it needs (and of the `libggml*` backends beside it, which llama.cpp may
//! `dlopen` at run time) are read: every `NEEDED` library is looked up the way the dynamic loader
//! does (RPATH/RUNPATH with `$ORIGIN`, `LD_LIBRARY_PATH`, the loader cache, the default folders),
//! and every symbol version a library must provide (`GLIBC_2.38` from `libc.so.6`,
//! `GLIBCXX_3.4.32` from `libstdc++.so.6`) is checked against the version definitions of the
//! library that would be loaded. What this machine lacks becomes a finding that names it.
//!
//! The libraries a build needs also say which toolkit built it (`libcudart.so.13`: CUDA 13;
//! `libamdhip64.so.6`: ROCm 6), which is compared with the driver.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use goblin::elf::Elf;

use super::finding::{Finding, Level};
use crate::report::Backend;
use crate::version::Version;

/// Larger files are not read whole: llama.cpp libraries with many GPU targets reach a few
/// hundred MiB, and the dynamic section is what matters.
const MAX_ELF: u64 = 2 << 30;
/// A dependency graph larger than this is not a llama.cpp build.
const MAX_OBJECTS: usize = 400;

/// What an ELF object declares about loading.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub path: PathBuf,
    pub is_64: bool,
    pub machine: u16,
    pub needed: Vec<String>,
    pub rpath: Vec<String>,
    pub runpath: Vec<String>,
    /// Versions it needs, by the library file that must define them.
    pub version_needs: BTreeMap<String, Vec<String>>,
    /// Versions it defines (its own name excluded).
    pub version_defs: BTreeSet<String>,
}

/// Reads the loading facts of one ELF file; None when it is not ELF (a script, say).
pub fn read_object(path: &Path) -> Result<Option<Object>, String> {
    // A FIFO or a link to /dev/zero in place of a library is refused, not waited on or read.
    let bytes = crate::files::read_binary(path, MAX_ELF).map_err(|e| {
        format!(
            "{}: {e}",
            crate::neutral::inline(&path.display().to_string())
        )
    })?;
    if !bytes.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let elf = Elf::parse(&bytes)
        .map_err(|e| format!("{}: not a readable ELF file: {e}", path.display()))?;
    let mut version_needs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(vn) = &elf.verneed {
        for need in vn.iter() {
            let Some(file) = elf.dynstrtab.get_at(need.vn_file) else {
                continue;
            };
            let names = version_needs.entry(file.to_string()).or_default();
            for aux in need.iter() {
                if let Some(n) = elf.dynstrtab.get_at(aux.vna_name) {
                    names.push(n.to_string());
                }
            }
        }
    }
    let mut version_defs = BTreeSet::new();
    if let Some(vd) = &elf.verdef {
        for def in vd.iter() {
            // The base entry names the file itself, not a version.
            if def.vd_flags & goblin::elf::symver::VER_FLG_BASE != 0 {
                continue;
            }
            if let Some(aux) = def.iter().next()
                && let Some(n) = elf.dynstrtab.get_at(aux.vda_name)
            {
                version_defs.insert(n.to_string());
            }
        }
    }
    Ok(Some(Object {
        path: path.to_path_buf(),
        is_64: elf.is_64,
        machine: elf.header.e_machine,
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        rpath: split_paths(&elf.rpaths),
        runpath: split_paths(&elf.runpaths),
        version_needs,
        version_defs,
    }))
}

fn split_paths(v: &[&str]) -> Vec<String> {
    v.iter()
        .flat_map(|p| p.split(':'))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Where the loader looks, besides an object's own RPATH/RUNPATH.
#[derive(Debug, Clone, Default)]
pub struct SearchPath {
    pub ld_library_path: Vec<PathBuf>,
    /// The loader cache (`ldconfig -p`): name → paths.
    pub cache: BTreeMap<String, Vec<PathBuf>>,
    pub defaults: Vec<PathBuf>,
}

impl SearchPath {
    /// This machine's: `LD_LIBRARY_PATH`, `ldconfig -p`, and the default folders.
    pub fn of_this_machine() -> Self {
        let ld_library_path = std::env::var("LD_LIBRARY_PATH")
            .unwrap_or_default()
            .split(':')
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect();
        let mut defaults = Vec::new();
        let triple = match std::env::consts::ARCH {
            "x86_64" => Some("x86_64-linux-gnu"),
            "aarch64" => Some("aarch64-linux-gnu"),
            "powerpc64" => Some("powerpc64le-linux-gnu"),
            _ => None,
        };
        for base in ["/lib", "/usr/lib"] {
            if let Some(t) = triple {
                defaults.push(PathBuf::from(format!("{base}/{t}")));
            }
            defaults.push(PathBuf::from(format!("{base}64")));
            defaults.push(PathBuf::from(base));
        }
        SearchPath {
            ld_library_path,
            cache: loader_cache(),
            defaults,
        }
    }
}

/// `ldconfig -p`: `\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6`.
fn loader_cache() -> BTreeMap<String, Vec<PathBuf>> {
    let mut map: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for l in run_capture("ldconfig", &["-p"]).unwrap_or_default() {
        if let Some((left, right)) = l.split_once("=>") {
            let name = left.split_whitespace().next().unwrap_or("").to_string();
            map.entry(name)
                .or_default()
                .push(PathBuf::from(right.trim()));
        }
    }
    map
}

/// All of a program's stdout, with a timeout, for the loader cache (hundreds of lines).
fn run_capture(prog: &str, args: &[&str]) -> Option<Vec<String>> {
    let path = ["/sbin", "/usr/sbin"]
        .iter()
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.is_file())
        .or_else(|| which::which(prog).ok())?;
    let tmp = std::env::temp_dir().join(format!("gpuprobe-ldconfig-{}.txt", std::process::id()));
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("out=$1; shift; exec \"$@\" >\"$out\"")
        .arg("sh")
        .arg(&tmp)
        .arg(path)
        .args(args);
    let out = crate::children::orchestrator::run(cmd, Duration::from_secs(10));
    let text = std::fs::read_to_string(&tmp).ok();
    let _ = std::fs::remove_file(&tmp);
    if !matches!(out.exit, crate::children::orchestrator::Exit::Code(0)) {
        return None;
    }
    Some(text?.lines().map(str::to_string).collect())
}

/// A library the loader would not find.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingLib {
    pub name: String,
    pub needed_by: PathBuf,
}

/// A symbol version no loaded library defines.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingVersion {
    pub version: String,
    pub library: String,
    pub library_path: PathBuf,
    pub needed_by: PathBuf,
    /// The newest version of the same family (`GLIBC_2.36`) the found library defines.
    pub newest_here: Option<String>,
}

/// What loading one program (or one backend library) would do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Load {
    pub objects: Vec<PathBuf>,
    pub missing_libs: Vec<MissingLib>,
    pub missing_versions: Vec<MissingVersion>,
    /// Every library name needed anywhere in the graph.
    pub needed: BTreeSet<String>,
    /// Every symbol version needed anywhere in the graph.
    pub needed_versions: BTreeSet<String>,
}

impl Load {
    pub fn ok(&self) -> bool {
        self.missing_libs.is_empty() && self.missing_versions.is_empty()
    }
}

fn expand_origin(p: &str, origin: &Path) -> PathBuf {
    let o = origin.display().to_string();
    PathBuf::from(p.replace("${ORIGIN}", &o).replace("$ORIGIN", &o))
}

fn compatible(path: &Path, like: &Object) -> Option<Object> {
    let o = read_object(path).ok().flatten()?;
    (o.is_64 == like.is_64 && o.machine == like.machine).then_some(o)
}

/// Finds `name` for `from` (whose `rpath` chain is `inherited`), as the loader would.
fn find(name: &str, from: &Object, exe: &Object, search: &SearchPath) -> Option<Object> {
    if name.contains('/') {
        return compatible(Path::new(name), from);
    }
    let origin = |o: &Object| o.path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut dirs: Vec<PathBuf> = Vec::new();
    // DT_RPATH counts only when there is no DT_RUNPATH; the executable's RPATH applies to all.
    if from.runpath.is_empty() {
        dirs.extend(from.rpath.iter().map(|p| expand_origin(p, &origin(from))));
        if exe.runpath.is_empty() && !std::ptr::eq(from, exe) {
            dirs.extend(exe.rpath.iter().map(|p| expand_origin(p, &origin(exe))));
        }
    }
    dirs.extend(search.ld_library_path.iter().cloned());
    dirs.extend(from.runpath.iter().map(|p| expand_origin(p, &origin(from))));
    for d in &dirs {
        if let Some(o) = compatible(&d.join(name), from) {
            return Some(o);
        }
    }
    for p in search.cache.get(name).into_iter().flatten() {
        if let Some(o) = compatible(p, from) {
            return Some(o);
        }
    }
    search
        .defaults
        .iter()
        .find_map(|d| compatible(&d.join(name), from))
}

/// The newest `GLIBC_2.x`-style version of `family` among `defs`.
fn newest(defs: &BTreeSet<String>, family: &str) -> Option<String> {
    defs.iter()
        .filter(|d| d.starts_with(family))
        .filter_map(|d| {
            let v: Version = d[family.len()..].parse().ok()?;
            Some((v, d.clone()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, d)| d)
}

/// `GLIBC_2.38` → `GLIBC_`.
fn family(version: &str) -> &str {
    let cut = version
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or(version.len());
    &version[..cut]
}

/// Loads `root` (an executable or a library) on paper: every needed library found, every
/// needed version defined. `exe` is the program whose RPATH also applies (itself for a program).
pub fn load(root: &Object, exe: &Object, search: &SearchPath) -> Load {
    let mut out = Load::default();
    let mut loaded: BTreeMap<String, Object> = BTreeMap::new();
    let mut queue: VecDeque<Object> = VecDeque::from([root.clone()]);
    let mut seen_paths: BTreeSet<PathBuf> = BTreeSet::new();
    let mut all: Vec<Object> = Vec::new();
    while let Some(obj) = queue.pop_front() {
        if !seen_paths.insert(obj.path.clone()) || all.len() >= MAX_OBJECTS {
            continue;
        }
        for name in &obj.needed {
            out.needed.insert(name.clone());
            if loaded.contains_key(name) {
                continue;
            }
            match find(name, &obj, exe, search) {
                Some(lib) => {
                    loaded.insert(name.clone(), lib.clone());
                    queue.push_back(lib);
                }
                None => {
                    if !out.missing_libs.iter().any(|m| &m.name == name) {
                        out.missing_libs.push(MissingLib {
                            name: name.clone(),
                            needed_by: obj.path.clone(),
                        });
                    }
                }
            }
        }
        all.push(obj);
    }
    for obj in &all {
        for (file, versions) in &obj.version_needs {
            out.needed_versions.extend(versions.iter().cloned());
            let Some(lib) = loaded.get(file) else {
                continue; // already reported as a missing library
            };
            for v in versions {
                if !lib.version_defs.contains(v)
                    && !out
                        .missing_versions
                        .iter()
                        .any(|m| &m.version == v && &m.library == file)
                {
                    out.missing_versions.push(MissingVersion {
                        version: v.clone(),
                        library: file.clone(),
                        library_path: lib.path.clone(),
                        needed_by: obj.path.clone(),
                        newest_here: newest(&lib.version_defs, family(v)),
                    });
                }
            }
        }
    }
    out.objects = all.into_iter().map(|o| o.path).collect();
    out
}

/// The toolkit a set of needed library names reveals: CUDA from `libcudart`/`libcublas`, ROCm
/// from `libamdhip64` (its soname major is the ROCm major).
pub fn toolkits(needed: &BTreeSet<String>) -> Vec<(Backend, u64, String)> {
    let mut out: Vec<(Backend, u64, String)> = Vec::new();
    for n in needed {
        let (backend, stem) = if let Some(r) = n.strip_prefix("libcudart.so.") {
            (Backend::Cuda, r)
        } else if let Some(r) = n.strip_prefix("libcublas.so.") {
            (Backend::Cuda, r)
        } else if let Some(r) = n.strip_prefix("libamdhip64.so.") {
            (Backend::Hip, r)
        } else {
            continue;
        };
        let Some(major) = stem.split('.').next().and_then(|m| m.parse().ok()) else {
            continue;
        };
        if !out.iter().any(|(b, m, _)| *b == backend && *m == major) {
            out.push((backend, major, n.clone()));
        }
    }
    out
}

/// What loading the program at `path` and the backends beside it would do.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// False when the file is not ELF (a script, a Windows program): nothing was checked.
    pub elf: bool,
    pub program: Load,
    /// `libggml-*.so` beside the program (or in its library folders), loaded by `dlopen`.
    pub backends: Vec<(PathBuf, Load)>,
    pub error: Option<String>,
}

impl Report {
    /// Whether the program itself would fail to start.
    pub fn cannot_start(&self) -> bool {
        self.elf && !self.program.ok()
    }
}

/// Checks the program at `path` against this machine.
pub fn check(path: &Path) -> Report {
    check_with(path, &SearchPath::of_this_machine())
}

pub fn check_with(path: &Path, search: &SearchPath) -> Report {
    let exe = match read_object(path) {
        Ok(Some(o)) => o,
        Ok(None) => return Report::default(),
        Err(e) => {
            return Report {
                error: Some(e),
                ..Report::default()
            };
        }
    };
    let program = load(&exe, &exe, search);
    // Backends a GGML_BACKEND_DL build loads at run time sit beside the program (or in the
    // folders its RUNPATH names, such as ../lib).
    let mut dirs: Vec<PathBuf> = path.parent().map(Path::to_path_buf).into_iter().collect();
    let origin = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for p in exe.runpath.iter().chain(&exe.rpath) {
        let d = expand_origin(p, &origin);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let mut backends = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .is_some_and(|n| n.starts_with("libggml-") && n.ends_with(".so"))
            })
            .collect();
        names.sort();
        for p in names {
            if program.objects.contains(&p) {
                continue;
            }
            if let Some(o) = compatible(&p, &exe) {
                backends.push((p, load(&o, &exe, search)));
            }
        }
    }
    Report {
        elf: true,
        program,
        backends,
        error: None,
    }
}

fn short(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| p.display().to_string())
}

/// Findings for people: what this machine lacks, and which toolkit the build needs.
pub fn findings(r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(e) = &r.error {
        out.push(Finding::new(
            "binary-unreadable",
            Level::Warning,
            "the program's ELF headers could not be read",
            format!("{e}; whether it loads here was not checked"),
        ));
    }
    if !r.elf {
        return out;
    }
    let lacks = |load: &Load, what: &str, level: Level, out: &mut Vec<Finding>| {
        for m in &load.missing_libs {
            out.push(
                Finding::new(
                    "missing-library",
                    level,
                    format!("this machine lacks {}", m.name),
                    format!(
                        "{what}: {} needs {}, and the loader would not find it (RPATH/RUNPATH, LD_LIBRARY_PATH, the loader cache and the default folders were searched){}",
                        short(&m.needed_by),
                        m.name,
                        library_hint(&m.name)
                    ),
                )
                .fix(library_fix(&m.name)),
            );
        }
        for m in &load.missing_versions {
            out.push(
                Finding::new(
                    "missing-symbol-version",
                    level,
                    format!("this machine's {} lacks {}", m.library, m.version),
                    format!(
                        "{what}: {} needs {} from {}, but {} defines {}",
                        short(&m.needed_by),
                        m.version,
                        m.library,
                        m.library_path.display(),
                        m.newest_here
                            .as_deref()
                            .map(|n| format!("only up to {n}"))
                            .unwrap_or_else(|| "no such version".into())
                    ),
                )
                .fix(version_fix(m)),
            );
        }
    };
    lacks(
        &r.program,
        "the program cannot start",
        Level::Error,
        &mut out,
    );
    if r.program.ok() {
        let glibc = r
            .program
            .needed_versions
            .iter()
            .filter(|v| v.starts_with("GLIBC_2"))
            .filter_map(|v| Some((v["GLIBC_".len()..].parse::<Version>().ok()?, v.clone())))
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, v)| format!("; the newest glibc version it needs is {v}"))
            .unwrap_or_default();
        out.push(Finding::new(
            "loads-here",
            Level::Note,
            "it loads here",
            format!(
                "the program and the {} libraries it needs are found on this machine with every symbol version they need{glibc}",
                r.program.objects.len().saturating_sub(1)
            ),
        ));
    }
    for (p, load) in &r.backends {
        let what = format!(
            "the backend {} will not load, so llama.cpp runs without it (on the CPU if it is the GPU backend)",
            short(p)
        );
        lacks(load, &what, Level::Error, &mut out);
    }
    out
}

fn library_hint(name: &str) -> &'static str {
    if name.starts_with("libcudart") || name.starts_with("libcublas") {
        ": it is part of the CUDA toolkit's runtime libraries"
    } else if name.starts_with("libamdhip64")
        || name.starts_with("libhipblas")
        || name.starts_with("librocblas")
        || name.starts_with("librocsolver")
    {
        ": it is part of ROCm"
    } else if name.starts_with("libcuda.so") {
        ": it comes with the NVIDIA driver"
    } else {
        ""
    }
}

fn library_fix(name: &str) -> String {
    let major = name
        .rsplit(".so.")
        .next()
        .filter(|m| m.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if name.starts_with("libcudart") || name.starts_with("libcublas") {
        format!(
            "install the CUDA {} runtime libraries (e.g. `pip install nvidia-cuda-runtime-cu{0} nvidia-cublas-cu{0}` or the toolkit packages) and put their folder on LD_LIBRARY_PATH, or use a build made for the CUDA on this machine",
            major.unwrap_or("N")
        )
    } else if name.starts_with("libamdhip64")
        || name.starts_with("libhipblas")
        || name.starts_with("librocblas")
    {
        format!(
            "install the ROCm release this build was made for ({name} comes with ROCm {}), or use a build made for the ROCm on this machine",
            rocm_of(name).unwrap_or_else(|| "of that soname".into())
        )
    } else if name.starts_with("libcuda.so") {
        "install the NVIDIA driver".into()
    } else if name.starts_with("libggml")
        || name.starts_with("libllama")
        || name.starts_with("libmtmd")
    {
        "keep the program next to the libraries it was built with (they ship together), or set LD_LIBRARY_PATH to their folder".into()
    } else {
        format!("install the package that provides {name}, or run the build where it was made")
    }
}

/// ROCm majors of the sonames a llama.cpp HIP build needs (hipBLAS 2 and rocBLAS 4 are ROCm 6;
/// hipBLAS 3 and rocBLAS 5 are ROCm 7; libamdhip64.so.N is ROCm N).
fn rocm_of(name: &str) -> Option<String> {
    let major: u64 = name
        .rsplit(".so.")
        .next()?
        .split('.')
        .next()?
        .parse()
        .ok()?;
    let rocm = if name.starts_with("libamdhip64") {
        major
    } else if name.starts_with("libhipblas") {
        major + 4
    } else if name.starts_with("librocblas") {
        major + 2
    } else {
        return None;
    };
    Some(format!("{rocm}.x"))
}

fn version_fix(m: &MissingVersion) -> String {
    match family(&m.version) {
        "GLIBC_" => format!(
            "the build was made on a newer Linux than this one (glibc {}): use a build made on an older distribution (or in a manylinux-style container), build llama.cpp here, or upgrade the distribution",
            m.version.trim_start_matches("GLIBC_")
        ),
        "GLIBCXX_" | "CXXABI_" => format!(
            "the build needs a newer C++ runtime ({}): install a newer libstdc++ (a newer GCC's), ship the one it was built with beside it, or build llama.cpp here",
            m.version
        ),
        _ => format!(
            "install the {} the build was made with, or build llama.cpp here",
            m.library
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolkits_from_sonames() {
        let needed: BTreeSet<String> = ["libcudart.so.13", "libcublas.so.13", "libc.so.6"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            toolkits(&needed),
            vec![(Backend::Cuda, 13, "libcublas.so.13".to_string())]
        );
        let needed: BTreeSet<String> = ["libamdhip64.so.6"].iter().map(|s| s.to_string()).collect();
        assert_eq!(toolkits(&needed)[0].0, Backend::Hip);
        assert_eq!(toolkits(&needed)[0].1, 6);
    }

    #[test]
    fn rocm_majors_of_sonames() {
        assert_eq!(rocm_of("libhipblas.so.3").as_deref(), Some("7.x"));
        assert_eq!(rocm_of("libhipblas.so.2").as_deref(), Some("6.x"));
        assert_eq!(rocm_of("librocblas.so.4").as_deref(), Some("6.x"));
        assert_eq!(rocm_of("libamdhip64.so.7").as_deref(), Some("7.x"));
    }

    #[test]
    fn newest_version_of_a_family() {
        let defs: BTreeSet<String> = ["GLIBC_2.2.5", "GLIBC_2.36", "GLIBC_2.4", "GLIBC_PRIVATE"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(newest(&defs, "GLIBC_").as_deref(), Some("GLIBC_2.36"));
        assert_eq!(family("GLIBCXX_3.4.32"), "GLIBCXX_");
    }

    #[test]
    fn origin_is_expanded() {
        assert_eq!(
            expand_origin("$ORIGIN/../lib", Path::new("/opt/llama/bin")),
            PathBuf::from("/opt/llama/bin/../lib")
        );
    }

    #[test]
    fn this_test_binary_loads_here() {
        let exe = std::env::current_exe().unwrap();
        let r = check(&exe);
        assert!(r.elf);
        assert!(r.program.ok(), "{:?}", r.program);
        assert!(
            r.program.needed.iter().any(|n| n.starts_with("libc.so")),
            "{:?}",
            r.program.needed
        );
    }
}
