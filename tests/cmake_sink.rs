//! The CMake sink, against the real `cmake` (Debian's, installed by scripts/test.sh): a value a
//! user quirk file sets (`[quirk.effect.set]`, the only way outside text reaches a `-D` value)
//! reaches CMake's cache exactly as written, as one list item, through every way gpuprobe hands
//! it over (`build.sh`, `--format args`, `--format preset`, the workflow's configure step), or is
//! refused when the quirk file is loaded (exit 2, naming the file and the field).
//!
//! The tree configured is a stand-in llama.cpp checkout (no compiler needed: `LANGUAGES NONE`)
//! that declares the options a plan sets and uses `GGML_CUDA_COMPRESSION_MODE` the way llama.cpp's
//! ggml-cuda CMakeLists does (appended unquoted to the nvcc flag list, ggml/src/ggml-cuda/
//! CMakeLists.txt in build 11434), so a value that split into two list items would add an nvcc
//! flag of its author's choosing (`-ccbin=PROGRAM`: a program run on every CUDA compile).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const OPTION: &str = "GGML_CUDA_COMPRESSION_MODE";

fn cmake_available() -> bool {
    Command::new("cmake").arg("--version").output().is_ok()
}

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let t = Tree { dir };
        t.write(
            "llama.cpp/CMakeLists.txt",
            &format!(
                r#"cmake_minimum_required(VERSION 3.21)
project("llama.cpp" NONE)
add_subdirectory(ggml)
# What reached the cache, and how many nvcc flags the option makes.
get_property(value CACHE {OPTION} PROPERTY VALUE)
set(nvcc_flags -use_fast_math)
list(APPEND nvcc_flags -compress-mode=${{{OPTION}}})
list(LENGTH nvcc_flags count)
file(WRITE "${{CMAKE_BINARY_DIR}}/seen.txt" "value=<${{value}}>\ncount=${{count}}\n")
foreach(name IN ITEMS EVIL CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_HOST_COMPILER)
  if(DEFINED CACHE{{${{name}}}} OR DEFINED ${{name}})
    file(APPEND "${{CMAKE_BINARY_DIR}}/seen.txt" "defined=${{name}}\n")
  endif()
endforeach()
"#
            ),
        );
        t.write(
            "llama.cpp/ggml/CMakeLists.txt",
            &format!(
                "option(GGML_CUDA \"ggml: use CUDA\" OFF)\n\
                 option(GGML_HIP \"ggml: use HIP\" OFF)\n\
                 option(GGML_NATIVE \"ggml: native\" ON)\n\
                 option(GGML_CUDA_NO_VMM \"ggml: do not try to use CUDA VMM\" OFF)\n\
                 option(GGML_HIP_NO_VMM \"ggml: do not try to use HIP VMM\" ON)\n\
                 set({OPTION} \"size\" CACHE STRING \"ggml: cuda link binary compression mode\")\n"
            ),
        );
        t.write(
            "llama.cpp/ggml/src/ggml-cuda/CMakeLists.txt",
            "set(CMAKE_CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})\n",
        );
        t
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A user quirk file for sm_90 setting the option to `value`.
    fn quirk(&self, value: &str) {
        // A JSON string is a TOML basic string for everything written here (`\n`, `\"`, `\\`).
        self.write(
            "quirks/sink.toml",
            &format!(
                "[[quirk]]\nid = \"SINK\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n[quirk.effect.set]\n{OPTION} = {}\n",
                serde_json::to_string(value).unwrap()
            ),
        );
    }

    fn gpuprobe(&self, args: &[&str]) -> std::process::Output {
        common::gpuprobe()
            .current_dir(self.dir.path())
            .args(args)
            .env("GPUPROBE_QUIRKS_DIR", self.path("quirks"))
            .output()
            .unwrap()
    }

    fn plan(&self, format: &str) -> std::process::Output {
        self.gpuprobe(&[
            "cmake-flags",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--toolchain",
            "none",
            "--llama-cpp",
            "llama.cpp",
            "--llama-build",
            "11434",
            "--format",
            format,
        ])
    }

    /// Runs `script` with bash in the tree's directory, the real cmake on PATH, Ninja as the
    /// generator; returns what the configure recorded.
    fn configure(&self, what: &str, script: &str, env: &[(&str, &str)]) -> String {
        let _ = std::fs::remove_dir_all(self.path("build"));
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .current_dir(self.dir.path())
            .env("CMAKE_GENERATOR", "Ninja")
            .env("LLAMA_CPP_DIR", "llama.cpp")
            .env("LLAMA_BUILD_JOBS", "1")
            .env_remove("LLAMA_CMAKE_ARGS")
            .env_remove("LLAMA_BUILD_TARGETS")
            .env_remove("LLAMA_BUILD_DIR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{what}: cmake failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !self.path("pwned").exists(),
            "{what}: an injected command ran"
        );
        std::fs::read_to_string(self.path("build/seen.txt"))
            .unwrap_or_else(|e| panic!("{what}: the configure recorded nothing: {e}"))
    }
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `cmake_args` of the workflow's first matrix entry (a YAML double-quoted scalar, which
/// gpuprobe writes in JSON's spelling).
fn matrix_cmake_args(yaml: &str) -> String {
    let line = yaml
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("cmake_args: "))
        .unwrap_or_else(|| panic!("no cmake_args in the workflow:\n{yaml}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("cmake_args `{line}`: {e}"))
}

/// The two lines of the workflow template's Linux configure step that carry the plan's
/// arguments into cmake; the test fails when the template stops using them, so this copy
/// cannot drift from what CI runs.
const WORKFLOW_CONFIGURE: [&str; 2] = [
    r#"read -r -a plan_args <<< "$GPUPROBE_CMAKE_ARGS""#,
    r#"cmake -S llama.cpp -B build -G Ninja "${plan_args[@]}""#,
];

/// Hostile values: list separators, CMake variable and generator-expression syntax, shell
/// syntax, quotes, newlines, a flag. Each must arrive literally or be refused.
const HOSTILE: &[&str] = &[
    "size;-ccbin=/tmp/evil.sh",
    "ON;-DEVIL=1",
    "-ccbin=/tmp/evil.sh",
    "${HOME}",
    "$ENV{HOME}",
    "$<1:-ccbin=/tmp/evil.sh>",
    "$CACHE{CMAKE_COMMAND}",
    "a\"b",
    "a\nb",
    "a\\;b",
    "a b",
    "#x",
    "'x'",
    "$(touch pwned)",
    "`touch pwned`",
    "*",
    "[[x]]",
    "@HOME@",
    "size%HOME%",
    "none",
];

#[test]
fn a_quirk_value_reaches_cmake_literally_as_one_item_or_is_refused() {
    if !cmake_available() {
        panic!("cmake is not installed; scripts/test.sh installs it (apt-get install cmake)");
    }
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/workflow.yml.j2"),
    )
    .unwrap();
    for line in WORKFLOW_CONFIGURE {
        let head = line.split(" \"${plan_args").next().unwrap();
        assert!(
            template.contains(head),
            "templates/workflow.yml.j2 no longer has `{head}`: update WORKFLOW_CONFIGURE"
        );
    }
    let tree = Tree::new();
    let mut reached = Vec::new();
    let mut refused = Vec::new();
    for &value in HOSTILE {
        tree.quirk(value);
        let what = format!("{OPTION} = {value:?}");
        let shell = tree.plan("shell");
        if shell.status.code() == Some(2) {
            // Refused when the quirk file is loaded: every format refuses it alike.
            for format in ["shell", "args", "preset", "json"] {
                let out = tree.plan(format);
                assert_eq!(out.status.code(), Some(2), "{what} --format {format}");
                assert!(out.stdout.is_empty(), "{what} --format {format}: printed");
                let err = stderr(&out);
                assert!(
                    err.contains("sink.toml") && err.contains(&format!("effect.set.{OPTION}")),
                    "{what} --format {format}: the refusal names neither the file nor the field:\n{err}"
                );
            }
            let wf = tree.gpuprobe(&[
                "workflow",
                "--targets",
                "sm_90",
                "--os",
                "linux",
                "--cuda",
                "12.8",
                "--llama-build",
                "11434",
            ]);
            assert_eq!(
                wf.status.code(),
                Some(2),
                "{what} workflow: {}",
                stderr(&wf)
            );
            refused.push(value);
            continue;
        }
        assert!(shell.status.success(), "{what}: {}", stderr(&shell));
        let want = format!("value=<{value}>\ncount=2\n");
        // build.sh, as written.
        tree.write("build.sh", &stdout(&shell));
        let seen = tree.configure(&format!("{what} build.sh"), "sh build.sh", &[]);
        assert_eq!(seen, want, "{what}: build.sh");
        // --format args, through unquoted command substitution as documented.
        let args = tree.plan("args");
        assert!(args.status.success(), "{what} args: {}", stderr(&args));
        tree.write("args.txt", &stdout(&args));
        let seen = tree.configure(
            &format!("{what} --format args"),
            "cmake -S llama.cpp -B build $(cat args.txt)",
            &[],
        );
        assert_eq!(seen, want, "{what}: --format args");
        // --format preset, as CMakeUserPresets.json beside the sources.
        let preset = tree.plan("preset");
        assert!(
            preset.status.success(),
            "{what} preset: {}",
            stderr(&preset)
        );
        tree.write("llama.cpp/CMakeUserPresets.json", &stdout(&preset));
        let _ = std::fs::remove_dir_all(tree.path("llama.cpp/build-cuda"));
        let script = "cd llama.cpp && cmake --preset gpuprobe-cuda >/dev/null && mkdir -p ../build && cp build-cuda/seen.txt ../build/";
        let seen = tree.configure(&format!("{what} --format preset"), script, &[]);
        std::fs::remove_file(tree.path("llama.cpp/CMakeUserPresets.json")).unwrap();
        assert_eq!(seen, want, "{what}: --format preset");
        // The workflow's configure step, with the matrix value it writes.
        let wf = tree.gpuprobe(&[
            "workflow",
            "--targets",
            "sm_90",
            "--os",
            "linux",
            "--cuda",
            "12.8",
            "--llama-build",
            "11434",
        ]);
        assert!(wf.status.success(), "{what} workflow: {}", stderr(&wf));
        let cmake_args = matrix_cmake_args(&stdout(&wf));
        assert!(
            cmake_args.contains(OPTION),
            "{what}: the workflow does not set it: {cmake_args}"
        );
        let seen = tree.configure(
            &format!("{what} workflow"),
            &WORKFLOW_CONFIGURE.join("\n"),
            &[("GPUPROBE_CMAKE_ARGS", &cmake_args)],
        );
        assert_eq!(seen, want, "{what}: the workflow's configure step");
        reached.push(value);
    }
    eprintln!("reached CMake literally: {reached:?}\nrefused: {refused:?}");
    // Both branches ran: plain values go through, and the list separator does not.
    assert!(
        reached.contains(&"none") && reached.contains(&"@HOME@"),
        "{reached:?}"
    );
    for must in [
        "size;-ccbin=/tmp/evil.sh",
        "ON;-DEVIL=1",
        "-ccbin=/tmp/evil.sh",
        "${HOME}",
        "$<1:-ccbin=/tmp/evil.sh>",
        "a\nb",
    ] {
        assert!(refused.contains(&must), "{must:?} was not refused");
    }
}

#[test]
fn a_list_separator_in_a_value_would_add_an_nvcc_flag_in_llama_cpps_own_statement() {
    // Why `;` is refused, shown with the real cmake: the form llama.cpp uses turns one value
    // with a `;` into two nvcc flags.
    if !cmake_available() {
        panic!("cmake is not installed; scripts/test.sh installs it (apt-get install cmake)");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("flags.cmake");
    std::fs::write(
        &script,
        format!(
            "set(nvcc_flags -use_fast_math)\nlist(APPEND nvcc_flags -compress-mode=${{{OPTION}}})\nforeach(f IN LISTS nvcc_flags)\n  message(\"flag: ${{f}}\")\nendforeach()\n"
        ),
    )
    .unwrap();
    let out = Command::new("cmake")
        .arg(format!("-D{OPTION}=size;-ccbin=/tmp/evil.sh"))
        .arg("-P")
        .arg(&script)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("flag: -ccbin=/tmp/evil.sh"),
        "cmake did not split the value:\n{text}"
    );
}

/// A stand-in `hipconfig` (version and `-l`) whose LLVM folder is `dir`, with a `clang` in it.
fn fake_hipconfig(root: &Path, dir: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join("rocm").join(dir).join("llvm/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let clang = bin.join("clang");
    std::fs::write(&clang, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&clang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tool = root.join("hipconfig");
    // The folder is printed from a file, so no shell ever reads it.
    std::fs::write(root.join("llvm-dir"), bin.display().to_string()).unwrap();
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) echo 6.4.43482-0 ;; -l) cat '{}' ;; esac\n",
            root.join("llvm-dir").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    tool
}

#[test]
fn the_hip_compiler_path_reaches_cmake_literally_or_is_left_out_with_a_warning() {
    if !cmake_available() {
        panic!("cmake is not installed; scripts/test.sh installs it (apt-get install cmake)");
    }
    let tree = Tree::new();
    for (dir, literal) in [
        ("rocm-6.4", true),
        ("ro;-DEVIL=1", false),
        ("ro cm", false),
        ("ro$HOME", false),
        ("ro\"cm", false),
    ] {
        let root = tempfile::tempdir().unwrap();
        let tool = fake_hipconfig(root.path(), dir);
        let args = |format: &str, output: Option<&Path>| {
            let mut c = common::gpuprobe();
            c.current_dir(tree.dir.path())
                .args(["cmake-flags", "--targets", "gfx1100", "--toolchain"])
                .arg(&tool)
                .args(["--format", format])
                .env_remove("HIPCXX");
            if let Some(o) = output {
                c.env("GITHUB_OUTPUT", o);
            }
            c.output().unwrap()
        };
        let out = args("args", None);
        assert!(out.status.success(), "{dir:?}: {}", stderr(&out));
        let github_output = root.path().join("github-output");
        std::fs::write(&github_output, "").unwrap();
        let gh = args("github", Some(&github_output));
        assert!(gh.status.success(), "{dir:?} github: {}", stderr(&gh));
        let outputs = std::fs::read_to_string(&github_output).unwrap();
        let clang = root.path().join("rocm").join(dir).join("llvm/bin/clang");
        if literal {
            // The real cmake, through unquoted `$(...)` as documented: the cache holds the path.
            tree.write("args.txt", &stdout(&out));
            let script = "cmake -S llama.cpp -B build $(cat args.txt) >/dev/null && grep '^CMAKE_HIP_COMPILER' build/CMakeCache.txt > build/seen.txt";
            let seen = tree.configure(&format!("{dir:?}"), script, &[]);
            assert_eq!(
                seen.trim(),
                format!("CMAKE_HIP_COMPILER:UNINITIALIZED={}", clang.display()),
                "{dir:?}"
            );
            assert!(
                outputs.contains(&format!("HIPCXX={}", clang.display())),
                "{outputs}"
            );
        } else {
            for (what, text) in [("--format args", stdout(&out)), ("$GITHUB_OUTPUT", outputs)] {
                assert!(
                    !text.contains("CMAKE_HIP_COMPILER") && !text.contains("HIPCXX"),
                    "{dir:?}: {what} carries the path:\n{text}"
                );
            }
            assert!(
                stderr(&out).contains("cannot carry as one word"),
                "{dir:?}: no warning:\n{}",
                stderr(&out)
            );
        }
    }
}
