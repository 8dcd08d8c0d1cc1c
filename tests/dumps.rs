//! Dumps: `gpuprobe detect --dump FILE` records every input it read (kernel files, identity,
//! environment, toolkit outputs, probe builds, the probe children's raw output) with the report,
//! redacted; `GPUPROBE_REPLAY=FILE` answers from the record and must give the same report.
//!
//! Every dump anywhere under `tests/fixtures/` is replayed here, so a dump a user sends becomes a
//! regression test by being dropped in (README: "Sending a dump").

#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use machine::{Machine, fake_hipcc_rejecting_gfx942, fake_probe, write};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_gpuprobe");
const SCHEMA: &str = "gpuprobe.dump/v1";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// Every file under tests/fixtures whose schema is a dump's.
fn all_dumps() -> Vec<PathBuf> {
    let mut files = Vec::new();
    json_files(&fixtures(), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["schema"] == SCHEMA)
        })
        .collect()
}

/// `gpuprobe ARGS` replaying `dump` on a machine with nothing: no tools on PATH, no fake root.
fn replay(dump: &Path, args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", home.path().join("no-tools"))
        .env("NO_COLOR", "1")
        .env("GPUPROBE_REPLAY", dump)
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The report without what may differ between gpuprobe versions that read the same inputs, or
/// between a run and its replay: the parent's clock (device `timings`, wall and start times).
fn comparable(mut v: Value) -> Value {
    fn drop_clock(v: &mut Value) {
        match v {
            Value::Object(o) => {
                for k in ["timings", "wall_ms", "start_ms"] {
                    o.remove(k);
                }
                o.values_mut().for_each(drop_clock);
            }
            Value::Array(a) => a.iter_mut().for_each(drop_clock),
            _ => {}
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("gpuprobe_version");
    }
    drop_clock(&mut v);
    v
}

/// `got` without the backend-run fields a dump's report predates (`mode`, `shared_crash`: how the
/// children were run, added with the shared CUDA child), where the dumped report lacks them.
fn without_newer_run_fields(want: &Value, mut got: Value) -> Value {
    let old = |k: &str| {
        want["probe_run"]["backends"]
            .as_array()
            .is_some_and(|bs| bs.iter().any(|b| b.get(k).is_none()))
    };
    let drop: Vec<&str> = ["mode", "shared_crash"]
        .into_iter()
        .filter(|k| old(k))
        .collect();
    if let Some(bs) = got["probe_run"]["backends"].as_array_mut() {
        for b in bs.iter_mut().filter_map(Value::as_object_mut) {
            for k in &drop {
                b.remove(*k);
            }
        }
    }
    got
}

/// Host checks dumped before the severity policy said `info` for what is now `note` (the schema
/// still accepts the old word): the same finding.
fn info_is_note(mut report: Value) -> Value {
    if let Some(checks) = report["host_checks"].as_array_mut() {
        for c in checks {
            if c["level"] == "info" {
                c["level"] = Value::from("note");
            }
        }
    }
    report
}

/// Panics with the first lines that differ.
fn assert_same(what: &str, want: &Value, got: &Value) {
    if want == got {
        return;
    }
    let a = serde_json::to_string_pretty(want).unwrap();
    let b = serde_json::to_string_pretty(got).unwrap();
    let diff: Vec<String> = a
        .lines()
        .zip(b.lines())
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .take(12)
        .map(|(i, (x, y))| format!("line {}:\n  dumped:   {x}\n  replayed: {y}", i + 1))
        .collect();
    panic!(
        "{what}: the replay differs from the report in the dump\n{}\n(lengths {} and {} lines)",
        diff.join("\n"),
        a.lines().count(),
        b.lines().count()
    );
}

#[test]
fn every_dump_under_tests_fixtures_replays_to_its_report() {
    let dumps = all_dumps();
    assert!(
        !dumps.is_empty(),
        "tests/fixtures holds at least the constructed dump in tests/fixtures/dumps/"
    );
    for d in dumps {
        let text = std::fs::read_to_string(&d).unwrap();
        let dump: Value = serde_json::from_str(&text).unwrap();
        let (code, out, err) = replay(&d, &["detect", "--json"]);
        assert_eq!(code, 0, "{}: {err}", d.display());
        let got: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {out}\n{err}", d.display()));
        let want = info_is_note(comparable(dump["report"].clone()));
        let got = without_newer_run_fields(&want, comparable(got));
        assert_same(&d.display().to_string(), &want, &got);
        assert!(err.contains("nothing on this machine is probed"), "{err}");
    }
}

/// Takes a dump with `detect --dump` on machine `m`; returns (dump path, its JSON, stdout).
fn take(m: &Machine, args: &[&str]) -> (PathBuf, Value, String) {
    let path = m.path("dump.json");
    let mut full = vec![
        "detect",
        "--json",
        "--cycles",
        "3",
        "--timeout",
        "30",
        "--dump",
    ];
    let p = path.to_str().unwrap().to_string();
    full.push(&p);
    full.extend_from_slice(args);
    let (code, out, err) = m.run(&full);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("gpuprobe: wrote "), "{err}");
    assert!(err.contains("Replay it with: GPUPROBE_REPLAY="), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, v, out)
}

#[test]
fn an_amd_machine_with_one_unbuildable_target_dumps_and_replays_without_its_compiler() {
    let user = "gpuprobe-tester-q7x";
    let m = Machine::from(Some("mi300x-mi210-gfx942-gfx90a")).env("FAKE_PROBE_DEVICES", "2");
    fake_hipcc_rejecting_gfx942(&m);
    let home = m.path(&format!("home/{user}"));
    std::fs::create_dir_all(&home).unwrap();
    let m = m
        .with_bin_on_path()
        .env("HOME", home.to_str().unwrap())
        .env("USER", user)
        .unset("XDG_CACHE_HOME")
        .env("HIP_VISIBLE_DEVICES", "0,1");
    let (path, dump, live) = take(&m, &["--backend", "hip"]);

    // What was read is there.
    let inputs = &dump["inputs"];
    let props = "/sys/class/kfd/kfd/topology/nodes/1/properties";
    assert!(
        inputs["files"][props]
            .as_str()
            .unwrap()
            .contains("gfx_target_version 90402")
    );
    assert_eq!(inputs["env"]["HIP_VISIBLE_DEVICES"], "0,1");
    assert!(
        inputs["tools"]["hipcc"]["version_output"]
            .as_str()
            .unwrap()
            .contains("HIP version: 6.0.32830-fake")
    );
    assert_eq!(inputs["builds"]["gfx90a,gfx942"]["ok"], false);
    assert_eq!(inputs["builds"]["gfx942"]["ok"], false);
    assert_eq!(inputs["builds"]["gfx90a"]["ok"], true);
    assert!(
        inputs["children"]["hip device 1"]["events"]
            .as_array()
            .unwrap()
            .len()
            > 3
    );
    assert!(inputs["nodes"]["/dev/kfd"].is_object());
    // Redacted: the user's name and home, and the GPUs' serial numbers.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(user), "the user name leaked");
    let serial = "4214157412347211771";
    assert!(!text.contains(serial), "a KFD unique_id leaked");
    let redacted: Vec<&str> = dump["redacted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        redacted.contains(&"home directory") && redacted.contains(&"serial numbers"),
        "{redacted:?}"
    );
    assert!(
        inputs["builds"]["gfx90a"]["command"]
            .as_str()
            .unwrap()
            .contains("/home/<user>/.cache/gpuprobe/"),
        "{:#}",
        inputs["builds"]["gfx90a"]
    );

    // Replayed with no compiler, no tree, no probe: the same report.
    let (code, out, err) = replay(&path, &["detect", "--json"]);
    assert_eq!(code, 0, "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_same(
        "mixed-target dump",
        &comparable(dump["report"].clone()),
        &comparable(got.clone()),
    );
    assert!(
        !err.contains("building the HIP probe"),
        "nothing is built in a replay: {err}"
    );
    // It is what detect printed, with the home folder redacted (the build commands name it).
    let home_text = home.to_str().unwrap();
    let live: Value = serde_json::from_str(&live.replace(home_text, "/home/<user>")).unwrap();
    assert_same("live report", &comparable(live), &comparable(got));
    // The table too.
    let (_, table_live, _) = m.run(&[
        "detect",
        "--backend",
        "hip",
        "--cycles",
        "3",
        "--timeout",
        "30",
    ]);
    let (_, table_replay, _) = replay(&path, &["detect"]);
    // The probe is built in a fresh temporary folder each time (its name is random), so the
    // build command a host check quotes differs in that name alone.
    let fresh = regex::Regex::new(r"\.gpuprobe-probe\.[A-Za-z0-9]+/").unwrap();
    let same_tmp = |t: &str| fresh.replace_all(t, ".gpuprobe-probe.TMP/").into_owned();
    assert_eq!(
        same_tmp(&table_live.replace(home_text, "/home/<user>")),
        same_tmp(&table_replay)
    );
    // And a plan made from the replay is the plan for that machine.
    let (code, out, err) = replay(
        &path,
        &[
            "cmake-flags",
            "--format",
            "json",
            "--toolchain",
            "none",
            "--rocm",
            "6.4",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["mode"], "probe");
    assert!(
        plan.to_string().contains("gfx942") && plan.to_string().contains("gfx90a"),
        "{plan:#}"
    );
}

#[test]
fn the_nvidia_path_dumps_proc_and_the_cuda_children_and_replays() {
    let lib = fake_cuda::libcuda(fake_cuda::Build::Current);
    let m = Machine::from(None)
        .env("GPUPROBE_LIBCUDA", lib.to_str().unwrap())
        .env("FAKE_CUDA_SCENARIO", "ok")
        .env("FAKE_CUDA_DEVICES", "2")
        .env("PATH", "/usr/bin:/bin");
    let nv = m.root().join("proc/driver/nvidia");
    write(
        &nv.join("version"),
        &format!("{}\n", fake_cuda::OPEN_MODULE),
    );
    let uuid = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    for (bus, u) in [
        ("0000:19:00.0", uuid),
        ("0000:1a:00.0", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
    ] {
        write(
            &nv.join("gpus").join(bus).join("information"),
            &format!("Model: \t\t Fake GPU\nBus Location: \t {bus}\nGPU UUID: \t {u}\n"),
        );
    }
    let (path, dump, _) = take(&m, &["--backend", "cuda"]);
    let inputs = &dump["inputs"];
    // One shared child probes both devices and their pair (`--isolate` dumps one child per
    // device and the peer child under `cuda device N` and `cuda peers`).
    let children: Vec<&String> = inputs["children"].as_object().unwrap().keys().collect();
    assert_eq!(children, ["cuda shared"], "{inputs:#}");
    let hello = &inputs["children"]["cuda shared"]["events"][0];
    assert_eq!(hello["event"], "hello");
    assert_eq!(hello["runtime_version"], "12.8");
    assert!(
        inputs["files"]["/proc/driver/nvidia/gpus/0000:19:00.0/information"]
            .as_str()
            .unwrap()
            .contains("Fake GPU")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("0f1e2d3c"), "GPU UUIDs are redacted");
    assert_eq!(dump["report"]["devices"].as_array().unwrap().len(), 2);

    let (code, out, err) = replay(&path, &["detect", "--json"]);
    assert_eq!(code, 0, "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_same(
        "nvidia dump",
        &comparable(dump["report"].clone()),
        &comparable(got),
    );
}

#[test]
fn a_file_that_is_not_a_dump_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = replay(&dir.path().join("missing.json"), &["detect"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("GPUPROBE_REPLAY") && err.contains("cannot read"),
        "{err}"
    );
    assert!(err.contains("gpuprobe detect --dump FILE"), "{err}");
    let report = dir.path().join("report.json");
    std::fs::write(&report, r#"{"schema":"gpuprobe.report/v1"}"#).unwrap();
    let (code, _, err) = replay(&report, &["detect"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("schema is `gpuprobe.report/v1`"), "{err}");
    let garbage = dir.path().join("garbage.json");
    std::fs::write(
        &garbage,
        "{\"schema\": \"gpuprobe.dump/v1\", \"inputs\": 3}",
    )
    .unwrap();
    let (code, _, err) = replay(&garbage, &["detect"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not match the dump schema"), "{err}");
}

#[test]
fn a_dump_keeps_the_options_it_was_taken_with() {
    let m = Machine::from(Some("2x-r9700-gfx1201"))
        .env("PATH", "/usr/bin:/bin")
        .env(
            "GPUPROBE_HIP_PROBE",
            fake_probe("pass-gfx1201").to_str().unwrap(),
        )
        .env("FAKE_PROBE_DEVICES", "2");
    let (path, dump, _) = take(&m, &["--backend", "hip", "--no-smoke"]);
    assert_eq!(dump["options"]["smoke"], false);
    assert_eq!(dump["options"]["backend"], "hip");
    // Asked for other options, the replay still uses the dump's (its children ran with them).
    let (code, out, err) = replay(
        &path,
        &["detect", "--json", "--backend", "cuda", "--cycles", "50"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("--backend hip --no-smoke"), "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_same(
        "options",
        &comparable(dump["report"].clone()),
        &comparable(got),
    );
}
