//! Untrusted input never escapes: hostile reports, quirk files, paths, environment values and
//! programs, driven through the real binary. Each test reproduces one way gpuprobe could be made
//! to run a command, write where it should not, hang, or corrupt what it shows.

// This harness signals and inspects processes through libc.
#![allow(unsafe_code)]
#![cfg(unix)]

mod common;
#[path = "common/linear.rs"]
mod linear;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REPORT: &str = include_str!("fixtures/nvidia-2x-h200-driver580/detect.json");
const R9700: &str = "tests/fixtures/sysfs/2x-r9700-gfx1201";

fn gp() -> assert_cmd::Command {
    let mut c = common::gpuprobe();
    c.timeout(Duration::from_secs(120));
    c
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gpuprobe"))
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuprobe-untrusted")
            .tempdir()
            .unwrap();
        Sandbox { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Where an injected command would leave its mark.
    fn marker(&self) -> PathBuf {
        self.path("pwned")
    }

    /// Text that runs `touch pwned` (in the sandbox, where fragments run) if it ever leaves a
    /// comment line or a quoted word. It has no `/`, so it can also be a file name.
    fn payload(&self) -> String {
        "\ntouch pwned; : $(touch pwned) `touch pwned`\n".to_string()
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn script(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.write(rel, text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Runs a generated build fragment with a stand-in `cmake` that only records its arguments,
    /// and asserts that nothing else ran. Returns the recorded cmake arguments.
    fn run_fragment(&self, fragment: &str) -> String {
        let bin = self.path("fakebin");
        let log = self.path("cmake-args.log");
        self.script(
            "fakebin/cmake",
            &format!(
                "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\" >> '{}'; done; echo >> '{}'\n",
                log.display(),
                log.display()
            ),
        );
        let script = self.write("build.sh", fragment);
        let out = std::process::Command::new("sh")
            .arg(&script)
            .current_dir(self.dir.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("LLAMA_CPP_DIR", self.dir.path())
            .env_remove("LLAMA_CMAKE_ARGS")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the fragment failed: {}\n{fragment}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.assert_nothing_ran(fragment);
        std::fs::read_to_string(&log).unwrap_or_default()
    }

    fn assert_nothing_ran(&self, context: &str) {
        assert!(
            !self.marker().exists(),
            "an injected command ran:\n{context}"
        );
    }

    /// A minimal llama.cpp tree (the options a plan needs) at `rel`.
    fn llama_tree(&self, rel: &str) -> PathBuf {
        let root = self.path(rel);
        std::fs::create_dir_all(root.join("ggml/src/ggml-cuda")).unwrap();
        std::fs::write(
            root.join("CMakeLists.txt"),
            "project(\"llama.cpp\" C CXX)\n",
        )
        .unwrap();
        std::fs::write(
            root.join("ggml/CMakeLists.txt"),
            "option(GGML_CUDA \"ggml: use CUDA\" OFF)\n\
             option(GGML_HIP \"ggml: use HIP\" OFF)\n\
             option(GGML_CUDA_NO_VMM \"ggml: do not try to use CUDA VMM\" OFF)\n\
             option(GGML_HIP_NO_VMM \"ggml: do not try to use HIP VMM\" ON)\n",
        )
        .unwrap();
        std::fs::write(
            root.join("ggml/src/ggml-cuda/CMakeLists.txt"),
            "set(CMAKE_CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})\n",
        )
        .unwrap();
        root
    }

    /// A report edited by `edit`, written to `report.json`.
    fn report(&self, edit: impl Fn(&mut Value)) -> PathBuf {
        let mut v: Value = serde_json::from_str(REPORT).unwrap();
        edit(&mut v);
        self.write("report.json", &v.to_string())
    }

    /// A fake HIP probe program: the pass fake, its output rewritten by `sed` expressions.
    fn probe(&self, sed: &[String]) -> PathBuf {
        let fake = manifest().join("tests/fake-probes/pass-gfx1201.sh");
        let exprs: Vec<String> = sed.iter().map(|e| format!("-e '{e}'")).collect();
        self.script(
            "probe.sh",
            &format!(
                "#!/bin/sh\n'{}' \"$@\" | sed {}\n",
                fake.display(),
                exprs.join(" ")
            ),
        )
    }

    /// gpuprobe probing the fake machine with `probe` (no real toolchain, no GPU).
    fn probing(&self, probe: &Path) -> assert_cmd::Command {
        let mut c = gp();
        std::fs::create_dir_all(self.path("home")).unwrap();
        c.env("HOME", self.path("home"))
            .env("PATH", "/usr/bin:/bin")
            .env("ROCM_PATH", self.path("no-rocm"))
            .env("HIP_PATH", self.path("no-rocm"))
            .env("CUDA_HOME", self.path("no-cuda"))
            .env_remove("CUDA_PATH")
            .env("GPUPROBE_SYSFS_ROOT", manifest().join(R9700))
            .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
            .env("GPUPROBE_HIP_PROBE", probe)
            .env("FAKE_PROBE_DEVICES", "1");
        c
    }

    fn mkfifo(&self, rel: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: plain syscall on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        p
    }
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A JSON string with the payload's newline written as the JSON escape, for sed replacements.
fn json_escaped(s: &str) -> String {
    let j = serde_json::to_string(s).unwrap();
    j[1..j.len() - 1].replace('\\', "\\\\").replace('|', "\\|")
}

// ---- shell, args, github, preset: nothing from outside runs ------------------------------------

#[test]
fn a_report_arch_with_a_newline_is_refused_and_runs_nothing() {
    let sb = Sandbox::new();
    let payload = sb.payload();
    let report = sb.report(|v| v["devices"][0]["arch"] = format!("sm_90{payload}").into());
    let out = gp()
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(&report)
        .output()
        .unwrap();
    if out.status.success() {
        sb.run_fragment(&stdout(&out));
    }
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&report.display().to_string()), "{err}");
    assert!(err.contains("device entry 0, field `arch`"), "{err}");
    assert!(err.contains("fix:"), "{err}");
}

#[test]
fn a_probe_that_prints_a_hostile_arch_cannot_inject_into_any_format() {
    let sb = Sandbox::new();
    let payload = sb.payload();
    let probe = sb.probe(&[format!(
        "s|\"arch\":\"gfx1201\"|\"arch\":\"gfx1201{}\"|",
        json_escaped(&payload)
    )]);
    let base = [
        "cmake-flags",
        "--toolchain",
        "none",
        "--backend",
        "hip",
        "--cycles",
        "3",
    ];

    // shell: the `# group` comment and the warning lines stay comments, the value stays a word.
    let out = sb.probing(&probe).args(base).output().unwrap();
    let text = stdout(&out);
    let args = if out.status.success() {
        sb.run_fragment(&text)
    } else {
        String::new()
    };
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("# group hip: gfx1201\\ntouch"), "{text}");
    assert!(
        args.contains("gfx1201\\ntouch"),
        "cmake got the value as one word: {args}"
    );

    // args: one line per group, or a refusal; never a second line.
    let out = sb
        .probing(&probe)
        .args(base)
        .args(["--format", "args"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out).lines().count().max(1), 1, "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // github: exactly the four outputs.
    let gh = sb.write("github_output", "");
    let out = sb
        .probing(&probe)
        .args(base)
        .args(["--format", "github"])
        .env("GITHUB_OUTPUT", &gh)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let keys = github_output_keys(&std::fs::read_to_string(&gh).unwrap());
    assert_eq!(
        keys,
        ["cmake-args", "configure-env", "matrix", "env", "plan"]
    );
    sb.assert_nothing_ran("github");

    // preset: refused rather than written with a value CMake would expand.
    let out = sb
        .probing(&probe)
        .args(base)
        .args(["--format", "preset"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
}

/// The keys of a `$GITHUB_OUTPUT` file, read the way the runner reads it.
fn github_output_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        match (line.find('='), line.find("<<")) {
            (Some(eq), heredoc) if heredoc.is_none_or(|h| eq < h) => {
                keys.push(line[..eq].to_string());
            }
            (_, Some(h)) => {
                keys.push(line[..h].to_string());
                let delim = &line[h + 2..];
                for l in lines.by_ref() {
                    if l == delim {
                        break;
                    }
                }
            }
            _ => keys.push(format!("<malformed: {line}>")),
        }
    }
    keys
}

#[test]
fn a_llama_cpp_directory_with_a_newline_stays_in_its_comment() {
    let sb = Sandbox::new();
    let dir = sb.llama_tree(&format!("llama{}", sb.payload()));
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--toolchain",
            "none",
            "--llama-cpp",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("\\ntouch pwned"), "{text}");
    sb.run_fragment(&text);
}

#[test]
fn a_toolchain_path_with_a_newline_stays_in_its_comment() {
    let sb = Sandbox::new();
    let nvcc = sb.script(
        &format!("tool{}/nvcc", sb.payload()),
        "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n",
    );
    let out = gp()
        .args(["cmake-flags", "--targets", "sm_90", "--toolchain"])
        .arg(&nvcc)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("CUDA 12.8") && text.contains("\\ntouch pwned"),
        "{text}"
    );
    sb.run_fragment(&text);
}

#[test]
fn a_rocm_path_with_a_newline_stays_in_its_comment() {
    let sb = Sandbox::new();
    let rocm = sb.path(&format!("rocm{}", sb.payload()));
    sb.script(
        &format!("rocm{}/bin/hipconfig", sb.payload()),
        "#!/bin/sh\necho 6.4.43482-0\n",
    );
    let out = gp()
        .args(["cmake-flags", "--targets", "gfx1100"])
        .env("ROCM_PATH", &rocm)
        .env("HIP_PATH", &rocm)
        .env("PATH", "/usr/bin:/bin")
        .env("CUDA_HOME", sb.path("no-cuda"))
        .env_remove("CUDA_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ROCm 6.4") && text.contains("\\ntouch pwned"),
        "{text}"
    );
    sb.run_fragment(&text);
}

#[test]
fn a_quirk_file_with_a_newline_in_an_env_name_or_condition_is_refused() {
    for (field, record) in [
        (
            "effect.env",
            "[quirk.effect.env]\n\"GGML_X\\ntouch MARKER\" = \"1\"\n",
        ),
        (
            "effect.env_when",
            "[quirk.effect]\nenv_when = \"always\\ntouch MARKER\"\n[quirk.effect.env]\nGGML_X = \"1\"\n",
        ),
    ] {
        let sb = Sandbox::new();
        let record = record.replace("MARKER", "pwned");
        sb.write(
            "quirks/evil.toml",
            &format!(
                "[[quirk]]\nid = \"EVIL\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n{record}"
            ),
        );
        let out = gp()
            .args([
                "cmake-flags",
                "--targets",
                "sm_90",
                "--cuda",
                "12.8",
                "--toolchain",
                "none",
            ])
            .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
            .output()
            .unwrap();
        if out.status.success() {
            sb.run_fragment(&stdout(&out));
        }
        assert_eq!(out.status.code(), Some(2), "{field}: {}", stdout(&out));
        assert!(stderr(&out).contains(field), "{field}: {}", stderr(&out));
        assert!(stderr(&out).contains("evil.toml"), "{}", stderr(&out));
    }
}

// ---- reports are validated with the CLI's rules ------------------------------------------------

#[test]
fn report_fields_are_validated_naming_file_device_field_and_fix() {
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "field `arch`",
            Box::new(|v| v["devices"][0]["arch"] = "".into()),
        ),
        (
            "field `arch`",
            Box::new(|v| v["devices"][0]["arch"] = "sm_".into()),
        ),
        (
            "field `name`",
            Box::new(|v| v["devices"][0]["name"] = "H200\u{0}".into()),
        ),
        (
            "field `arch`",
            Box::new(|v| v["devices"][1]["arch"] = "gfx1201; rm -rf ~".into()),
        ),
        (
            "field `vendor`",
            Box::new(|v| {
                v["devices"][0]["vendor"] = "amd".into();
                v["devices"][1]["vendor"] = "amd".into();
            }),
        ),
        (
            "field `smoke.mismatches`",
            Box::new(|v| v["devices"][0]["smoke"]["mismatches"] = 999.into()),
        ),
    ];
    for (field, edit) in cases {
        let sb = Sandbox::new();
        let report = sb.report(edit);
        let out = gp()
            .args([
                "cmake-flags",
                "--toolchain",
                "none",
                "--format",
                "json",
                "--from",
            ])
            .arg(&report)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{field}: {}\n{err}",
            stdout(&out)
        );
        assert!(stdout(&out).is_empty(), "{field}: nothing half-written");
        assert!(err.contains(&report.display().to_string()), "{err}");
        assert!(err.contains("device entry"), "{err}");
        assert!(err.contains(field), "want {field}: {err}");
        assert!(err.contains("fix:"), "{err}");
    }
}

#[test]
fn a_report_without_devices_says_so() {
    let sb = Sandbox::new();
    // What `detect --json` writes on a machine without a GPU.
    let report = sb.report(|v| {
        v["devices"] = json!([]);
        v["peers"] = json!([]);
        v["backends"][0]["status"] = "no-driver".into();
    });
    let out = gp()
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(&report)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("lists no GPU"), "{err}");
    assert!(err.contains("--targets"), "{err}");
    assert!(!err.contains("CUDA and HIP"), "{err}");
}

// ---- bounded, regular-file-only reads ----------------------------------------------------------

#[test]
fn a_fifo_or_device_as_report_or_quirk_file_is_refused_without_waiting() {
    let sb = Sandbox::new();
    let fifo = sb.mkfifo("report.json");
    let t = Instant::now();
    let out = gp()
        .timeout(Duration::from_secs(30))
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("FIFO"), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(20));

    let out = gp()
        .args(["cmake-flags", "--toolchain", "none", "--from", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("character device"),
        "{}",
        stderr(&out)
    );

    sb.mkfifo("quirks/a.toml");
    let out = gp()
        .timeout(Duration::from_secs(30))
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a.toml"), "{}", stderr(&out));

    std::fs::remove_file(sb.path("quirks/a.toml")).unwrap();
    std::os::unix::fs::symlink("/dev/null", sb.path("quirks/b.toml")).unwrap();
    let out = gp()
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("character device"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fifo_in_sysfs_does_not_hang_detection() {
    let sb = Sandbox::new();
    let root = sb.path("sysfs");
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(manifest().join(R9700))
        .arg(&root)
        .status()
        .unwrap();
    assert!(copy.success());
    let name = root.join("sys/class/drm/renderD128/device/product_name");
    std::fs::remove_file(&name).unwrap();
    sb.mkfifo("sysfs/sys/class/drm/renderD128/device/product_name");
    let props = root.join("sys/class/kfd/kfd/topology/nodes/2/properties");
    std::fs::remove_file(&props).unwrap();
    sb.mkfifo("sysfs/sys/class/kfd/kfd/topology/nodes/2/properties");
    let t = Instant::now();
    let out = gp()
        .timeout(Duration::from_secs(30))
        .args(["detect", "--backend", "hip", "--no-smoke", "--json"])
        .env("GPUPROBE_SYSFS_ROOT", &root)
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("PATH", "/usr/bin:/bin")
        .env("ROCM_PATH", sb.path("no-rocm"))
        .env("HIP_PATH", sb.path("no-rocm"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(20));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!r["devices"].as_array().unwrap().is_empty(), "{r:#}");
}

#[test]
fn an_input_over_the_limit_is_refused_naming_it() {
    let sb = Sandbox::new();
    // A quirk file is read whole and parsed into many times its size, so it has a limit of its
    // own (4 MiB), checked before parsing.
    std::fs::create_dir_all(sb.path("quirks")).unwrap();
    let f = std::fs::File::create(sb.path("quirks/big.toml")).unwrap();
    f.set_len((4 << 20) + 1).unwrap();
    let out = gp()
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("big.toml") && err.contains("larger than 4 MiB"),
        "{err}"
    );
    // A `--from` document (32 MiB).
    let big = sb.path("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((64 << 20) + 1).unwrap();
    let out = gp()
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("big.json") && err.contains("is larger than") && err.contains("the limit"),
        "{err}"
    );
}

// ---- atomic, safe writes -----------------------------------------------------------------------

#[test]
fn output_never_replaces_something_that_is_not_a_regular_file() {
    let sb = Sandbox::new();
    // A FIFO stands in for a device node such as /dev/full.
    let fifo = sb.mkfifo("llama.yml");
    let out = gp()
        .args([
            "workflow",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--output",
        ])
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("FIFO"), "{}", stderr(&out));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

/// A report whose only device failed its smoke test on architecture `arch`.
fn failed_report(arch: &str) -> String {
    let mut v: Value = serde_json::from_str(REPORT).unwrap();
    let mut d = v["devices"][0].clone();
    d["arch"] = arch.into();
    d["smoke"]["outcome"] = "fail".into();
    d["smoke"]["stage"] = "verify".into();
    d["smoke"]["mismatches"] = 7.into();
    d["smoke"]["reason"] = "7 words read back wrong".into();
    v["devices"] = json!([d]);
    v["peers"] = json!([]);
    v.to_string()
}

#[test]
fn concurrent_quirks_record_runs_lose_nothing() {
    let sb = Sandbox::new();
    let file = sb.path("q/local.toml");
    let archs = [
        "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_87",
    ];
    let children: Vec<_> = archs
        .iter()
        .map(|a| {
            let r = sb.write(&format!("r-{a}.json"), &failed_report(a));
            std::process::Command::new(bin())
                .args(["quirks", "record", "--from"])
                .arg(&r)
                .arg("--file")
                .arg(&file)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    for a in archs {
        assert!(
            text.contains(&format!("LOCAL-{a}-fail-verify")),
            "{a} lost:\n{text}"
        );
    }
}

#[test]
fn quirks_record_keeps_a_symlinked_file_and_its_permissions() {
    let sb = Sandbox::new();
    let real = sb.write("dotfiles/local.toml", "# mine\n");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir_all(sb.path("cfg")).unwrap();
    let link = sb.path("cfg/local.toml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let r = sb.write("r.json", &failed_report("sm_90"));
    gp().args(["quirks", "record", "--from"])
        .arg(&r)
        .arg("--file")
        .arg(&link)
        .assert()
        .success();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(
        text.contains("# mine") && text.contains("LOCAL-sm_90"),
        "{text}"
    );
    let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

// ---- every program has a timeout and is killed with its group ----------------------------------

/// True while a process whose command line contains `token` is alive.
fn alive(token: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(token)
            })
            .unwrap_or(false)
    })
}

/// A `sleep` duration no other process on the machine is likely to use, to find it again.
fn unique_sleep() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let n = nanos ^ (u64::from(std::process::id()) << 20) ^ COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{}.{:06}", 500 + n % 97, n % 1_000_000)
}

#[test]
fn a_toolchain_program_that_never_exits_is_killed_with_its_escaped_children() {
    let sb = Sandbox::new();
    let token = unique_sleep();
    let nvcc = sb.script(
        "bin/nvcc",
        &format!("#!/bin/sh\nsetsid sleep {token} &\nexec sleep {token}\n"),
    );
    let t = Instant::now();
    let out = gp()
        .args(["cmake-flags", "--targets", "sm_90", "--toolchain"])
        .arg(&nvcc)
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("killed"), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !alive(&format!("sleep {token}")),
        "a child outlived gpuprobe"
    );
}

#[test]
fn a_hipconfig_that_never_exits_does_not_hang_planning() {
    let sb = Sandbox::new();
    let token = unique_sleep();
    sb.script(
        "rocm/bin/hipconfig",
        &format!("#!/bin/sh\nexec sleep {token}\n"),
    );
    let t = Instant::now();
    let out = gp()
        .args(["cmake-flags", "--targets", "gfx1100", "--format", "json"])
        .env("ROCM_PATH", sb.path("rocm"))
        .env("HIP_PATH", sb.path("rocm"))
        .env("PATH", "/usr/bin:/bin")
        .env("CUDA_HOME", sb.path("no-cuda"))
        .env_remove("CUDA_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(60));
    assert!(stderr(&out).contains("killed"), "{}", stderr(&out));
    assert!(!alive(&format!("sleep {token}")));
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        // `commit` would start `git maintenance run --auto` in the background, which can open the
        // FIFO a test puts at objects/info/alternates afterwards and block there for ever.
        .args(["-c", "maintenance.auto=false", "-c", "gc.auto=0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn a_fifo_in_a_llama_cpp_git_tree_does_not_hang_gpuprobe() {
    let sb = Sandbox::new();
    let tree = sb.llama_tree("llama");
    git(&tree, &["init", "-q"]);
    git(&tree, &["add", "."]);
    git(&tree, &["commit", "-qm", "one"]);
    sb.mkfifo("llama/.git/objects/info/alternates");
    let t = Instant::now();
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--toolchain",
            "none",
            "--format",
            "json",
            "--llama-cpp",
        ])
        .arg(&tree)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(90));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["llama"]["build"], Value::Null);
}

#[test]
fn a_probe_that_said_done_and_exited_is_complete_though_a_grandchild_holds_its_pipe() {
    let sb = Sandbox::new();
    let token = unique_sleep();
    let fake = manifest().join("tests/fake-probes/pass-gfx1201.sh");
    let probe = sb.script(
        "probe.sh",
        &format!(
            "#!/bin/sh\n'{}' \"$@\"\nsetsid sleep {token} &\nexit 0\n",
            fake.display()
        ),
    );
    let out = sb
        .probing(&probe)
        .args([
            "detect",
            "--json",
            "--backend",
            "hip",
            "--cycles",
            "3",
            "--timeout",
            "8",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A clean run of 3 cycles is `partial` (fewer than a full run), never a `hang`.
    let outcome = r["devices"][0]["smoke"]["outcome"].as_str().unwrap_or("");
    assert!(outcome == "partial" || outcome == "pass", "{r:#}");
    // What detect wrote reads back through the report checks.
    let saved = sb.write("detected.json", &stdout(&out));
    let plan = sb
        .probing(&probe)
        .args([
            "cmake-flags",
            "--toolchain",
            "none",
            "--format",
            "json",
            "--from",
        ])
        .arg(&saved)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", stderr(&plan));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !alive(&format!("sleep {token}")),
        "the setsid grandchild outlived gpuprobe"
    );
}

// ---- linear time -------------------------------------------------------------------------------

#[test]
fn a_quirk_file_with_many_records_loads_in_linear_time() {
    let sb = Sandbox::new();
    // Quadratic merging took minutes at 200k records (the 4 MiB limit of a quirk file holds
    // about 35k).
    linear::assert_linear("quirk records", 6_000, |n| {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!(
                "[[quirk]]\nid = \"U{i}\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"low\"\nconfidence = \"low\"\nmeasured_on = \"here\"\n\n"
            ));
        }
        sb.write("quirks/big.toml", &text);
        let mut c = common::gpuprobe_process();
        c.args(["quirks", "show", &format!("U{}", n - 1)])
            .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"));
        linear::cpu_seconds(c, "quirks show")
    });
}

#[test]
fn a_cmake_tree_with_many_set_lines_is_scanned_in_linear_time() {
    let sb = Sandbox::new();
    let tree = sb.llama_tree("llama");
    linear::assert_linear("cmake set lines", 20_000, |n| {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("set(GPUPROBE_V{i} \"1\" CACHE STRING \"doc\")\n"));
        }
        // And unterminated calls, which once made every later match scan to the end.
        for _ in 0..n {
            text.push_str("set(\n");
        }
        std::fs::write(tree.join("ggml/src/ggml-cuda/many.cmake"), &text).unwrap();
        let mut c = common::gpuprobe_process();
        c.args([
            "cmake-flags",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--toolchain",
            "none",
            "--llama-build",
            "7000",
            "--llama-cpp",
        ])
        .arg(&tree);
        linear::cpu_seconds(c, "cmake-flags --llama-cpp")
    });
}

// ---- shallow clones ----------------------------------------------------------------------------

#[test]
fn a_shallow_clone_has_an_unknown_build_with_the_fix() {
    let sb = Sandbox::new();
    let tree = sb.llama_tree("origin");
    git(&tree, &["init", "-q"]);
    git(&tree, &["add", "."]);
    git(&tree, &["commit", "-qm", "one"]);
    std::fs::write(tree.join("README"), "x").unwrap();
    git(&tree, &["add", "."]);
    git(&tree, &["commit", "-qm", "two"]);
    let shallow = sb.path("shallow");
    let url = format!("file://{}", tree.display());
    let ok = std::process::Command::new("git")
        .args(["clone", "-q", "--depth", "1", &url])
        .arg(&shallow)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "sm_90",
            "--cuda",
            "12.8",
            "--toolchain",
            "none",
            "--format",
            "json",
            "--llama-cpp",
        ])
        .arg(&shallow)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["llama"]["build"], Value::Null, "{plan:#}");
    let err = stderr(&out);
    assert!(
        err.contains("shallow")
            && err.contains("fetch --unshallow")
            && err.contains("--llama-build"),
        "{err}"
    );
}

// ---- pipes, I/O errors and exit codes ----------------------------------------------------------

fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::process::Command::new(bin())
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-gpuprobe-config")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_pipe_ends_quietly_by_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["completions", "bash"][..],
        &["man"][..],
        &["quirks", "list"][..],
    ] {
        let out = with_closed_stdout(args);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {}",
            out.status,
            stderr(&out)
        );
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_full_disk_on_stdout_is_an_error_naming_it() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(bin())
        .args(["completions", "bash"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("standard output") && err.contains("fix:"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn an_os_error_is_printed_once_with_a_fix_and_exit_2() {
    // A file where a quirk directory is expected.
    let out = gp()
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", manifest().join("Cargo.toml"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    assert!(err.contains("Cargo.toml") && err.contains("fix:"), "{err}");
}

// ---- the terminal sees no escape sequences -----------------------------------------------------

#[test]
fn escape_sequences_from_sysfs_probes_and_logs_never_reach_the_terminal() {
    let sb = Sandbox::new();
    // A sysfs tree whose product name carries escape sequences.
    let root = sb.path("sysfs");
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(manifest().join(R9700))
        .arg(&root)
        .status()
        .unwrap();
    assert!(copy.success());
    for n in ["128", "129"] {
        std::fs::write(
            root.join(format!("sys/class/drm/renderD{n}/device/product_name")),
            "Radeon\u{1b}]0;pwned\u{7}\u{1b}[2J\r\n",
        )
        .unwrap();
    }
    let out = gp()
        .args(["detect", "--backend", "hip", "--no-smoke"])
        .env("GPUPROBE_SYSFS_ROOT", &root)
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("PATH", "/usr/bin:/bin")
        .env("ROCM_PATH", sb.path("no-rocm"))
        .env("HIP_PATH", sb.path("no-rocm"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Radeon\\x1b]0;pwned"),
        "{}",
        stdout(&out)
    );
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));

    // A probe program whose device name does the same.
    let probe = sb.probe(&[
        "s|\"name\":\"AMD Radeon AI PRO R9700\"|\"name\":\"R9700\\\\u001b[2J\\\\u0007\"|"
            .to_string(),
    ]);
    let out = sb
        .probing(&probe)
        .args(["detect", "--backend", "hip", "--cycles", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("R9700\\x1b[2J"), "{}", stdout(&out));
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));

    // A llama.cpp log with them.
    let log = sb.write(
        "llama.log",
        "version: 7000 (abcdef1)\nggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA\u{1b}[2J H200, compute capability 9.0, VMM: yes\n",
    );
    let out = gp()
        .args(["check-build", "--no-probe", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_child_finished_before_its_deadline_is_not_a_hang_however_late_it_is_collected() {
    use gpuprobe::children::orchestrator::{Exit, spawn};
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg("echo '{\"event\":\"done\"}'");
    let running = spawn(cmd, Duration::from_millis(100)).unwrap();
    // Collected well after its deadline, as when another child was waited for first.
    std::thread::sleep(Duration::from_millis(600));
    let out = running.finish();
    assert_eq!(out.exit, Exit::Code(0));
    assert!(out.complete(), "{:?}", out.events);
}

// ---- round 2: shared directories, quirk effects, CI-log commands -----------------------------

/// A stand-in hipcc (failure injection: the real one needs ROCm device libraries) that "builds"
/// a probe by writing a wrapper around the passing fake probe.
fn fake_hipcc(sb: &Sandbox) -> PathBuf {
    let fake = manifest().join("tests/fake-probes/pass-gfx1201.sh");
    sb.script(
        "rocm/bin/hipcc",
        &format!(
            "#!/bin/sh\ncase \"$1\" in --version) echo 'HIP version: 6.1.40091-fake'; exit 0;; esac\n\
             out=\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n\
             printf '#!/bin/sh\\nexec %s \"$@\"\\n' '{}' > \"$out\" && chmod 755 \"$out\"\n",
            fake.display()
        ),
    );
    sb.path("rocm")
}

/// gpuprobe detecting the fake R9700 machine with the fake hipcc and no HOME: the HIP probe
/// program is built (or taken from the cache) and run.
fn detect_with_hipcc(sb: &Sandbox, tmp: &Path) -> std::process::Output {
    let rocm = fake_hipcc(sb);
    std::fs::create_dir_all(tmp).unwrap();
    let mut c = gp();
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TMPDIR", tmp)
        .env("ROCM_PATH", &rocm)
        .env("HIP_PATH", &rocm)
        .env("GPUPROBE_SYSFS_ROOT", manifest().join(R9700))
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("FAKE_PROBE_DEVICES", "1")
        .args(["detect", "--backend", "hip", "--json", "--timeout", "30"]);
    c.output().unwrap()
}

fn find_named(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if e.file_name() == name {
            return Some(p);
        }
        if e.file_type().unwrap().is_dir()
            && let Some(f) = find_named(&p, name)
        {
            return Some(f);
        }
    }
    None
}

fn chown_to_nobody(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain syscall on a NUL-terminated path.
    unsafe { libc::lchown(c.as_ptr(), 65534, 65534) };
}

#[test]
fn a_probe_planted_in_the_shared_temp_dir_is_never_run_nor_written_through() {
    let sb = Sandbox::new();
    // Where gpuprobe keeps the probe without HOME: learnt from a clean run, as an attacker would
    // learn it from the source.
    let clean = sb.path("tmp-clean");
    let first = detect_with_hipcc(&sb, &clean);
    assert!(first.status.success(), "{}", stderr(&first));
    let built = find_named(&clean, "gpuprobe-probe").expect("a probe was built");
    let rel = built.strip_prefix(&clean).unwrap().to_path_buf();

    // Another user got there first: the same names, a probe of theirs, a link to our file.
    let shared = sb.path("tmp-shared");
    let planted = shared.join(&rel);
    let dir = planted.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    sb.script(
        &planted
            .strip_prefix(sb.dir.path())
            .unwrap()
            .to_string_lossy(),
        &format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            sb.marker().display(),
            manifest()
                .join("tests/fake-probes/pass-gfx1201.sh")
                .display()
        ),
    );
    let victim = sb.write("victim.txt", "precious\n");
    for name in ["compat.h", "gpuprobe-probe.cpp", "gpuprobe-probe.sha256"] {
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    }
    for p in rel.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        let p = shared.join(p);
        if p.is_dir() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        chown_to_nobody(&p);
    }
    for name in ["compat.h", "gpuprobe-probe.cpp", "gpuprobe-probe.sha256"] {
        chown_to_nobody(&dir.join(name));
    }

    let out = detect_with_hipcc(&sb, &shared);
    assert!(
        !sb.marker().exists(),
        "the planted probe ran: {}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["devices"][0]["smoke"]["outcome"], "pass",
        "the probe gpuprobe built ran instead: {report:#}"
    );
    assert!(
        stderr(&out).contains("not caching the HIP probe program"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_cached_probe_that_changed_since_it_was_built_is_rebuilt_not_run() {
    let sb = Sandbox::new();
    let cache = sb.path("tmp");
    let first = detect_with_hipcc(&sb, &cache);
    assert!(first.status.success(), "{}", stderr(&first));
    let exe = find_named(&cache, "gpuprobe-probe").unwrap();
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            sb.marker().display(),
            manifest()
                .join("tests/fake-probes/pass-gfx1201.sh")
                .display()
        ),
    )
    .unwrap();
    let again = detect_with_hipcc(&sb, &cache);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!sb.marker().exists(), "a changed cached probe ran");
    assert!(
        stderr(&again).contains("building the HIP probe"),
        "{}",
        stderr(&again)
    );
    // And a probe left as built is reused.
    let third = detect_with_hipcc(&sb, &cache);
    assert!(
        !stderr(&third).contains("building the HIP probe"),
        "{}",
        stderr(&third)
    );
}

#[test]
fn a_quirk_effect_never_sets_cmake_launchers_compilers_or_toolchain_files() {
    for name in [
        "CMAKE_CXX_COMPILER_LAUNCHER",
        "CMAKE_CUDA_COMPILER",
        "CMAKE_TOOLCHAIN_FILE",
    ] {
        let sb = Sandbox::new();
        let tree = sb.llama_tree("llama.cpp");
        sb.write(
            "quirks/evil.toml",
            &format!(
                "[[quirk]]\nid = \"EVIL\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n[quirk.effect.set]\n{name} = \"/tmp/evil.sh\"\n"
            ),
        );
        let out = gp()
            .args(["cmake-flags", "--targets", "sm_90", "--cuda", "12.8"])
            .args(["--toolchain", "none", "--llama-cpp"])
            .arg(&tree)
            .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
            .output()
            .unwrap();
        assert!(
            !stdout(&out).contains(name),
            "{name} reached the build script:\n{}",
            stdout(&out)
        );
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("effect.set.{name}"))
                && stderr(&out).contains("evil.toml"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_quirk_effect_sets_only_options_of_the_chosen_build() {
    // A name the checkout never declares is dropped with a note, never emitted.
    let sb = Sandbox::new();
    let tree = sb.llama_tree("llama.cpp");
    sb.write(
        "quirks/odd.toml",
        "[[quirk]]\nid = \"ODD\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n[quirk.effect.set]\nGGML_CUDA_LAUNCHER = \"ON\"\nGPU_TARGETS = \"gfx000\"\n",
    );
    let out = gp()
        .args(["cmake-flags", "--targets", "sm_90", "--cuda", "12.8"])
        .args(["--toolchain", "none", "--llama-cpp"])
        .arg(&tree)
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // Named in a note (a comment), never set.
    assert!(
        !stdout(&out).contains("-DGGML_CUDA_LAUNCHER"),
        "{}",
        stdout(&out)
    );
    assert!(
        !stdout(&out).contains("-DGPU_TARGETS=gfx000"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("does not declare it"),
        "{}",
        stdout(&out)
    );
}

#[path = "common/actions_runner.rs"]
mod actions_runner;

/// Text that the runner would act on in every way the issue names, over several lines.
const WORKFLOW_COMMANDS: &str = "::set-output name=pwned::1\n  ::add-mask::secret\n::stop-commands::tok\n::error file=x::boom\nlog ##[set-output name=pwned]1 and ##[add-mask]x\n\u{3000}::warning::w\r::notice::n";

fn assert_no_workflow_commands(what: &str, text: &str) {
    let found = actions_runner::commands(text);
    assert!(
        found.is_empty(),
        "{what}: the runner would act on {found:?}"
    );
}

#[test]
fn quirk_text_never_carries_workflow_commands_into_a_ci_log() {
    let sb = Sandbox::new();
    // Quirk text may span lines, but holds no carriage return (the loader refuses one).
    let text = toml::Value::String(WORKFLOW_COMMANDS.replace('\r', "\n")).to_string();
    sb.write(
        "quirks/ci.toml",
        &format!(
            "[[quirk]]\nid = \"CI\"\ntitle = \"t ##[add-mask]x\"\nsummary = {text}\nseverity = \"low\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\nllama_builds = \"1:\"\n[quirk.fixed_in]\nllama_build = 2\nsources = [\"https://example.org/fix\"]\nnote = {text}\n[quirk.effect]\nwarn = \"w ##[add-mask]x ::set-output name=a::b\"\n"
        ),
    );
    let out = gp()
        .args(["quirks", "show", "CI"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("set-output name=pwned"),
        "{}",
        stdout(&out)
    );
    assert_no_workflow_commands("quirks show", &stdout(&out));
    assert_no_workflow_commands("quirks show (stderr)", &stderr(&out));
    // The JSON form keeps the text exactly, and is just as inert.
    let out = gp()
        .args(["quirks", "list", "--json"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    if out.status.success() {
        assert_no_workflow_commands("quirks --json", &stdout(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let all = v.to_string();
        assert!(all.contains("##[add-mask]x"), "the value was changed");
    }
}

#[test]
fn log_lines_quoted_by_check_build_carry_no_workflow_commands() {
    let sb = Sandbox::new();
    let log = sb.write(
        "llama.log",
        &format!(
            "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA H200 ##[add-mask]x, compute capability 9.0, VMM: yes\n{WORKFLOW_COMMANDS}\nCUDA error: out of memory\n::set-output name=x::y\n"
        ),
    );
    for json in [false, true] {
        let mut c = gp();
        c.args(["check-build", "--no-probe", "--log"]).arg(&log);
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert_no_workflow_commands("check-build", &stdout(&out));
        assert_no_workflow_commands("check-build (stderr)", &stderr(&out));
    }
}

#[test]
fn report_values_carry_no_workflow_commands_into_any_output() {
    let sb = Sandbox::new();
    let probe =
        sb.probe(&["s/Radeon AI PRO R9700/##[add-mask]R9700 ::set-output name=x::y/".into()]);
    for args in [
        &["detect"][..],
        &["detect", "--json"],
        &["cmake-flags", "--explain"],
        &["cmake-flags", "--format", "json"],
    ] {
        let out = sb.probing(&probe).args(args).output().unwrap();
        assert_no_workflow_commands(&format!("{args:?}"), &stdout(&out));
        assert_no_workflow_commands(&format!("{args:?} (stderr)"), &stderr(&out));
    }
}

// ---- round 2: file kinds, budgets, linear time, shared directories ---------------------------

fn quick(c: &mut assert_cmd::Command) -> (std::process::Output, Duration) {
    let t = Instant::now();
    let out = c.timeout(Duration::from_secs(40)).output().unwrap();
    (out, t.elapsed())
}

#[test]
fn fifos_and_devices_named_by_the_environment_are_refused_without_waiting() {
    let sb = Sandbox::new();
    let fifo = sb.mkfifo("fifo");
    // GPUPROBE_REPLAY: a dump to read.
    for target in [fifo.as_path(), Path::new("/dev/zero"), sb.dir.path()] {
        let (out, took) = quick(
            gp().args(["detect", "--json"])
                .env("GPUPROBE_REPLAY", target),
        );
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("GPUPROBE_REPLAY"), "{}", stderr(&out));
        assert!(took < Duration::from_secs(20), "{target:?} took {took:?}");
    }
    // GITHUB_OUTPUT and GITHUB_STEP_SUMMARY: files to append to.
    let base = [
        "cmake-flags",
        "--targets",
        "sm_90",
        "--cuda",
        "12.8",
        "--toolchain",
        "none",
        "--format",
        "github",
    ];
    let good = sb.write("out.txt", "");
    for (var, other) in [
        ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"),
        ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"),
    ] {
        for target in [fifo.as_path(), Path::new("/dev/null"), sb.dir.path()] {
            let (out, took) = quick(gp().args(base).env(var, target).env(other, &good));
            assert_eq!(
                out.status.code(),
                Some(2),
                "{var}={target:?}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).contains(var), "{var}: {}", stderr(&out));
            assert!(
                took < Duration::from_secs(20),
                "{var}={target:?} took {took:?}"
            );
        }
    }
}

#[test]
fn a_library_beside_the_binary_that_is_a_fifo_or_links_to_dev_zero_is_not_read() {
    let sb = Sandbox::new();
    let dir = sb.path("build/bin");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("llama-cli");
    std::fs::copy("/bin/true", &bin).unwrap();
    sb.mkfifo("build/bin/libggml-cuda.so");
    std::os::unix::fs::symlink("/dev/zero", dir.join("libggml-hip.so")).unwrap();
    let (out, took) = quick(
        gp().args(["check-build", "--no-probe", "--binary"])
            .arg(&bin),
    );
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    assert!(
        took < Duration::from_secs(20),
        "took {took:?}: {}",
        stderr(&out)
    );
}

#[test]
fn all_inputs_of_one_run_share_one_byte_budget() {
    let sb = Sandbox::new();
    // Each log is well under the per-file limit; together they are over the run's budget.
    let line = "  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes\n";
    let log = sb.write("big.log", &line.repeat((16 << 20) / line.len()));
    let mut c = gp();
    c.args(["check-build", "--no-probe"]);
    for _ in 0..6 {
        c.arg("--log").arg(&log);
    }
    let (out, _) = quick(&mut c);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("in all"), "{}", stderr(&out));
}

#[test]
fn a_quirk_file_over_its_limit_is_refused_before_parsing() {
    let sb = Sandbox::new();
    let record = "[[quirk]]\nid = \"X\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"low\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n";
    sb.write("quirks/big.toml", &record.repeat((6 << 20) / record.len()));
    let (out, took) = quick(
        gp().args(["quirks", "list"])
            .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks")),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("big.toml") && stderr(&out).contains("larger than 4 MiB"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn stdin_over_the_limit_is_refused_like_a_file() {
    let mut child = std::process::Command::new(bin())
        .args(["check-build", "--no-probe", "--log", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = "llama_model_load: noise\n".repeat(1 << 16);
        for _ in 0..((65 << 20) / chunk.len() + 1) {
            if stdin.write_all(chunk.as_bytes()).is_err() {
                break;
            }
        }
        let _ = stdin.write_all(b"CUDA error: out of memory\n");
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--log -"), "{}", stderr(&out));
}

/// Checks that the CPU time of gpuprobe with `args` on a file of `line`s grows linearly from `n`
/// to 4·`n` lines (see `common/linear.rs`).
fn assert_linear(what: &str, args: &[&str], n: usize, line: impl Fn(usize) -> String) {
    let sb = Sandbox::new();
    linear::assert_linear(what, n, |size| {
        let p = sb.write("input.txt", &(0..size).map(&line).collect::<String>());
        let mut c = common::gpuprobe_process();
        c.args(args).arg(&p);
        linear::cpu_seconds(c, what)
    });
}

#[test]
fn device_lines_are_parsed_in_linear_time() {
    assert_linear(
        "device lines",
        &["check-build", "--no-probe", "--log"],
        2_500,
        |i| format!("  Device {i}: NVIDIA H200, compute capability 9.0, VMM: yes\n"),
    );
}

#[test]
fn buffer_lines_and_system_info_features_are_parsed_in_linear_time() {
    assert_linear(
        "buffer lines",
        &["check-build", "--no-probe", "--log"],
        2_500,
        |i| format!("load_tensors:        CUDA{i} model buffer size =  1024.00 MiB\n"),
    );
    assert_linear(
        "system_info features",
        &["check-build", "--no-probe", "--log"],
        1_500,
        |i| format!("system_info: n_threads = 8 | CUDA : ARCHS = 900 | F{i} = 1 | G{i} = 1 |\n"),
    );
}

#[test]
fn workflow_check_is_linear_in_the_file_it_compares() {
    // Against an unrelated file the difference is one hunk (a minimal diff would be quadratic:
    // 16×); printing megabytes of it costs a little more per line as it grows, hence 12.
    let sb = Sandbox::new();
    linear::assert_linear_within("workflow --check", 40_000, 12.0, |n| {
        let text: String = (0..n)
            .map(|i| format!("line {i}: something else entirely\n"))
            .collect();
        let p = sb.write("input.txt", &text);
        let mut c = common::gpuprobe_process();
        c.args([
            "workflow",
            "--targets",
            "gfx1201",
            "--rocm",
            "7.2.1",
            "--check",
        ])
        .arg(&p);
        linear::cpu_seconds(c, "workflow --check")
    });
}

#[test]
fn writes_never_follow_another_users_link_in_a_sticky_directory() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: making a link of another user's needs root");
        return;
    }
    let sb = Sandbox::new();
    let sticky = sb.path("shared");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = sb.write("victim.yml", "precious\n");
    let link = sticky.join("gpuprobe.yml");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    chown_to_nobody(&link);
    let out = gp()
        .args([
            "workflow",
            "--targets",
            "gfx1201",
            "--rocm",
            "7.2.1",
            "--output",
        ])
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

    // quirks record's lock beside its file.
    let file = sticky.join("local.toml");
    let lock_victim = sb.write("lock-victim", "precious\n");
    std::os::unix::fs::symlink(&lock_victim, sticky.join("local.toml.lock")).unwrap();
    chown_to_nobody(&sticky.join("local.toml.lock"));
    let report = sb.write("failed.json", &failed_report("gfx1201"));
    let out = gp()
        .args(["quirks", "record", "--from"])
        .arg(&report)
        .arg("--file")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let meta = std::fs::metadata(&lock_victim).unwrap();
    assert_eq!(std::fs::read_to_string(&lock_victim).unwrap(), "precious\n");
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
}

// ---- round 2: medium and low -----------------------------------------------------------------

#[test]
fn a_symlink_loop_in_the_quirk_directory_is_exit_2() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("quirks")).unwrap();
    std::os::unix::fs::symlink("loop.toml", sb.path("quirks/loop.toml")).unwrap();
    let out = gp()
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("quirks"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("loop.toml"), "{}", stderr(&out));
    std::os::unix::fs::symlink("self", sb.path("self")).unwrap();
    let out = gp()
        .args(["quirks", "list"])
        .env("GPUPROBE_QUIRKS_DIR", sb.path("self"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_target_feature_suffix_is_validated_not_dropped() {
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "gfx90a:$(id)",
            "--rocm",
            "6.4.1",
            "--toolchain",
            "none",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("feature suffix") && stderr(&out).contains("xnack-"),
        "{}",
        stderr(&out)
    );
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "gfx90a:xnack-",
            "--rocm",
            "6.4.1",
            "--toolchain",
            "none",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_report_with_a_byte_order_mark_is_read() {
    let sb = Sandbox::new();
    let p = sb.write("bom.json", &format!("\u{feff}{REPORT}"));
    let out = gp()
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_closed_stderr_is_an_exit_code_not_a_panic() {
    let sb = Sandbox::new();
    // A failing run (exit 2) writes its error to stderr, which here is a full device.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(bin())
        .args(["cmake-flags", "--toolchain", "none", "--from"])
        .arg(sb.path("missing.json"))
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(bin())
        .args(["detect", "--bogus-flag\u{1b}]52;c;cHduZWQ=\u{7}"])
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn clap_never_echoes_a_bad_value_raw() {
    let out = gp()
        .args([
            "cmake-flags",
            "--format",
            "x\u{1b}]52;c;cHduZWQ=\u{7}\n::set-output name=a::b",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert_no_workflow_commands("clap error", &err);
    assert!(err.contains("set-output name=a::b"), "{err}");
}

#[test]
fn printed_paths_carry_no_escape_sequences() {
    let sb = Sandbox::new();
    let dir = sb.path("a\u{1b}]52;c;cHduZWQ=\u{7}\u{200b}b");
    let out = gp()
        .args([
            "workflow",
            "--targets",
            "gfx1201",
            "--rocm",
            "7.2.1",
            "--output",
        ])
        .arg(dir.join("wf.yml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{200b}'),
        "{err:?}"
    );
    assert!(err.contains("\\x1b]52"), "{err}");
}

#[test]
fn json_outputs_stay_valid_json_with_hostile_characters() {
    let sb = Sandbox::new();
    let probe = sb.probe(&[
        "s/Radeon AI PRO R9700/R\\x7f\\xc2\\x9b\\xe2\\x80\\xa8\\xe2\\x80\\xae\\xe2\\x80\\x8bX/"
            .into(),
    ]);
    for args in [
        &["detect", "--json"][..],
        &["cmake-flags", "--rocm", "7.2.1", "--format", "json"],
    ] {
        let out = sb.probing(&probe).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        let _: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}\n{text}"));
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && gpuprobe::neutral::is_hostile(c)),
            "{text}"
        );
    }
}

// ---- second campaign: other environment variables, other file kinds ---------------------------

/// A quirk that denies VMM on sm_90: what a planted file would say.
const PLANTED_QUIRK: &str = "[[quirk]]\nid = \"PLANTED\"\ntitle = \"planted\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\narchs = [\"sm_90\"]\n[quirk.effect]\nvmm = \"deny\"\n";

#[test]
fn a_relative_xdg_config_home_reads_no_quirks_from_the_working_directory() {
    // In CI the working directory is a pull request's checkout: a relative XDG_CONFIG_HOME (the
    // XDG specification says to ignore one) must not make its files quirks.
    let sb = Sandbox::new();
    sb.write("gpuprobe/quirks/planted.toml", PLANTED_QUIRK);
    let report = sb.report(|_| {});
    for xdg in [".", "", "gpuprobe/.."] {
        let out = gp()
            .current_dir(sb.dir.path())
            .env("XDG_CONFIG_HOME", xdg)
            .env("HOME", "relative-home")
            .args(["cmake-flags", "--explain", "--from"])
            .arg(&report)
            .output()
            .unwrap();
        assert!(out.status.success(), "{xdg:?}: {}", stderr(&out));
        assert!(
            !stdout(&out).contains("PLANTED") && !stderr(&out).contains("PLANTED"),
            "XDG_CONFIG_HOME={xdg:?}: a quirk file of the working directory was read:\n{}",
            stdout(&out)
        );
    }
}

#[test]
fn a_quirk_file_another_user_could_have_written_is_refused() {
    let report = |sb: &Sandbox| sb.report(|_| {});
    let run = |sb: &Sandbox, dir: &Path| {
        gp().env("GPUPROBE_QUIRKS_DIR", dir)
            .args(["cmake-flags", "--from"])
            .arg(report(sb))
            .output()
            .unwrap()
    };
    // Writable by every user.
    let sb = Sandbox::new();
    let file = sb.write("quirks/planted.toml", PLANTED_QUIRK);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = run(&sb, &sb.path("quirks"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("planted.toml")
            && stderr(&out).contains("writable by every user")
            && stderr(&out).contains("chmod o-w"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    // In a directory every user can write (no sticky bit): anyone could have put it there.
    let sb = Sandbox::new();
    sb.write("quirks/planted.toml", PLANTED_QUIRK);
    std::fs::set_permissions(sb.path("quirks"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(&sb, &sb.path("quirks"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its directory") && stderr(&out).contains("writable by every user"),
        "{}",
        stderr(&out)
    );
    // The fix line, pasted, makes it readable again.
    let fix = stderr(&out)
        .lines()
        .find_map(|l| l.trim().strip_prefix("fix: "))
        .and_then(|f| f.split('`').nth(1))
        .expect("a command in the fix line")
        .to_string();
    let pasted = std::process::Command::new("sh")
        .arg("-c")
        .arg(&fix)
        .status()
        .unwrap();
    assert!(pasted.success(), "{fix}");
    let out = run(&sb, &sb.path("quirks"));
    assert!(out.status.success(), "after `{fix}`: {}", stderr(&out));
    // In a shared sticky directory (/tmp), a file of another user.
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let sb = Sandbox::new();
        let file = sb.write("shared/planted.toml", PLANTED_QUIRK);
        std::fs::set_permissions(sb.path("shared"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        chown_to_nobody(&file);
        let out = run(&sb, &sb.path("shared"));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("another user") && stderr(&out).contains("planted.toml"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_socket_is_named_as_one_and_refused_with_exit_2() {
    let sb = Sandbox::new();
    let sock = sb.path("report.json");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for args in [
        vec!["cmake-flags", "--from"],
        vec!["check-build", "--no-probe", "--log"],
        vec!["quirks", "record", "--file", "q.toml", "--from"],
    ] {
        let (out, took) = quick(gp().current_dir(sb.dir.path()).args(&args).arg(&sock));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is a socket, not a regular file"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(took < Duration::from_secs(20), "{args:?} took {took:?}");
    }
}

#[test]
fn a_from_directory_names_a_document_that_is_not_a_regular_file() {
    // Every `*.json` of a `--from` directory is a document: one that is a FIFO or a link to a
    // device is refused by name, never skipped without a word (nor waited on).
    for kind in ["fifo", "device"] {
        let sb = Sandbox::new();
        let dir = sb.path("fleet");
        sb.write("fleet/a.json", REPORT);
        match kind {
            "fifo" => {
                sb.mkfifo("fleet/b.json");
            }
            _ => std::os::unix::fs::symlink("/dev/zero", dir.join("b.json")).unwrap(),
        }
        let (out, took) = quick(gp().args(["cmake-flags", "--from"]).arg(&dir));
        assert_eq!(out.status.code(), Some(2), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("b.json") && stderr(&out).contains("not a regular file"),
            "{kind}: {}",
            stderr(&out)
        );
        assert!(took < Duration::from_secs(20), "{kind} took {took:?}");
    }
}
