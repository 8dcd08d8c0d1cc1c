//! Probing N GPUs costs about as much as probing one (issue #13): by default one shared CUDA
//! child initialises the driver once and probes every device from its own thread; with
//! `--isolate` the devices are counted without a driver and every device child (and the peer
//! child) starts at once. Either way a hang costs one deadline, not one per device, what a device
//! finished is kept, and the report says where the time went. A crash of the shared child costs
//! the devices that had not finished only a re-run, each in a child of its own.
//!
//! Up to eight devices of a FAKE `libcuda.so.1` (tests/fake_cuda/fake_libcuda.c) whose cuInit
//! takes FAKE_CUDA_INIT_MS: children that ran one after another would take eight times as long.

#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;

use std::time::{Duration, Instant};

use fake_cuda::{FakeMachine, OPEN_MODULE};
use serde_json::Value;

const INIT_MS: f64 = 400.0;

/// A fake machine with `n` GPUs the kernel module lists under /proc.
fn machine(scenario: &str, n: u32) -> FakeMachine {
    let mut m = FakeMachine::new(scenario)
        .with_proc_nvidia(OPEN_MODULE, "0000:19:00.0", "Fake GPU")
        .env("FAKE_CUDA_DEVICES", n.to_string());
    for i in 1..n {
        m = m.with_proc_gpu(&format!("0000:{:02x}:00.0", 0x19 + i), "Fake GPU");
    }
    m
}

fn devices(report: &Value) -> &Vec<Value> {
    report["devices"].as_array().expect("devices")
}

fn timing(d: &Value, k: &str) -> f64 {
    d["timings"][k]
        .as_f64()
        .unwrap_or_else(|| panic!("no timing {k}: {d:#}"))
}

fn backend_run(report: &Value) -> &Value {
    &report["probe_run"]["backends"][0]
}

/// Every child started before any of them could have finished: no serial phase.
fn assert_started_together(report: &Value) {
    let ds = devices(report);
    let last_start = ds.iter().map(|d| timing(d, "start_ms")).fold(0.0, f64::max);
    let first_end = ds
        .iter()
        .map(|d| timing(d, "start_ms") + timing(d, "wall_ms"))
        .fold(f64::MAX, f64::min);
    assert!(
        last_start < first_end && last_start < INIT_MS,
        "children did not start together: last start {last_start:.1} ms, first end {first_end:.1} ms"
    );
}

/// The two ways of running the CUDA children: the default (shared) and `--isolate`.
const MODES: [(&str, &[&str]); 2] = [("shared", &[]), ("isolated", &["--isolate"])];

fn with<'a>(mode: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
    mode.iter().chain(args).copied().collect()
}

#[test]
fn eight_devices_start_at_once_and_report_in_order() {
    for (mode, flag) in MODES {
        eight_devices(mode, flag);
    }
}

fn eight_devices(mode: &str, flag: &[&str]) {
    let m = machine("ok", 8).env("FAKE_CUDA_INIT_MS", INIT_MS.to_string());
    let started = Instant::now();
    let (report, _) = m.detect(&with(flag, &["--no-smoke", "--timeout", "30"]));
    let took = started.elapsed();
    let run = backend_run(&report);
    assert_eq!(run["mode"], mode, "{run:#}");
    assert_eq!(run["shared_crash"], Value::Null);
    assert_eq!(run["count_source"], "procfs", "{run:#}");
    assert_eq!(run["counted"], 8);
    let ds = devices(&report);
    assert_eq!(ds.len(), 8, "{report:#}");
    for (i, d) in ds.iter().enumerate() {
        assert_eq!(d["index"], i as u64, "devices in index order");
        assert_eq!(d["pci_bus_id"], format!("0000:{:02x}:00.0", 0x19 + i));
        assert_eq!(d["smoke"]["outcome"], "not-run");
        assert!(timing(d, "driver_init_ms") >= INIT_MS, "{d:#}");
        assert!(timing(d, "wall_ms") >= INIT_MS);
    }
    assert_started_together(&report);
    // Serially this would take 8 x 400 ms.
    assert!(
        took < Duration::from_millis((4.0 * INIT_MS) as u64),
        "eight children took {took:?}"
    );
    let wall = report["probe_run"]["wall_ms"].as_f64().unwrap();
    assert!(wall < 4.0 * INIT_MS, "{wall}");
    // No smoke test, no peer child.
    assert_eq!(run["peer"], Value::Null);
    assert_eq!(report["peers"], serde_json::json!([]));
}

#[test]
fn isolated_the_peer_child_runs_alongside_the_device_children() {
    let m = machine("ok", 8)
        .env("FAKE_CUDA_INIT_MS", INIT_MS.to_string())
        .env("FAKE_CUDA_FREE_MIB", "64");
    let (report, _) = m.detect(&["--isolate", "--cycles", "1", "--timeout", "120"]);
    assert_eq!(backend_run(&report)["mode"], "isolated");
    assert_started_together(&report);
    let ds = devices(&report);
    assert_eq!(ds.len(), 8);
    for d in ds {
        assert_eq!(d["smoke"]["outcome"], "partial", "{d:#}");
        assert!(timing(d, "smoke_ms") > 0.0);
    }
    let peer = &backend_run(&report)["peer"];
    let peer_start = peer["start_ms"].as_f64().expect("peer child timings");
    let first_end = ds
        .iter()
        .map(|d| timing(d, "start_ms") + timing(d, "wall_ms"))
        .fold(f64::MAX, f64::min);
    assert!(
        peer_start < first_end && peer_start < INIT_MS,
        "peer child started at {peer_start:.1} ms, after a device child ended ({first_end:.1} ms)"
    );
    assert!(peer["contexts_ms"].as_f64().is_some(), "{peer:#}");
    // Every pair once, in order, each with its ordinary copy and the VMM reads both ways.
    let peers = report["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 28, "{report:#}");
    let pairs: Vec<(u64, u64)> = peers
        .iter()
        .map(|p| (p["from"].as_u64().unwrap(), p["to"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(u64, u64)> = (0..8u64)
        .flat_map(|a| ((a + 1)..8).map(move |b| (a, b)))
        .collect();
    assert_eq!(pairs, expected);
    for p in peers {
        assert_eq!(p["outcome"], "pass", "{p:#}");
    }
    let vmm = peer["pairs"].as_array().unwrap();
    assert_eq!(vmm.len(), 28);
    assert!(vmm.iter().all(|v| v["read_ok"] == true), "{peer:#}");
}

#[test]
fn one_hanging_device_costs_one_deadline_and_the_others_report() {
    for (mode, flag) in MODES {
        one_hanging_device(mode, flag);
    }
}

fn one_hanging_device(mode: &str, flag: &[&str]) {
    let m = machine("hang_context", 8)
        .env("FAKE_CUDA_HANG_DEVICE", "5")
        .env("FAKE_CUDA_INIT_MS", "200");
    let started = Instant::now();
    let (report, _) = m.detect(&with(flag, &["--no-smoke", "--timeout", "3"]));
    assert_eq!(backend_run(&report)["mode"], mode);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(
        took < Duration::from_secs(10),
        "one deadline, not one per device: {took:?}"
    );
    assert_eq!(report["backends"][0]["status"], "ok");
    let ds = devices(&report);
    assert_eq!(ds.len(), 8, "{report:#}");
    for (i, d) in ds.iter().enumerate() {
        if i == 5 {
            assert_eq!(d["smoke"]["outcome"], "hang", "{d:#}");
            // Its own last stage, whatever the other devices (or threads) were doing.
            assert_eq!(d["smoke"]["stage"], "context", "{d:#}");
            assert_eq!(d["source"], "procfs", "known from /proc only: {d:#}");
            assert!(timing(d, "wall_ms") >= 3000.0);
        } else {
            assert_eq!(d["source"], "driver", "{d:#}");
            assert_eq!(d["smoke"]["outcome"], "not-run");
            assert!(timing(d, "wall_ms") < 3000.0, "{d:#}");
        }
    }
}

#[test]
fn isolated_without_driver_files_the_first_hello_says_how_many_more_to_start() {
    let m = FakeMachine::new("ok").env("FAKE_CUDA_DEVICES", "3");
    let (report, _) = m.detect(&["--isolate", "--no-smoke", "--timeout", "30"]);
    let run = backend_run(&report);
    assert_eq!(run["count_source"], "hello", "{run:#}");
    assert_eq!(run["counted"], 0);
    let ds = devices(&report);
    assert_eq!(ds.len(), 3, "{report:#}");
    let first = &ds[0];
    for d in &ds[1..] {
        // Started once device 0's child had said hello.
        assert!(
            timing(d, "start_ms") >= timing(first, "start_ms") + timing(first, "driver_init_ms"),
            "{report:#}"
        );
    }
}

#[test]
fn shared_without_driver_files_one_child_probes_what_the_driver_shows() {
    let m = FakeMachine::new("ok")
        .env("FAKE_CUDA_DEVICES", "3")
        .env("FAKE_CUDA_INIT_MS", INIT_MS.to_string());
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "30"]);
    let run = backend_run(&report);
    assert_eq!(run["count_source"], "hello", "{run:#}");
    assert_eq!(run["mode"], "shared");
    let ds = devices(&report);
    assert_eq!(ds.len(), 3, "{report:#}");
    // No wait for a first hello: one start, one driver initialisation.
    for d in ds {
        assert_eq!(
            timing(d, "start_ms"),
            timing(&ds[0], "start_ms"),
            "{report:#}"
        );
        assert!(timing(d, "driver_init_ms") >= INIT_MS);
    }
    let wall = report["probe_run"]["wall_ms"].as_f64().unwrap();
    assert!(wall < 2.0 * INIT_MS, "{wall}");
}

#[test]
fn children_for_devices_the_driver_does_not_show_are_dropped() {
    // /proc lists three GPUs, the driver shows two (one is in a bad state, or hidden).
    for (mode, flag) in MODES {
        let m = machine("ok", 3).env("FAKE_CUDA_DEVICES", "2");
        let (report, _) = m.detect(&with(flag, &["--no-smoke", "--timeout", "30"]));
        assert_eq!(backend_run(&report)["counted"], 3);
        assert_eq!(backend_run(&report)["mode"], mode);
        let ds = devices(&report);
        assert_eq!(ds.len(), 2, "{report:#}");
        assert!(ds.iter().all(|d| d["source"] == "driver"));
    }
}

#[test]
fn visible_devices_limit_the_children_started() {
    // What the driver does with CUDA_VISIBLE_DEVICES=1 on eight GPUs: one device, ordinal 0.
    let m = machine("ok", 8)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .env("FAKE_CUDA_DEVICES", "1");
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "30"]);
    assert_eq!(backend_run(&report)["counted"], 1);
    assert_eq!(devices(&report).len(), 1, "{report:#}");
}

#[test]
fn verbose_detect_shows_where_the_time_went() {
    let m = machine("ok", 2).env("FAKE_CUDA_INIT_MS", "50");
    let (code, stdout, stderr) = m.run(&[
        "detect",
        "--backend",
        "cuda",
        "--no-smoke",
        "--timeout",
        "30",
        "--verbose",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for needle in [
        "timings (ms)",
        "one shared child, a thread per device",
        "driver init",
        "context",
        "queries",
        "smoke",
        "counted 2 devices from procfs",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
}

/// The probe children a detect ran, by name, from its dump.
fn children_run(m: &FakeMachine, args: &[&str]) -> (Value, Vec<String>) {
    let dump = m.root.path().join("dump.json");
    let mut full = args.to_vec();
    full.extend(["--dump", dump.to_str().unwrap()]);
    let (report, _) = m.detect(&full);
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    let keys = d["inputs"]["children"]
        .as_object()
        .expect("children in the dump")
        .keys()
        .cloned()
        .collect();
    (report, keys)
}

#[test]
fn two_gpus_in_one_shared_child_pass_and_check_their_pair() {
    let m = machine("ok", 2);
    let (report, children) = children_run(&m, &["--cycles", "3", "--timeout", "60"]);
    assert_eq!(
        children,
        ["cuda shared"],
        "one process for both GPUs and the pair"
    );
    let run = backend_run(&report);
    assert_eq!(run["mode"], "shared", "{run:#}");
    assert_eq!(report["backends"][0]["status"], "ok");
    assert_eq!(report["backends"][0]["detail"], Value::Null);
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    for (i, d) in ds.iter().enumerate() {
        assert_eq!(d["index"], i as u64);
        assert_eq!(d["source"], "driver");
        assert_eq!(d["smoke"]["outcome"], "partial", "{d:#}");
        assert_eq!(d["smoke"]["cycles_done"], 3);
        assert!(timing(d, "smoke_ms") > 0.0);
        assert!(timing(d, "context_ms") >= 0.0);
    }
    let peers = report["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{report:#}");
    assert_eq!((&peers[0]["from"], &peers[0]["to"]), (&0.into(), &1.into()));
    assert_eq!(peers[0]["outcome"], "pass", "{:#}", peers[0]);
    assert_eq!(peers[0]["copy_ok"], true);
    let peer = &run["peer"];
    assert_eq!(
        peer["contexts_ms"],
        Value::Null,
        "contexts reused: {peer:#}"
    );
    assert_eq!(peer["pairs"][0]["read_ok"], true, "{peer:#}");
    // A pair is checked once both of its devices are done.
    let both_done = ds
        .iter()
        .map(|d| timing(d, "start_ms") + timing(d, "wall_ms"))
        .fold(0.0, f64::max);
    assert!(
        peer["start_ms"].as_f64().unwrap() >= both_done - 1.0,
        "{report:#}"
    );
}

#[test]
fn eight_gpus_in_one_shared_child_check_all_28_pairs() {
    let m = machine("ok", 8)
        .env("FAKE_CUDA_INIT_MS", INIT_MS.to_string())
        .env("FAKE_CUDA_FREE_MIB", "64");
    let (report, children) = children_run(&m, &["--cycles", "1", "--timeout", "120"]);
    assert_eq!(children, ["cuda shared"]);
    let ds = devices(&report);
    assert_eq!(ds.len(), 8, "{report:#}");
    for d in ds {
        assert_eq!(d["smoke"]["outcome"], "partial", "{d:#}");
        // One driver initialisation for all: every device waited for the same one.
        assert!(timing(d, "driver_init_ms") >= INIT_MS);
        assert!(timing(d, "driver_init_ms") < 2.0 * INIT_MS, "{d:#}");
    }
    assert_started_together(&report);
    let peers = report["peers"].as_array().unwrap();
    let pairs: Vec<(u64, u64)> = peers
        .iter()
        .map(|p| (p["from"].as_u64().unwrap(), p["to"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(u64, u64)> = (0..8u64)
        .flat_map(|a| ((a + 1)..8).map(move |b| (a, b)))
        .collect();
    assert_eq!(pairs, expected, "every pair once, reported in order");
    assert!(peers.iter().all(|p| p["outcome"] == "pass"), "{report:#}");
    let vmm = backend_run(&report)["peer"]["pairs"].as_array().unwrap();
    assert_eq!(vmm.len(), 28);
    assert!(vmm.iter().all(|v| v["read_ok"] == true));
}

#[test]
fn a_device_hanging_in_the_shared_child_is_a_hang_and_the_other_keeps_its_result() {
    let m = machine("hang_verify", 2).env("FAKE_CUDA_HANG_DEVICE", "1");
    let started = Instant::now();
    let (report, _) = m.detect(&["--cycles", "3", "--timeout", "3"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "one deadline: {took:?}");
    let run = backend_run(&report);
    assert_eq!(run["mode"], "shared");
    // Killed at the deadline: nothing is re-run.
    assert_eq!(run["shared_crash"], Value::Null, "{run:#}");
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    assert_eq!(ds[0]["smoke"]["outcome"], "partial", "{:#}", ds[0]);
    assert_eq!(ds[0]["smoke"]["cycles_done"], 3);
    assert!(timing(&ds[0], "wall_ms") < 3000.0);
    let hung = &ds[1]["smoke"];
    assert_eq!(hung["outcome"], "hang", "{hung:#}");
    assert_eq!(hung["stage"], "sync", "its own last stage: {hung:#}");
    assert_eq!(ds[1]["source"], "driver", "its facts came before the hang");
    assert!(timing(&ds[1], "wall_ms") >= 3000.0);
    let p = &report["peers"][0];
    assert_eq!(p["outcome"], "hang", "{p:#}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("killed at the deadline"),
        "{p:#}"
    );
}

#[test]
fn a_crash_of_the_shared_child_reruns_the_unfinished_devices_isolated() {
    let m = machine("crash_map", 3).env("FAKE_CUDA_CRASH_DEVICE", "1");
    let (report, children) = children_run(&m, &["--cycles", "3", "--timeout", "60"]);
    let run = backend_run(&report);
    assert_eq!(run["mode"], "shared");
    let crash = &run["shared_crash"];
    assert!(
        crash["how"].as_str().unwrap().contains("SIGSEGV (11)"),
        "{run:#}"
    );
    let rerun: Vec<u64> = crash["rerun_isolated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(rerun.contains(&1), "{run:#}");
    for i in &rerun {
        assert!(
            children.contains(&format!("cuda device {i}")),
            "{children:?}"
        );
    }
    let b = &report["backends"][0];
    assert_eq!(b["status"], "ok", "{b:#}");
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains("shared CUDA probe died with SIGSEGV")
            && detail.contains("each in a process of its own"),
        "{detail}"
    );
    let ds = devices(&report);
    assert_eq!(ds.len(), 3, "{report:#}");
    // The faulty GPU crashes in its own process too; the others get their results.
    assert_eq!(ds[1]["smoke"]["outcome"], "crash", "{:#}", ds[1]);
    assert_eq!(ds[1]["smoke"]["stage"], "map");
    for i in [0, 2] {
        assert_eq!(ds[i]["smoke"]["outcome"], "partial", "{:#}", ds[i]);
        assert_eq!(ds[i]["smoke"]["cycles_done"], 3);
    }
    // The pair of the two healthy devices is checked again in a peer child of its own (limited to
    // them); the faulty GPU's pairs are reported as not checked, not as passes.
    assert!(children.contains(&"cuda peers".to_string()), "{children:?}");
    let peers = report["peers"].as_array().unwrap();
    let pairs: Vec<(u64, u64)> = peers
        .iter()
        .map(|p| (p["from"].as_u64().unwrap(), p["to"].as_u64().unwrap()))
        .collect();
    assert_eq!(pairs, [(0, 1), (0, 2), (1, 2)], "{report:#}");
    for p in peers {
        if p["from"] == 1 || p["to"] == 1 {
            assert_eq!(p["outcome"], "crash", "{p:#}");
            assert!(
                p["reason"].as_str().unwrap().contains("not checked"),
                "{p:#}"
            );
        } else {
            assert_eq!(p["outcome"], "pass", "{p:#}");
        }
    }
}

#[test]
fn isolate_runs_one_child_per_device_and_a_peer_child() {
    let m = machine("ok", 2);
    let (report, children) = children_run(&m, &["--isolate", "--cycles", "3", "--timeout", "60"]);
    assert_eq!(children, ["cuda device 0", "cuda device 1", "cuda peers"]);
    assert_eq!(backend_run(&report)["mode"], "isolated");
    assert_eq!(report["peers"][0]["outcome"], "pass", "{report:#}");
    assert!(
        backend_run(&report)["peer"]["contexts_ms"]
            .as_f64()
            .is_some()
    );
    // The same through the environment.
    let m = machine("ok", 2).env("GPUPROBE_ISOLATE", "1");
    let (_, children) = children_run(&m, &["--no-smoke", "--timeout", "60"]);
    assert_eq!(children, ["cuda device 0", "cuda device 1"]);
}

#[test]
fn a_shared_dump_replays_to_the_same_devices_and_pairs() {
    let m = machine("ok", 2);
    let dump = m.root.path().join("dump.json");
    let (live, _) = m.detect(&[
        "--cycles",
        "3",
        "--timeout",
        "60",
        "--dump",
        dump.to_str().unwrap(),
    ]);
    let replay = FakeMachine::new("init_segv").env("GPUPROBE_REPLAY", dump.to_str().unwrap());
    let (again, _) = replay.detect(&[]);
    for k in ["devices", "peers"] {
        let strip = |v: &Value| {
            let mut v = v.clone();
            for d in v.as_array_mut().unwrap() {
                d.as_object_mut().unwrap().remove("timings");
            }
            v
        };
        assert_eq!(strip(&live[k]), strip(&again[k]), "{k}");
    }
    assert_eq!(backend_run(&again)["mode"], "shared");
}
