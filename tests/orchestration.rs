//! Probing N GPUs costs about as much as probing one (issue #13): the devices are counted without
//! a driver, every device child (and the peer child) starts at once, a hang costs one deadline,
//! not one per device, and the report says where the time went.
//!
//! Eight devices of a FAKE `libcuda.so.1` (tests/fake_cuda/fake_libcuda.c) whose cuInit takes
//! FAKE_CUDA_INIT_MS: children that ran one after another would take eight times as long.

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

#[test]
fn eight_devices_start_at_once_and_report_in_order() {
    let m = machine("ok", 8).env("FAKE_CUDA_INIT_MS", INIT_MS.to_string());
    let started = Instant::now();
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "30"]);
    let took = started.elapsed();
    let run = backend_run(&report);
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
fn the_peer_child_runs_alongside_the_device_children() {
    let m = machine("ok", 8)
        .env("FAKE_CUDA_INIT_MS", INIT_MS.to_string())
        .env("FAKE_CUDA_FREE_MIB", "64");
    let (report, _) = m.detect(&["--cycles", "1", "--timeout", "120"]);
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
    let m = machine("hang_context", 8)
        .env("FAKE_CUDA_HANG_DEVICE", "5")
        .env("FAKE_CUDA_INIT_MS", "200");
    let started = Instant::now();
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "3"]);
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
fn without_driver_files_the_first_hello_says_how_many_more_to_start() {
    let m = FakeMachine::new("ok").env("FAKE_CUDA_DEVICES", "3");
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "30"]);
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
fn children_for_devices_the_driver_does_not_show_are_dropped() {
    // /proc lists three GPUs, the driver shows two (one is in a bad state, or hidden).
    let m = machine("ok", 3).env("FAKE_CUDA_DEVICES", "2");
    let (report, _) = m.detect(&["--no-smoke", "--timeout", "30"]);
    assert_eq!(backend_run(&report)["counted"], 3);
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    assert!(ds.iter().all(|d| d["source"] == "driver"));
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
        "driver init",
        "context",
        "queries",
        "smoke",
        "counted 2 devices from procfs",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
}
