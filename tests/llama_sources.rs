//! Against real llama.cpp sources (PyPI sdists, fetched by scripts/fetch-llama-sources.sh into
//! $GPUPROBE_LLAMA_SOURCES/<build>/): every flag gpuprobe emits is declared by that build's CMake
//! files; the shell fragment passes exactly the planned arguments to cmake; a real CPU configure
//! reports none of the emitted option flags as unused.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn sources() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUPROBE_LLAMA_SOURCES").map(PathBuf::from)?;
    dir.is_dir().then_some(dir)
}

fn require_sources() -> Option<PathBuf> {
    let s = sources();
    if s.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "GPUPROBE_LLAMA_SOURCES must be set in CI (scripts/test.sh fetches them)"
        );
        eprintln!("skipped: GPUPROBE_LLAMA_SOURCES not set (run scripts/test.sh)");
    }
    s
}

fn builds(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .filter(|(_, p): &(u64, PathBuf)| p.join("ggml/CMakeLists.txt").is_file())
        .collect();
    v.sort();
    v
}

fn gp() -> Command {
    common::gpuprobe()
}

/// Every CMake file's text in a tree, concatenated (an independent, plain-text view).
fn cmake_text(tree: &Path) -> String {
    fn walk(p: &Path, out: &mut String) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                walk(&path, out);
            } else if name == "CMakeLists.txt" || name.ends_with(".cmake") {
                out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
                out.push('\n');
            }
        }
    }
    let mut s = String::new();
    walk(tree, &mut s);
    s
}

/// Declared by `option(NAME` or `set(NAME ... CACHE`, or (architecture variables) read by name.
fn declared(text: &str, name: &str) -> bool {
    if name.starts_with("CMAKE_") {
        return true;
    }
    let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let opt = format!("option({name} ");
    let set = format!("set({name} ");
    if squeezed.contains(&opt) {
        return true;
    }
    if let Some(i) = squeezed.find(&set) {
        let rest = &squeezed[i..];
        let end = rest.find(')').unwrap_or(rest.len());
        if rest[..end].contains(" CACHE ") {
            return true;
        }
    }
    matches!(name, "GPU_TARGETS" | "AMDGPU_TARGETS") && text.contains(name)
}

const PLANS: &[&[&str]] = &[
    &[
        "--targets",
        "gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908",
        "--rocm",
        "7.14.0",
    ],
    &["--targets", "gfx1201,gfx1100,gfx906", "--rocm", "7.2.1"],
    &["--targets", "gfx1100,gfx1151", "--rocm", "6.4"],
    &["--targets", "sm_75,sm_86,sm_89,sm_90", "--cuda", "12.8"],
    &["--targets", "sm_87", "--cuda", "12.8"],
];

fn emitted_names(args: &[&str], extra: &[String]) -> BTreeSet<String> {
    let out = gp()
        .arg("cmake-flags")
        .args(args)
        .args(extra)
        .args(["--format", "args"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .filter_map(|a| a.strip_prefix("-D")?.split('=').next().map(str::to_string))
        .collect()
}

#[test]
fn emitted_flags_are_declared_in_at_least_ten_real_builds() {
    let Some(dir) = require_sources() else { return };
    let builds = builds(&dir);
    assert!(
        builds.len() >= 10,
        "need at least 10 real builds, found {}",
        builds.len()
    );
    assert!(
        builds.iter().any(|(b, _)| *b == 11434),
        "build 11434 is among them"
    );
    for (i, (b, tree)) in builds.iter().enumerate() {
        let text = cmake_text(tree);
        // The table for every build; the tree itself (slower: it is scanned per call) for a spread.
        let modes: Vec<Vec<String>> = if i % 3 == 0 || *b == 11434 {
            vec![
                vec!["--llama-build".into(), b.to_string()],
                vec![
                    "--llama-cpp".into(),
                    tree.display().to_string(),
                    "--llama-build".into(),
                    b.to_string(),
                ],
            ]
        } else {
            vec![vec!["--llama-build".into(), b.to_string()]]
        };
        for plan in PLANS {
            for how in &modes {
                for name in emitted_names(plan, how) {
                    assert!(
                        declared(&text, &name),
                        "build {b}: gpuprobe emitted -D{name} ({plan:?}, {how:?}) but the build's CMake files do not declare it"
                    );
                }
            }
        }
    }
}

fn full_tree(dir: &Path) -> Option<PathBuf> {
    let t = dir.join("11434");
    let ok = t.join("ggml/src/ggml.c").is_file();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "the full 11434 tree is missing in CI"
        );
    }
    ok.then_some(t)
}

#[test]
fn shell_fragment_passes_exactly_the_planned_arguments_to_cmake() {
    let Some(dir) = require_sources() else { return };
    let Some(tree) = full_tree(&dir) else { return };
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let record = work.path().join("calls");
    // A recording stand-in for cmake: one line per call, arguments separated by a unit separator.
    std::fs::write(
        bin.join("cmake"),
        format!(
            "#!/bin/sh\nprintf '%s\\037' \"$@\" >> '{}'\necho >> '{}'\n",
            record.display(),
            record.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(bin.join("cmake"))
        .status()
        .unwrap();
    for plan in PLANS {
        let _ = std::fs::remove_file(&record);
        let script = gp()
            .arg("cmake-flags")
            .args(*plan)
            .args(["--llama-cpp"])
            .arg(&tree)
            .output()
            .unwrap();
        assert!(script.status.success());
        let json = gp()
            .arg("cmake-flags")
            .args(*plan)
            .args(["--llama-cpp"])
            .arg(&tree)
            .args(["--format", "json"])
            .output()
            .unwrap();
        let plan_json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let sh = work.path().join("build.sh");
        // Appended to an existing script, as users do: what follows must still run.
        std::fs::write(
            &sh,
            format!(
                "#!/bin/sh\necho before\n{}echo after\n",
                String::from_utf8_lossy(&script.stdout)
            ),
        )
        .unwrap();
        let out = std::process::Command::new("sh")
            .arg(&sh)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .env("LLAMA_CPP_DIR", &tree)
            .env("LLAMA_BUILD_DIR", work.path().join("b"))
            .env("LLAMA_BUILD_JOBS", "3")
            .env_remove("LLAMA_CMAKE_ARGS")
            .env_remove("LLAMA_BUILD_TARGETS")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("before") && stdout.trim_end().ends_with("after"),
            "{stdout}"
        );
        let calls: Vec<Vec<String>> = std::fs::read_to_string(&record)
            .unwrap()
            .lines()
            .map(|l| {
                l.split('\u{1f}')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .collect();
        let groups = plan_json["groups"].as_array().unwrap();
        assert_eq!(calls.len(), 2 * groups.len(), "{calls:?}");
        let multi = groups.len() > 1;
        for (i, g) in groups.iter().enumerate() {
            let out_dir = if multi {
                format!(
                    "{}-{}",
                    work.path().join("b").display(),
                    g["name"].as_str().unwrap()
                )
            } else {
                work.path().join("b").display().to_string()
            };
            let mut want = vec![
                "-S".to_string(),
                tree.display().to_string(),
                "-B".to_string(),
                out_dir.clone(),
            ];
            for f in g["flags"].as_array().unwrap() {
                want.push(format!(
                    "-D{}={}",
                    f["name"].as_str().unwrap(),
                    f["value"].as_str().unwrap()
                ));
            }
            assert_eq!(calls[2 * i], want, "configure call of group {}", g["name"]);
            assert_eq!(
                calls[2 * i + 1],
                ["--build", &out_dir, "--config", "Release", "-j", "3"],
                "build call"
            );
        }
    }
}

#[test]
fn real_cmake_configure_reports_no_emitted_option_as_unused() {
    let Some(dir) = require_sources() else { return };
    let Some(tree) = full_tree(&dir) else { return };
    if std::process::Command::new("cmake")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(std::env::var_os("CI").is_none(), "cmake missing in CI");
        return;
    }
    // Option flags of a HIP and a CUDA plan, configured on the CPU backend (no GPU toolchain
    // needed): the backend switch and the architecture lists are left out, the options stay.
    let mut flags: Vec<String> = Vec::new();
    for plan in [PLANS[0], PLANS[1], PLANS[3]] {
        let out = gp()
            .arg("cmake-flags")
            .args(plan)
            .args(["--llama-cpp"])
            .arg(&tree)
            .args(["--format", "args"])
            .output()
            .unwrap();
        for a in String::from_utf8(out.stdout).unwrap().split_whitespace() {
            let name = a.trim_start_matches("-D").split('=').next().unwrap();
            if [
                "GGML_HIP",
                "GGML_CUDA",
                "GPU_TARGETS",
                "AMDGPU_TARGETS",
                "CMAKE_CUDA_ARCHITECTURES",
            ]
            .contains(&name)
            {
                continue;
            }
            if !flags.iter().any(|f| f.starts_with(&format!("-D{name}="))) {
                flags.push(a.to_string());
            }
        }
    }
    assert!(flags.iter().any(|f| f.starts_with("-DGGML_HIP_NO_VMM=")));
    assert!(flags.iter().any(|f| f.starts_with("-DGGML_CUDA_NO_VMM=")));
    let build = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("cmake")
        .arg("-S")
        .arg(&tree)
        .arg("-B")
        .arg(build.path())
        .args([
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_BUILD_TOOLS=OFF",
        ])
        .args(&flags)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "configure failed: {err}");
    if let Some(i) = err.find("Manually-specified variables were not used") {
        let unused = &err[i..];
        for f in &flags {
            let name = f.trim_start_matches("-D").split('=').next().unwrap();
            assert!(
                !unused.contains(name),
                "cmake reports {name} as unused:\n{unused}"
            );
        }
    }
}

/// The eras the option table carries (HIP VMM switch, plain 12X handling) are what a checkout of
/// each real build says when gpuprobe reads the tree itself (`--llama-cpp DIR`): the generator
/// and the tree reader apply the same rule to the same sources.
#[test]
fn eras_read_from_real_trees_match_the_option_table() {
    use gpuprobe::llama::checkout::Checkout;
    use gpuprobe::llama::options::Plain12x;
    let Some(dir) = require_sources() else { return };
    let k = gpuprobe::profiles::Knowledge::bundled().unwrap();
    let mut checked = 0;
    for (build, tree) in builds(&dir) {
        let c = Checkout::open(&tree).unwrap();
        let want_switch = k.options.era("hip_vmm_switch", build).unwrap();
        assert_eq!(c.hip_vmm_switch, want_switch, "build {build}");
        let want_12x = Plain12x::parse(k.options.era("cuda_arch_12x", build).unwrap()).unwrap();
        assert_eq!(c.plain_12x, want_12x, "build {build}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} builds");
}

/// The text of every CUDA backend source of a tree (ggml/src/ggml-cuda, its CMake file included).
fn cuda_backend_text(tree: &Path) -> String {
    fn walk(p: &Path, out: &mut String) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".cu") || name.ends_with(".cuh") || name == "CMakeLists.txt" {
                out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
                out.push('\n');
            }
        }
    }
    let mut s = String::new();
    walk(&tree.join("ggml/src/ggml-cuda"), &mut s);
    s
}

/// A log signature that proves a build range (`implies`) is right about real sources: no build
/// outside the range holds the code that prints its line, and where the cache has builds inside
/// the range, one of them does. The arch-not-compiled abort ends at 6287 (#15587; the cache holds
/// builds on both sides). CMake's plain-12X rejection lives in 7538-7574 (#18361 to #18457; the
/// text as #18457's diff removes it): no cached build falls inside, so only the outside is checked.
#[test]
fn build_ranges_proved_by_log_lines_agree_with_real_sources() {
    let Some(dir) = require_sources() else { return };
    let v: toml::Value = toml::from_str(include_str!("../profiles/log-signatures.toml")).unwrap();
    let printers = [
        (
            "ggml-cuda-arch-not-compiled",
            "ggml was not compiled with any CUDA arch <=",
        ),
        (
            "cmake-cuda-plain-12x-rejected",
            "Compute capability ${ARCH} used, use ${ARCH}a or ${ARCH}f",
        ),
    ];
    let trees: Vec<(u64, String)> = builds(&dir)
        .into_iter()
        .map(|(b, t)| (b, cuda_backend_text(&t)))
        .collect();
    assert!(trees.len() >= 10, "only {} builds", trees.len());
    for (id, needle) in printers {
        let sig = v["signature"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"].as_str() == Some(id))
            .unwrap_or_else(|| panic!("no signature {id}"));
        let bound = |k: &str| sig["implies"].get(k).and_then(|x| x.as_integer());
        let min = bound("min_build").map_or(0, |x| x as u64);
        let max = bound("max_build").map_or(u64::MAX, |x| x as u64);
        assert!(min > 0 || max < u64::MAX, "{id} proves no build range");
        let (mut inside, mut inside_has) = (0, 0);
        for (build, text) in &trees {
            let has = text.contains(needle);
            if (min..=max).contains(build) {
                inside += 1;
                inside_has += usize::from(has);
            } else {
                assert!(!has, "{id}: build {build} prints it, outside {min}..={max}");
            }
        }
        assert!(
            inside == 0 || inside_has > 0,
            "{id}: none of the {inside} builds in {min}..={max} prints it"
        );
    }
}
