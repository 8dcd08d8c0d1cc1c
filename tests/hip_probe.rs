//! The HIP backend end to end, driving the real `gpuprobe` binary:
//!
//! * discovery without a toolchain, from the fake sysfs trees in `tests/fixtures/sysfs/`
//!   (constructed from public reports; see the README there);
//! * every fake probe program in `tests/fake-probes/` (hang, abort, zero reads, crash at init,
//!   garbage, partial, pass) and the verdict gpuprobe records for it;
//! * the decisions `cmake-flags` takes from those verdicts (VMM, Q7, Q8, Q11, Q14, Q3/Q4/Q21);
//! * environment hygiene warnings;
//! * the real hipcc path: the probe program built with this machine's hipcc (Debian's on CI),
//!   cached, and run against a runtime that sees no GPU.
//!
//! No AMD GPU is involved anywhere: the fakes simulate, they do not measure.

// This harness signals and inspects processes through libc.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_gpuprobe");
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

// ------------------------------------------------------------------------------------------
// Helpers

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tree(machine: &str) -> PathBuf {
    let p = manifest_dir().join("tests/fixtures/sysfs").join(machine);
    assert!(
        p.join("sys/class/kfd/kfd/topology/nodes/0/properties")
            .is_file(),
        "missing fixture {}",
        p.display()
    );
    p
}

fn fake(name: &str) -> PathBuf {
    let p = manifest_dir()
        .join("tests/fake-probes")
        .join(format!("{name}.sh"));
    assert!(p.is_file(), "missing fake probe {}", p.display());
    p
}

/// A scratch HOME, an empty `bin` (no hipcc, no hipconfig, no nvcc) and an empty ROCm prefix.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuprobe-hip-test")
            .tempdir()
            .unwrap();
        for d in ["home", "empty-bin", "empty-rocm"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        Sandbox { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// gpuprobe with a clean environment: nothing from the developer's shell (no user quirk
    /// files, no visible-devices variables) leaks in.
    fn gpuprobe(&self, machine: &str) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("HOME", self.path("home"))
            .env("LANG", "C")
            .env("NO_COLOR", "1")
            .env("GPUPROBE_SYSFS_ROOT", tree(machine))
            .timeout(Duration::from_secs(120));
        c
    }

    /// No HIP toolchain anywhere gpuprobe looks ($ROCM_PATH, $HIP_PATH, PATH; /opt/rocm must not exist).
    fn without_toolchain(&self, machine: &str) -> Command {
        let mut c = self.gpuprobe(machine);
        c.env("PATH", self.path("empty-bin"))
            .env("ROCM_PATH", self.path("empty-rocm"))
            .env("HIP_PATH", self.path("empty-rocm"));
        c
    }

    /// The fake probe program `name` instead of a hipcc-built one, simulating `devices` GPUs.
    fn with_fake(&self, machine: &str, name: &str, devices: u32) -> Command {
        self.with_probe(machine, &fake(name), devices)
    }

    fn with_probe(&self, machine: &str, probe: &Path, devices: u32) -> Command {
        let mut c = self.gpuprobe(machine);
        // The fakes are sh scripts that need dirname and sleep.
        c.env("PATH", "/usr/bin:/bin")
            .env("GPUPROBE_HIP_PROBE", probe)
            .env("FAKE_PROBE_DEVICES", devices.to_string());
        c
    }

    /// A wrapper around a fake that rewrites its output with sed expressions.
    fn rewritten_fake(&self, name: &str, sed: &[&str]) -> PathBuf {
        let path = self.path(&format!("{name}-rewritten.sh"));
        let exprs: Vec<String> = sed.iter().map(|e| format!("-e '{e}'")).collect();
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n\"{}\" \"$@\" | sed {}\n",
                fake(name).display(),
                exprs.join(" ")
            ),
        )
        .unwrap();
        set_executable(&path);
        path
    }

    /// A minimal llama.cpp source tree declaring the options these tests need, so that flag
    /// emission does not depend on the bundled option table's coverage.
    fn llama_checkout(&self) -> PathBuf {
        let root = self.path("llama.cpp");
        std::fs::create_dir_all(root.join("ggml/src/ggml-hip")).unwrap();
        std::fs::write(root.join("CMakeLists.txt"), "cmake_minimum_required(VERSION 3.14)\nproject(\"llama.cpp\" C CXX)\nadd_subdirectory(ggml)\n").unwrap();
        std::fs::write(
            root.join("ggml/CMakeLists.txt"),
            "option(GGML_NATIVE \"ggml: optimize the build for the current system\" ON)\n\
             option(GGML_HIP \"ggml: use HIP\" OFF)\n\
             option(GGML_CUDA_NO_PEER_COPY \"ggml: do not use peer to peer copies\" OFF)\n\
             option(GGML_CUDA_NO_VMM \"ggml: do not try to use CUDA VMM\" OFF)\n\
             option(GGML_HIP_GRAPHS \"ggml: use HIP graph, experimental, slow\" ON)\n\
             option(GGML_HIP_NO_VMM \"ggml: do not try to use HIP VMM\" ON)\n",
        )
        .unwrap();
        std::fs::write(
            root.join("ggml/src/ggml-hip/CMakeLists.txt"),
            "if (DEFINED AMDGPU_TARGETS)\n    set(GPU_TARGETS ${AMDGPU_TARGETS})\nendif()\n",
        )
        .unwrap();
        root
    }
}

fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(p).unwrap().permissions();
    perm.set_mode(0o755);
    std::fs::set_permissions(p, perm).unwrap();
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Run {
    fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

fn detect_json(cmd: &mut Command, extra: &[&str]) -> Value {
    // The plan's minimum cycle count: fewer give `partial`, which lifts no deny.
    cmd.args(["detect", "--backend", "hip", "--json", "--cycles", "200"])
        .args(extra);
    run(cmd).ok().json()
}

/// `cmake-flags --format json`; the toolchain on this machine (Debian's hipconfig) must not
/// stand in for the measured runtime, so `--toolchain none` unless the test says otherwise.
fn plan_json(cmd: &mut Command, extra: &[&str]) -> (i32, Value) {
    cmd.args([
        "cmake-flags",
        "--backend",
        "hip",
        "--format",
        "json",
        "--cycles",
        "200",
    ])
    .args(extra);
    if !extra.iter().any(|a| *a == "--toolchain" || *a == "--rocm") {
        cmd.args(["--toolchain", "none"]);
    }
    let r = run(cmd);
    let v = r.json();
    (r.code, v)
}

fn hip_backend(report: &Value) -> &Value {
    let b: Vec<&Value> = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["backend"] == "hip")
        .collect();
    assert_eq!(b.len(), 1, "one hip backend entry: {report:#}");
    b[0]
}

fn devices(report: &Value) -> &Vec<Value> {
    report["devices"].as_array().unwrap()
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` is not a string in {v:#}"))
}

/// The only group's flag `name`.
fn flag<'a>(plan: &'a Value, name: &str) -> Option<&'a Value> {
    let groups = plan["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "expected one build group: {plan:#}");
    groups[0]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
}

fn quirks_of(v: &Value) -> BTreeSet<String> {
    v["quirks"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|q| q.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The records the plan tells the user about: warnings, and notes that are not "may apply"
/// (the severity policy made a record's words a note where no action is needed).
fn warning_ids(plan: &Value) -> BTreeSet<String> {
    let notes = plan["notes"].as_array().cloned().unwrap_or_default();
    plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .chain(notes.iter().filter(|n| {
            !n["message"]
                .as_str()
                .unwrap_or_default()
                .contains(" may apply: ")
        }))
        .flat_map(quirks_of)
        .collect()
}

fn trace_has(plan: &Value, needle: &str) -> bool {
    plan["trace"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t.as_str().unwrap().contains(needle))
}

/// value(w, c) of the smoke pattern (probes/PROTOCOL.md).
fn pattern(w: u32, c: u32) -> u32 {
    w.wrapping_mul(2654435761) ^ c.wrapping_mul(2246822519) ^ 0xA5A5_A5A5
}

// ------------------------------------------------------------------------------------------
// Discovery without a toolchain

struct Expect {
    arch: &'static str,
    name: &'static str,
    vram: u64,
    used: u64,
    integrated: bool,
    pci: &'static str,
    wave: u64,
}

fn expected(machine: &str) -> Vec<Expect> {
    let r9700 = |pci, used| Expect {
        arch: "gfx1201",
        name: "AMD Radeon AI PRO R9700",
        vram: 32 * GIB,
        used,
        integrated: false,
        pci,
        wave: 32,
    };
    let pro7 = |pci| Expect {
        arch: "gfx906",
        name: "Radeon Pro VII",
        vram: 16 * GIB,
        used: 12 * MIB,
        integrated: false,
        pci,
        wave: 64,
    };
    match machine {
        "2x-r9700-gfx1201" => vec![
            r9700("0000:03:00.0", 26 * MIB),
            r9700("0000:08:00.0", 18 * MIB),
        ],
        "2x-radeon-pro-vii-gfx906" => vec![pro7("0000:04:00.0"), pro7("0000:0c:00.0")],
        "rx-vega56-gfx900" => {
            vec![Expect {
                arch: "gfx900",
                name: "AMD gfx900",
                vram: 8 * GIB,
                used: 15 * MIB,
                integrated: false,
                pci: "0000:09:00.0",
                wave: 64,
            }]
        }
        "strix-halo-gfx1151" => {
            vec![Expect {
                arch: "gfx1151",
                name: "AMD gfx1151",
                vram: 512 * MIB,
                used: 97 * MIB,
                integrated: true,
                pci: "0000:c5:00.0",
                wave: 32,
            }]
        }
        "rx9070xt-raphael-gfx1201-gfx1036" => vec![
            Expect {
                arch: "gfx1201",
                name: "AMD gfx1201",
                vram: 16 * GIB,
                used: 341 * MIB,
                integrated: false,
                pci: "0000:03:00.0",
                wave: 32,
            },
            Expect {
                arch: "gfx1036",
                name: "AMD gfx1036",
                vram: 512 * MIB,
                used: 38 * MIB,
                integrated: true,
                pci: "0000:13:00.0",
                wave: 32,
            },
        ],
        other => panic!("no expectations for {other}"),
    }
}

const MACHINES: &[&str] = &[
    "2x-r9700-gfx1201",
    "2x-radeon-pro-vii-gfx906",
    "rx-vega56-gfx900",
    "strix-halo-gfx1151",
    "rx9070xt-raphael-gfx1201-gfx1036",
];

fn toolchain_can_be_hidden() -> bool {
    // find_rocm_tool also looks in /opt/rocm/bin; on a machine with ROCm installed there the
    // no-toolchain tests cannot hide hipcc.
    if Path::new("/opt/rocm/bin/hipcc").exists() {
        eprintln!(
            "skipping: /opt/rocm/bin/hipcc exists, so `no toolchain` cannot be simulated here"
        );
        return false;
    }
    true
}

#[test]
fn discovery_json_reports_sysfs_facts_and_says_the_smoke_test_needs_the_hip_sdk() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    for machine in MACHINES {
        let report = detect_json(&mut sb.without_toolchain(machine), &[]);
        let b = hip_backend(&report);
        assert_eq!(b["status"], "no-toolchain", "{machine}: {b:#}");
        assert!(
            s(b, "detail").contains("no hipcc found"),
            "{machine}: {b:#}"
        );
        assert!(
            s(b, "hint").contains("install the HIP SDK"),
            "{machine}: {b:#}"
        );
        assert!(b["runtime_version"].is_null());

        let want = expected(machine);
        let got = devices(&report);
        assert_eq!(got.len(), want.len(), "{machine}: {report:#}");
        for (i, (d, w)) in got.iter().zip(&want).enumerate() {
            let ctx = format!("{machine} device {i}: {d:#}");
            assert_eq!(d["index"], i as u64, "{ctx}");
            assert_eq!(d["backend"], "hip", "{ctx}");
            assert_eq!(d["vendor"], "amd", "{ctx}");
            assert_eq!(d["arch"], w.arch, "{ctx}");
            assert_eq!(d["name"], w.name, "{ctx}");
            assert_eq!(d["vram_total_bytes"], w.vram, "{ctx}");
            assert_eq!(d["vram_free_bytes"], w.vram - w.used, "{ctx}");
            assert_eq!(d["integrated"], w.integrated, "{ctx}");
            assert_eq!(d["pci_bus_id"], w.pci, "{ctx}");
            assert_eq!(d["wave_size"], w.wave, "{ctx}");
            assert_eq!(d["source"], "sysfs", "{ctx}");
            // Nothing was measured: no VMM attribute, no granularity, no versions.
            assert!(
                d["vmm_supported"].is_null()
                    && d["granularity_recommended"].is_null()
                    && d["runtime_version"].is_null(),
                "{ctx}"
            );
            let smoke = &d["smoke"];
            assert_eq!(smoke["outcome"], "not-run", "{ctx}");
            let reason = s(smoke, "reason");
            assert!(
                reason.contains("smoke test not run") && reason.contains("no hipcc found"),
                "{ctx}"
            );
            assert!(
                reason.contains("HIP SDK"),
                "the reason says what to install: {ctx}"
            );
        }
        assert_eq!(
            report["environment"],
            serde_json::json!([]),
            "{machine}: a clean environment has no notices"
        );
    }
}

#[test]
fn strix_halo_is_an_apu_by_the_target_table_not_by_its_kfd_node() {
    if !toolchain_can_be_hidden() {
        return;
    }
    // The fixture is what a current kernel shows: the iGPU node has no CPU cores of its own.
    let props = std::fs::read_to_string(
        tree("strix-halo-gfx1151").join("sys/class/kfd/kfd/topology/nodes/1/properties"),
    )
    .unwrap();
    assert!(
        props.lines().any(|l| l == "cpu_cores_count 0"),
        "fixture changed: {props}"
    );
    assert!(
        props.lines().any(|l| l == "gfx_target_version 110501"),
        "fixture changed: {props}"
    );
    let sb = Sandbox::new();
    let report = detect_json(&mut sb.without_toolchain("strix-halo-gfx1151"), &[]);
    assert_eq!(devices(&report)[0]["integrated"], true, "{report:#}");
}

#[test]
fn discovery_table_says_what_was_found_and_what_to_install() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    let r = run(sb
        .without_toolchain("rx9070xt-raphael-gfx1201-gfx1036")
        .args(["detect", "--backend", "hip"]))
    .ok();
    let t = &r.stdout;
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("0 ") || l.starts_with("1 "))
        .collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(
        rows[0].contains("gfx1201")
            && rows[0].contains("16.0 GiB")
            && rows[0].trim_end().ends_with("not-run"),
        "{t}"
    );
    assert!(
        rows[1].contains("gfx1036")
            && rows[1].contains("0.5 GiB")
            && rows[1].trim_end().ends_with("not-run"),
        "{t}"
    );
    assert!(
        t.contains("pci 0000:03:00.0, discrete, wave 32, from sysfs"),
        "{t}"
    );
    assert!(
        t.contains("pci 0000:13:00.0, integrated (APU), wave 32, from sysfs"),
        "{t}"
    );
    assert!(
        t.contains("smoke: smoke test not run: no hipcc found"),
        "{t}"
    );
    assert!(t.contains("HIP  no-toolchain"), "{t}");
    // The backend lines come after the device rows.
    assert!(t.contains("the devices listed come from sysfs"), "{t}");
    assert!(
        t.contains("install the HIP SDK to measure VMM and run the smoke test"),
        "{t}"
    );
}

// ------------------------------------------------------------------------------------------
// Fake probe programs: one verdict per failure signature

const TWO_GPUS: &str = "2x-r9700-gfx1201";

fn smokes(report: &Value) -> Vec<&Value> {
    devices(report).iter().map(|d| &d["smoke"]).collect()
}

#[test]
fn fake_pass_reports_both_devices_measured_and_passing() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "pass-gfx1201", 2),
        &["--timeout", "20"],
    );
    let b = hip_backend(&report);
    assert_eq!(b["status"], "ok");
    assert_eq!(b["runtime_version"], "7.2.26015");
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    for (i, d) in ds.iter().enumerate() {
        assert_eq!(d["index"], i as u64);
        assert_eq!(d["source"], "probe-program");
        assert_eq!(d["arch"], "gfx1201");
        assert_eq!(d["integrated"], false);
        assert_eq!(d["vmm_supported"], true);
        assert_eq!(d["granularity_min"], 4096);
        assert_eq!(d["granularity_recommended"], 2 * MIB);
        assert_eq!(d["runtime_version"], "7.2.26015");
        let sm = &d["smoke"];
        assert_eq!(sm["outcome"], "pass", "{d:#}");
        assert_eq!(sm["cycles"], 200, "--cycles reaches the probe: {d:#}");
        assert_eq!(sm["cycles_done"], 200);
        assert_eq!(sm["chunks_per_cycle"], 9);
        assert_eq!(sm["chunk_bytes"], 2 * MIB);
        assert_eq!(sm["reserve_bytes"], 32 * GIB);
        assert_eq!(sm["mismatches"], 0);
        assert_eq!(
            sm["stderr_tail"],
            serde_json::json!([]),
            "a pass keeps no stderr noise"
        );
    }
    assert_eq!(ds[0]["pci_bus_id"], "0000:03:00.0");
    assert_eq!(ds[1]["pci_bus_id"], "0000:04:00.0");
    let peers = report["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "one pair for two GPUs: {report:#}");
    assert_eq!(
        (peers[0]["from"].as_u64(), peers[0]["to"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(peers[0]["outcome"], "pass");
    assert_eq!(peers[0]["copy_ok"], true);
}

/// Processes carrying `GPUPROBE_TEST_MARKER=<marker>` in their environment: (pid, comm, pgrp, state).
fn marked_processes(marker: &str) -> Vec<(u32, String, i64, char)> {
    let needle = format!("GPUPROBE_TEST_MARKER={marker}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let state = rest.first().and_then(|s| s.chars().next()).unwrap_or('?');
        let pgrp = rest.get(2).and_then(|p| p.parse().ok()).unwrap_or(-1);
        out.push((pid, comm, pgrp, state));
    }
    out
}

/// Live (not zombie) processes in any of `groups`.
fn live_in_groups(groups: &BTreeSet<i64>) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let state = rest.first().and_then(|s| s.chars().next()).unwrap_or('?');
        let pgrp: i64 = rest.get(2).and_then(|p| p.parse().ok()).unwrap_or(-1);
        if groups.contains(&pgrp) && state != 'Z' && state != 'X' {
            out.push((pid, stat[stat.find('(').unwrap_or(0)..=close].to_string()));
        }
    }
    out
}

/// Kills (SIGKILL) the processes this test started, found by their marker.
fn kill_marked(marker: &str) {
    for (pid, ..) in marked_processes(marker) {
        // SAFETY: plain syscall on a pid that carries this test's marker.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

#[test]
fn fake_hang_after_map_is_a_hang_at_write_and_the_whole_process_group_is_killed() {
    use std::io::Read;
    let sb = Sandbox::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let marker = format!("hang-{}-{nanos}", std::process::id());
    let mut cmd = std::process::Command::new(BIN);
    cmd.env_clear()
        .env("HOME", sb.path("home"))
        .env("PATH", "/usr/bin:/bin")
        .env("GPUPROBE_SYSFS_ROOT", tree(TWO_GPUS))
        .env("GPUPROBE_HIP_PROBE", fake("hang-after-map"))
        .env("FAKE_PROBE_DEVICES", "2")
        .env("GPUPROBE_TEST_MARKER", &marker)
        .args([
            "detect",
            "--backend",
            "hip",
            "--json",
            "--cycles",
            "5",
            "--timeout",
            "2",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let gpuprobe_pid = child.id() as i64;
    // Read the pipes on threads: a leaked grandchild holding them must fail this test, not hang it.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let stderr = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });

    // While the probes hang, each child's `sleep` is visible, in a process group of its own.
    let mut sleepers: Vec<(u32, i64)> = Vec::new();
    while started.elapsed() < Duration::from_millis(1800) && sleepers.len() < 2 {
        for (pid, comm, pgrp, _) in marked_processes(&marker) {
            if comm == "sleep" && !sleepers.iter().any(|(p, _)| *p == pid) {
                sleepers.push((pid, pgrp));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();

    // Afterwards nothing of the probes' groups is left (SIGKILL is delivered at once; allow a
    // moment for the kernel to tear the processes down).
    let groups: BTreeSet<i64> = sleepers.iter().map(|(_, g)| *g).collect();
    let deadline = Instant::now() + Duration::from_secs(2);
    let leftovers = loop {
        let left = live_in_groups(&groups);
        let marked: Vec<_> = marked_processes(&marker)
            .into_iter()
            .filter(|p| p.3 != 'Z' && p.3 != 'X')
            .collect();
        if (left.is_empty() && marked.is_empty()) || Instant::now() >= deadline {
            break (left, marked);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !leftovers.0.is_empty() || !leftovers.1.is_empty() {
        kill_marked(&marker);
        panic!("leftover processes after gpuprobe finished (exit {status:?}): {leftovers:?}");
    }
    let status = status.unwrap_or_else(|| panic!("gpuprobe did not finish within 20 s"));
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert_eq!(
        status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&stderr)
    );
    assert_eq!(
        sleepers.len(),
        2,
        "each hanging fake starts a sleep (else this test could not see a leak)"
    );
    assert_eq!(
        groups.len(),
        2,
        "each device's probe runs in its own process group: {sleepers:?}"
    );
    // SAFETY: getpgrp has no preconditions.
    let own_group = unsafe { libc::getpgrp() } as i64;
    assert!(
        !groups.contains(&gpuprobe_pid) && !groups.contains(&own_group),
        "{sleepers:?}"
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "two 2 s probes run in parallel, took {elapsed:?}"
    );

    let report: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(hip_backend(&report)["status"], "ok");
    let sm = smokes(&report);
    assert_eq!(sm.len(), 2, "{report:#}");
    for s in sm {
        assert_eq!(s["outcome"], "hang", "{s:#}");
        assert_eq!(
            s["stage"], "write",
            "the last stage announced before the hang: {s:#}"
        );
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.contains("no result within 2 s at stage write") && reason.contains("killed"),
            "{reason}"
        );
        assert!(s["signal"].is_null());
    }
}

#[test]
fn fake_abort_setaccess_is_a_sigabrt_crash_at_set_access_with_the_hipvmm_line() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "abort-setaccess", 2),
        &["--timeout", "20"],
    );
    let sm = smokes(&report);
    assert_eq!(sm.len(), 2, "{report:#}");
    for s in sm {
        assert_eq!(s["outcome"], "crash", "{s:#}");
        assert_eq!(s["signal"], 6, "{s:#}");
        assert_eq!(s["stage"], "set_access", "{s:#}");
        assert!(s["reason"].as_str().unwrap().contains("SIGABRT"), "{s:#}");
        let tail: Vec<&str> = s["stderr_tail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert!(tail.contains(&"HipVMM Failure: invalid argument"), "{s:#}");
    }
}

#[test]
fn fake_reads_zeros_fails_verify_with_the_mismatch_count_and_a_zero_word() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "reads-zeros", 2),
        &["--timeout", "20"],
    );
    let sm = smokes(&report);
    assert_eq!(sm.len(), 2, "{report:#}");
    // Pool 0's second growth: 2 MiB at offset 6 MiB (probes/smoke-plan.toml at 2 MiB granularity).
    let words = (2 * MIB / 4) as u32;
    for s in sm {
        assert_eq!(s["outcome"], "fail", "{s:#}");
        assert_eq!(s["stage"], "verify", "{s:#}");
        assert_eq!(
            s["mismatches"], words,
            "all of the chunk reads wrong: {s:#}"
        );
        assert_eq!(s["first_bad_offset"], 6 * MIB, "{s:#}");
        assert_eq!(s["first_bad_value"], 0, "{s:#}");
        assert_eq!(s["expected_value"], pattern(3 * words, 0), "{s:#}");
        assert_eq!(
            s["error"]["name"], "MISMATCH",
            "no runtime error: the probe's own verify names it: {s:#}"
        );
        assert!(
            s["reason"].as_str().unwrap().contains("reads zeros (Q4)"),
            "{s:#}"
        );
    }
}

#[test]
fn fake_segv_at_init_is_a_crash_before_any_stage_and_keeps_the_sysfs_facts() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "segv-init", 2),
        &["--timeout", "20"],
    );
    let b = hip_backend(&report);
    assert_eq!(b["status"], "error", "{b:#}");
    assert!(s(b, "detail").contains("SIGSEGV"), "{b:#}");
    let ds = devices(&report);
    assert_eq!(
        ds.len(),
        2,
        "both sysfs GPUs are still reported: {report:#}"
    );
    for (d, pci) in ds.iter().zip(["0000:03:00.0", "0000:08:00.0"]) {
        assert_eq!(d["source"], "sysfs");
        assert_eq!(d["pci_bus_id"], pci);
        assert_eq!(d["vram_total_bytes"], 32 * GIB);
        let s = &d["smoke"];
        assert_eq!(s["outcome"], "crash", "{s:#}");
        assert_eq!(s["signal"], 11, "{s:#}");
        assert!(s["stage"].is_null(), "no stage was announced: {s:#}");
        assert!(
            s["reason"]
                .as_str()
                .unwrap()
                .contains("before the first stage (driver/runtime initialisation)"),
            "{s:#}"
        );
    }
}

#[test]
fn fake_garbage_is_bad_output() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "garbage", 2),
        &["--timeout", "20"],
    );
    assert_eq!(hip_backend(&report)["status"], "error");
    let sm = smokes(&report);
    assert_eq!(sm.len(), 2, "{report:#}");
    for s in sm {
        assert_eq!(s["outcome"], "bad-output", "{s:#}");
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.contains("not the probe protocol") && reason.contains("HIP Library Path"),
            "{reason}"
        );
    }
}

#[test]
fn fake_partial_stream_is_bad_output_for_each_device() {
    let sb = Sandbox::new();
    let report = detect_json(
        &mut sb.with_fake(TWO_GPUS, "partial", 2),
        &["--timeout", "20"],
    );
    // hello arrived (two devices, runtime 7.2), then each stream broke off mid-line.
    assert_eq!(hip_backend(&report)["runtime_version"], "7.2.26015");
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    for d in ds {
        assert_eq!(
            d["source"], "sysfs",
            "the half device line is not taken as a device: {d:#}"
        );
        let s = &d["smoke"];
        assert_eq!(s["outcome"], "bad-output", "{s:#}");
        assert!(
            s["reason"].as_str().unwrap().contains("arch_fea"),
            "the cut-off line is quoted: {s:#}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Decisions from measured failures

fn assert_keeps_legacy_pool(fake_name: &str, expect_code: i32, reason_parts: &[&str]) -> Value {
    let sb = Sandbox::new();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, fake_name, 2),
        &["--timeout", "2"],
    );
    assert_eq!(code, expect_code, "{fake_name}: {plan:#}");
    assert_eq!(plan["mode"], "probe");
    assert_eq!(
        plan["toolkit"]["version"], "7.2",
        "{fake_name}: the measured runtime"
    );
    let f = flag(&plan, "GGML_HIP_NO_VMM")
        .unwrap_or_else(|| panic!("{fake_name}: no VMM flag: {plan:#}"));
    assert_eq!(f["value"], "ON", "{fake_name}: {f:#}");
    let reason = s(f, "reason");
    assert!(
        reason.starts_with("device 0 ("),
        "{fake_name}: the reason names the measured device: {reason}"
    );
    for p in reason_parts {
        assert!(
            reason.contains(p),
            "{fake_name}: reason lacks `{p}`: {reason}"
        );
    }
    assert_eq!(plan["groups"][0]["vmm"], false);
    plan
}

#[test]
fn measured_hang_keeps_vmm_off() {
    assert_keeps_legacy_pool(
        "hang-after-map",
        0,
        &["VMM smoke test hang at stage write", "no result within 2 s"],
    );
}

#[test]
fn measured_abort_keeps_vmm_off() {
    assert_keeps_legacy_pool(
        "abort-setaccess",
        0,
        &["VMM smoke test crash at stage set_access", "SIGABRT (6)"],
    );
}

#[test]
fn measured_zero_reads_keep_vmm_off() {
    assert_keeps_legacy_pool(
        "reads-zeros",
        0,
        &[
            "VMM smoke test fail at stage verify",
            "524288 mismatched words",
            "reads zeros (Q4)",
        ],
    );
}

#[test]
fn measured_init_crash_keeps_vmm_off_and_refuses_the_plan() {
    // segv-init never says hello, so the runtime version is unknown here.
    let sb = Sandbox::new();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, "segv-init", 2),
        &["--timeout", "2"],
    );
    assert_eq!(
        code, 1,
        "a device that crashes at init blocks a safe plan: {plan:#}"
    );
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "ON");
    assert!(
        s(f, "reason").contains("VMM smoke test crash") && s(f, "reason").contains("SIGSEGV (11)"),
        "{f:#}"
    );
    let refusals = plan["refusals"].as_array().unwrap();
    assert_eq!(refusals.len(), 2, "{plan:#}");
    assert!(
        refusals
            .iter()
            .all(|r| s(r, "message").contains("crashes at driver initialisation (signal 11)")),
        "{plan:#}"
    );
}

#[test]
fn measured_garbage_keeps_vmm_off() {
    let sb = Sandbox::new();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, "garbage", 2),
        &["--timeout", "2"],
    );
    assert_eq!(code, 0, "{plan:#}");
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "ON");
    assert!(
        s(f, "reason").contains("VMM smoke test bad-output")
            && s(f, "reason").contains("not the probe protocol"),
        "{f:#}"
    );
}

#[test]
fn measured_partial_output_keeps_vmm_off() {
    assert_keeps_legacy_pool("partial", 0, &["VMM smoke test bad-output"]);
}

// ------------------------------------------------------------------------------------------
// Decisions from a passing smoke test

const DENY_UNLESS_PASS: [&str; 3] = ["Q3", "Q4", "Q21"];

#[test]
fn pass_on_rocm_72_lifts_the_deny_unless_smoke_pass_quirks() {
    // The pass fake presented as an RX 7900 XTX (gfx1100): Q3 is lifted by the smoke pass.
    let sb = Sandbox::new();
    let probe = sb.rewritten_fake(
        "pass-gfx1201",
        &[
            "s/gfx1201/gfx1100/g",
            "s/AMD Radeon AI PRO R9700/Radeon RX 7900 XTX/g",
        ],
    );
    let (code, plan) = plan_json(
        &mut sb.with_probe(TWO_GPUS, &probe, 2),
        &["--timeout", "20"],
    );
    assert_eq!(code, 0, "{plan:#}");
    assert_eq!(plan["toolkit"]["version"], "7.2");
    assert_eq!(plan["toolkit"]["source"], "measured runtime");
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "OFF", "{plan:#}");
    assert!(s(f, "reason").contains("smoke test passed"), "{f:#}");
    assert!(quirks_of(f).contains("Q3"), "{f:#}");
    assert_eq!(plan["groups"][0]["vmm"], true);
    assert_eq!(plan["groups"][0]["devices"], serde_json::json!([0, 1]));
    assert!(
        trace_has(&plan, "smoke pass on record (this machine's probe"),
        "{plan:#}"
    );
    // Q3 still applies on this runtime, so the user is told.
    assert!(warning_ids(&plan).contains("Q3"), "{plan:#}");
}

#[test]
fn a_gfx12_smoke_pass_on_rocm_72_is_not_enough() {
    // Q21: the reporter's gfx1201 passed the VMM checks and still hung on a real request, so on
    // gfx12 only an inference pass (check-build --exercise inference) lifts the legacy pool.
    let sb = Sandbox::new();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, "pass-gfx1201", 2),
        &["--timeout", "20"],
    );
    assert_eq!(code, 0, "{plan:#}");
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "ON", "{plan:#}");
    assert!(
        s(f, "reason").contains("inference") && s(f, "reason").contains("only a smoke pass"),
        "{f:#}"
    );
    assert!(s(f, "lift").contains("--exercise"), "{f:#}");
    assert!(
        DENY_UNLESS_PASS
            .iter()
            .all(|q| warning_ids(&plan).contains(*q)),
        "{plan:#}"
    );
}

#[test]
fn without_a_smoke_result_rocm_72_keeps_gfx1201_on_the_legacy_pool() {
    if !toolchain_can_be_hidden() {
        return;
    }
    // The counterpart of the test above: same GPUs and runtime, nothing measured.
    let sb = Sandbox::new();
    let (code, plan) = plan_json(&mut sb.without_toolchain(TWO_GPUS), &["--rocm", "7.2.1"]);
    assert_eq!(code, 0, "{plan:#}");
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "ON", "{plan:#}");
    assert!(
        DENY_UNLESS_PASS.iter().all(|q| quirks_of(f).contains(*q)),
        "{f:#}"
    );
    assert!(
        s(f, "reason").starts_with(
            "keep the legacy pool (llama.cpp's HIP default, Q1): VMM needs a measured inference"
        ),
        "{f:#}"
    );
}

#[test]
fn a_smoke_pass_on_rocm_7_13_enables_vmm_for_gfx1100() {
    // The fake always says ROCm 7.2.26015: save its report (as an RX 7900 XTX, gfx1100) and move
    // it to ROCm 7.13. Q3 and Q22 have no fixed release, so they apply there, and the smoke pass
    // lifts them; Q4/Q21 (gfx12) and Q33 (gfx1100 from 7.14) do not apply.
    let sb = Sandbox::new();
    let probe = sb.rewritten_fake(
        "pass-gfx1201",
        &[
            "s/gfx1201/gfx1100/g",
            "s/AMD Radeon AI PRO R9700/Radeon RX 7900 XTX/g",
        ],
    );
    let mut report = detect_json(
        &mut sb.with_probe(TWO_GPUS, &probe, 2),
        &["--timeout", "20"],
    );
    let new_version = "7.13.60500";
    for b in report["backends"].as_array_mut().unwrap() {
        b["runtime_version"] = new_version.into();
        b["driver_version"] = new_version.into();
    }
    for d in report["devices"].as_array_mut().unwrap() {
        d["runtime_version"] = new_version.into();
        d["driver_version"] = new_version.into();
    }
    let path = sb.path("report-rocm714.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();

    let (code, plan) = plan_json(
        &mut sb.gpuprobe(TWO_GPUS),
        &["--from", path.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{plan:#}");
    assert_eq!(plan["mode"], "report");
    assert_eq!(plan["toolkit"]["version"], "7.13");
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "OFF", "{plan:#}");
    assert!(s(f, "reason").contains("smoke test passed"), "{f:#}");
    // Only the smoke-liftable records stand between the pass and VMM.
    assert!(!trace_has(&plan, "deny-unless-workload-pass"), "{plan:#}");
    let ids = warning_ids(&plan);
    assert!(
        !ids.contains("Q4") && !ids.contains("Q21") && !ids.contains("Q33"),
        "{ids:?}"
    );
}

#[test]
fn gfx906_with_a_passing_smoke_test_gets_vmm_and_the_rocblas_warning() {
    // The pass fake simulates a gfx1201; present its output as the two Radeon Pro VII.
    let sb = Sandbox::new();
    let probe = sb.rewritten_fake(
        "pass-gfx1201",
        &[
            "s/gfx1201/gfx906/g",
            "s/AMD Radeon AI PRO R9700/Radeon Pro VII/g",
        ],
    );
    let mut cmd = sb.with_probe("2x-radeon-pro-vii-gfx906", &probe, 2);
    let report = detect_json(&mut cmd, &["--timeout", "20"]);
    assert!(
        devices(&report)
            .iter()
            .all(|d| d["arch"] == "gfx906" && d["smoke"]["outcome"] == "pass"),
        "{report:#}"
    );

    let (code, plan) = plan_json(
        &mut sb.with_probe("2x-radeon-pro-vii-gfx906", &probe, 2),
        &["--timeout", "20"],
    );
    assert_eq!(code, 0, "{plan:#}");
    // Q14 is about rocBLAS packages, not VMM: no source shows VMM failing on gfx906, so the
    // measured pass decides (Q3 on ROCm 7.2 is lifted by it).
    let f = flag(&plan, "GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f["value"], "OFF", "{plan:#}");
    assert!(!quirks_of(f).contains("Q14"), "{f:#}");
    assert!(warning_ids(&plan).contains("Q14"), "{plan:#}");
}

#[test]
fn two_amd_gpus_on_rocm_7_get_no_peer_copy() {
    let sb = Sandbox::new();
    let llama = sb.llama_checkout();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, "pass-gfx1201", 2),
        &[
            "--timeout",
            "20",
            "--llama-cpp",
            llama.to_str().unwrap(),
            "--llama-build",
            "11434",
        ],
    );
    assert_eq!(code, 0, "{plan:#}");
    assert_eq!(plan["toolkit"]["version"], "7.2");
    let f = flag(&plan, "GGML_CUDA_NO_PEER_COPY")
        .unwrap_or_else(|| panic!("Q7-linux-rdna4 sets the flag: {plan:#}"));
    assert_eq!(f["value"], "ON");
    assert!(quirks_of(f).contains("Q7-linux-rdna4"), "{f:#}");
    assert!(warning_ids(&plan).contains("Q7-linux-rdna4"), "{plan:#}");
    // A CMake flag, never the presence-checked env var.
    assert!(!plan.to_string().contains("\"GGML_CUDA_P2P\""), "{plan:#}");
}

#[test]
fn a_single_gpu_gets_no_peer_copy_flag() {
    // Counterpart of the test above: the same checkout, one GPU.
    let sb = Sandbox::new();
    let llama = sb.llama_checkout();
    let (code, plan) = plan_json(
        &mut sb.with_fake(TWO_GPUS, "pass-gfx1201", 1),
        &[
            "--timeout",
            "20",
            "--llama-cpp",
            llama.to_str().unwrap(),
            "--llama-build",
            "11434",
        ],
    );
    assert_eq!(code, 0, "{plan:#}");
    assert_eq!(plan["groups"][0]["devices"], serde_json::json!([0]));
    assert!(flag(&plan, "GGML_CUDA_NO_PEER_COPY").is_none(), "{plan:#}");
    assert!(!warning_ids(&plan).contains("Q7-linux-rdna4"), "{plan:#}");
}

// ------------------------------------------------------------------------------------------
// Machine-shape quirks from discovery alone

#[test]
fn dgpu_next_to_the_raphael_igpu_warns_q8_and_gives_unified_memory_only_to_the_igpu() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    let (code, plan) = plan_json(
        &mut sb.without_toolchain("rx9070xt-raphael-gfx1201-gfx1036"),
        &[],
    );
    assert_eq!(code, 0, "{plan:#}");
    let q8: Vec<&Value> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| quirks_of(w).contains("Q8"))
        .collect();
    assert_eq!(q8.len(), 1, "{plan:#}");
    assert!(
        s(q8[0], "message").contains("HIP_VISIBLE_DEVICES=<dGPU index>"),
        "{q8:#?}"
    );
    // One machine, one build for both GPUs.
    let groups = plan["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{plan:#}");
    assert_eq!(
        groups[0]["targets"],
        serde_json::json!(["gfx1201", "gfx1036"])
    );
    // Unified memory is for the APU (Q11); an env var reaches every GPU of the process, so the
    // advice holds only for a process that uses the iGPU alone, never for the discrete GPU.
    let uma = groups[0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "GGML_CUDA_ENABLE_UNIFIED_MEMORY")
        .unwrap_or_else(|| panic!("the iGPU is an APU (Q11): {plan:#}"));
    let when = s(uma, "when");
    assert!(
        when.contains("gfx1036 alone") && !when.contains("gfx1201"),
        "{uma:#}"
    );
}

#[test]
fn strix_halo_gets_unified_memory_advice() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    // Build 9826: before the 2D-copy fast path that garbles unified-memory output (Q12).
    let (code, plan) = plan_json(
        &mut sb.without_toolchain("strix-halo-gfx1151"),
        &["--llama-build", "9826"],
    );
    assert_eq!(code, 0, "{plan:#}");
    let env = plan["groups"][0]["env"].as_array().unwrap();
    let uma = env
        .iter()
        .find(|e| e["name"] == "GGML_CUDA_ENABLE_UNIFIED_MEMORY")
        .unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(uma["value"], "1");
    assert!(quirks_of(uma).contains("Q11"), "{uma:#}");
    assert!(warning_ids(&plan).contains("Q11"), "{plan:#}");
    // Runtime advice, not a CMake flag (GGML_HIP_UMA is gone).
    assert!(
        plan["groups"][0]["flags"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["name"] != "GGML_HIP_UMA")
    );
    // From build 9827 unified memory garbles output on Strix Halo (Q12): not recommended there.
    let (_, plan) = plan_json(&mut sb.without_toolchain("strix-halo-gfx1151"), &[]);
    let env = plan["groups"][0]["env"].as_array().unwrap();
    assert!(
        env.iter()
            .all(|e| e["name"] != "GGML_CUDA_ENABLE_UNIFIED_MEMORY"),
        "{plan:#}"
    );
    assert!(warning_ids(&plan).contains("Q12"), "{plan:#}");
}

#[test]
fn discrete_gpus_get_no_unified_memory_advice() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    let (_, plan) = plan_json(&mut sb.without_toolchain("rx-vega56-gfx900"), &[]);
    let env = plan["groups"][0]["env"].as_array().unwrap();
    assert!(
        env.iter()
            .all(|e| e["name"] != "GGML_CUDA_ENABLE_UNIFIED_MEMORY"),
        "{plan:#}"
    );
    assert!(
        !warning_ids(&plan).contains("Q11") && !warning_ids(&plan).contains("Q8"),
        "{plan:#}"
    );
}

// ------------------------------------------------------------------------------------------
// Environment hygiene

// Values that keep the machine's one GPU visible: hiding it is its own test (visible devices).
const DIRTY_ENV: [(&str, &str); 3] = [
    ("HSA_OVERRIDE_GFX_VERSION", "11.0.0"),
    ("HIP_VISIBLE_DEVICES", "0"),
    ("ROCR_VISIBLE_DEVICES", "0"),
];

fn dirty(mut c: Command) -> Command {
    for (k, v) in DIRTY_ENV {
        c.env(k, v);
    }
    c
}

#[test]
fn environment_variables_that_change_the_gpus_are_reported_with_their_effect() {
    if !toolchain_can_be_hidden() {
        return;
    }
    let sb = Sandbox::new();
    let machine = "strix-halo-gfx1151";

    let report = detect_json(&mut dirty(sb.without_toolchain(machine)), &[]);
    let env = report["environment"].as_array().unwrap();
    assert_eq!(env.len(), 3, "{report:#}");
    for ((name, value), e) in DIRTY_ENV.iter().zip(env) {
        assert_eq!(e["name"], *name);
        assert_eq!(e["value"], *value);
    }
    assert!(
        s(&env[0], "effect").contains("treat every AMD GPU as the given gfx version"),
        "{env:#?}"
    );
    assert!(
        s(&env[1], "effect").contains("hides AMD GPUs from HIP programs and renumbers the rest"),
        "{env:#?}"
    );
    assert!(
        s(&env[2], "effect")
            .contains("hides AMD GPUs from the ROCm runtime and renumbers the rest"),
        "{env:#?}"
    );

    let table = run(dirty(sb.without_toolchain(machine)).args(["detect", "--backend", "hip"]))
        .ok()
        .stdout;
    assert!(table.contains("warning: HSA_OVERRIDE_GFX_VERSION=11.0.0 is set: makes ROCm treat every AMD GPU as the given gfx version"), "{table}");
    assert!(
        table.contains("warning: HIP_VISIBLE_DEVICES=0 is set: hides AMD GPUs from HIP programs"),
        "{table}"
    );
    assert!(
        table.contains(
            "warning: ROCR_VISIBLE_DEVICES=0 is set: hides AMD GPUs from the ROCm runtime"
        ),
        "{table}"
    );

    let (code, plan) = plan_json(&mut dirty(sb.without_toolchain(machine)), &[]);
    assert_eq!(code, 0, "{plan:#}");
    let q9: Vec<&Value> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        // The Q9 record's own warning (the variable's notice cites Q9 too).
        .filter(|w| quirks_of(w).contains("Q9") && s(w, "message").starts_with("Q9:"))
        .collect();
    assert_eq!(q9.len(), 1, "{plan:#}");
    assert!(
        s(q9[0], "message").contains("HSA_OVERRIDE_GFX_VERSION is set"),
        "{q9:#?}"
    );
    for (name, value) in DIRTY_ENV {
        let line = format!("{name}={value} is set");
        assert!(
            plan["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| s(w, "message").starts_with(&line)),
            "{line}: {plan:#}"
        );
    }

    // And a clean environment has none of it.
    let (_, clean) = plan_json(&mut sb.without_toolchain(machine), &[]);
    assert!(!warning_ids(&clean).contains("Q9"), "{clean:#}");
    for (name, _) in DIRTY_ENV {
        assert!(
            !clean["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| s(w, "message").starts_with(&format!("{name}="))),
            "{clean:#}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// The real hipcc path

fn real_hipcc() -> Option<PathBuf> {
    let opt = PathBuf::from("/opt/rocm/bin/hipcc");
    if opt.is_file() {
        return Some(opt);
    }
    which::which("hipcc").ok()
}

fn probe_executables(cache: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(cache.join("gpuprobe")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("hip-probe-"))
        .map(|e| e.path().join("gpuprobe-probe"))
        .filter(|p| p.is_file())
        .collect()
}

#[test]
fn real_hipcc_builds_the_probe_once_and_the_runtime_sees_no_device() {
    let Some(hipcc) = real_hipcc() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install hipcc (Debian: apt-get install hipcc libamdhip64-dev)"
        );
        eprintln!("skipping: no hipcc on this machine");
        return;
    };
    let sb = Sandbox::new();
    let cache = sb.path("cache");
    // A sane PATH: hipcc's own directory and the system's; gpuprobe sets HIP_PLATFORM=amd so an
    // nvcc there would not switch hipcc to the NVIDIA platform.
    let hip_dir = hipcc.parent().unwrap().to_path_buf();
    let path = std::env::join_paths([hip_dir.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
        .unwrap();
    let machine = "2x-radeon-pro-vii-gfx906";
    let cmd = || {
        let mut c = sb.gpuprobe(machine);
        c.env("PATH", &path)
            .env("XDG_CACHE_HOME", &cache)
            .timeout(Duration::from_secs(600));
        c.args([
            "detect",
            "--backend",
            "hip",
            "--json",
            "--cycles",
            "5",
            "--timeout",
            "60",
        ]);
        c
    };

    let first = run(&mut cmd()).ok();
    assert!(
        first.stderr.contains(&format!(
            "gpuprobe: building the HIP probe for gfx906 with {}",
            hipcc.display()
        )),
        "the first run says it builds: {}",
        first.stderr
    );
    let exes = probe_executables(&cache);
    assert_eq!(
        exes.len(),
        1,
        "one cached probe under {}: {exes:?}",
        cache.display()
    );
    let exe = &exes[0];
    let built_at = std::fs::metadata(exe).unwrap().modified().unwrap();

    let second = run(&mut cmd()).ok();
    assert!(
        !second.stderr.contains("building the HIP probe"),
        "the second run reuses the cache: {}",
        second.stderr
    );
    assert_eq!(
        std::fs::metadata(exe).unwrap().modified().unwrap(),
        built_at,
        "the cached probe was not rebuilt"
    );
    assert_eq!(probe_executables(&cache).len(), 1);

    for (label, r) in [("first", &first), ("second", &second)] {
        let report = r.json();
        let b = hip_backend(&report);
        let ds = devices(&report);
        assert_eq!(ds.len(), 2, "{label}: the sysfs facts are kept: {report:#}");
        for (d, pci) in ds.iter().zip(["0000:04:00.0", "0000:0c:00.0"]) {
            assert_eq!(d["arch"], "gfx906");
            assert_eq!(d["name"], "Radeon Pro VII");
            assert_eq!(d["vram_total_bytes"], 16 * GIB);
            assert_eq!(d["pci_bus_id"], pci);
            assert_eq!(d["source"], "sysfs");
        }
        if Path::new("/dev/kfd").exists() {
            eprintln!("{label}: /dev/kfd exists; not asserting what the runtime sees");
            continue;
        }
        // The real runtime ran and answered: it has a version, and no device.
        assert_eq!(b["status"], "error", "{label}: {b:#}");
        let rv = s(b, "runtime_version");
        assert!(
            rv.split('.').count() >= 2 && rv.chars().next().unwrap().is_ascii_digit(),
            "{label}: runtime version {rv}"
        );
        assert!(
            s(b, "detail").contains("the HIP runtime sees no usable device")
                && s(b, "detail").contains("hipErrorNoDevice"),
            "{label}: {b:#}"
        );
        for d in ds {
            let sm = &d["smoke"];
            assert_eq!(sm["outcome"], "not-run", "{label}: {sm:#}");
            assert!(
                sm["reason"].as_str().unwrap().contains("hipErrorNoDevice"),
                "{label}: {sm:#}"
            );
        }
    }
}

#[test]
fn a_probe_that_lingers_after_done_is_not_waited_for() {
    // The real probes leave with _exit right after `done`, and the kernel then tears their GPU
    // state down (about 100 ms per GPU on an H200); gpuprobe takes the complete report and does
    // not wait for that. Here the wrapper keeps running (and holding stdout) after the fake's
    // `done`: before, gpuprobe waited until the deadline and reported a hang.
    let sb = Sandbox::new();
    let probe = sb.path("lingers.sh");
    std::fs::write(
        &probe,
        format!(
            "#!/bin/sh\n\"{}\" \"$@\"\nexec sleep 6173\n",
            fake("pass-gfx1201").display()
        ),
    )
    .unwrap();
    set_executable(&probe);
    let report = detect_json(
        &mut sb.with_probe(TWO_GPUS, &probe, 2),
        &["--timeout", "20"],
    );
    for d in devices(&report) {
        assert_eq!(d["smoke"]["outcome"], "pass", "{d:#}");
        assert!(
            d["timings"]["wall_ms"].as_f64().unwrap() < 15_000.0,
            "waited for the lingering probe: {d:#}"
        );
    }
    // The lingering processes were killed with their group, not left behind.
    let lingering = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains("6173"))
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while lingering() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!lingering(), "a probe process outlived gpuprobe");
}
