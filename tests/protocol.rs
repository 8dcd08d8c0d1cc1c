//! Every implementation of the child protocol (probes/PROTOCOL.md) conforms to its one Rust
//! description, `gpuprobe::children::protocol::Message`: each line the probe program printed on real
//! GPUs (raw stdout kept under tests/fixtures/, `*.jsonl`), each line the CUDA child printed in the
//! recorded dumps, and each line a probe program built here prints without a GPU, must read into
//! the type and write back as the same JSON. The reader is lenient (a mistyped field reads as
//! absent), so this is what notices a field the probe program prints that the type does not
//! have, or prints differently: it would not come back the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpuprobe::children::protocol::{Event, Message};
#[path = "common/probe_bins.rs"]
mod probe_bins;
use probe_bins::built_probes;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Reads `line` into a `Message` and back; the error says what went wrong.
fn round_trip(line: &Value) -> Result<Message, String> {
    let m: Message =
        serde_json::from_value(line.clone()).map_err(|e| format!("does not read: {e}"))?;
    if m.event == Event::Unknown {
        return Err("an event the protocol does not have".into());
    }
    let back = serde_json::to_value(&m).map_err(|e| format!("does not write: {e}"))?;
    if &back != line {
        return Err(format!("writes back as {back}"));
    }
    Ok(m)
}

/// Checks every line of one stream; returns the events read, or every failure with its line.
fn check_stream(what: &str, lines: &[Value]) -> Result<Vec<Event>, Vec<String>> {
    let mut events = Vec::new();
    let mut bad = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        match round_trip(line) {
            Ok(m) => events.push(m.event),
            Err(e) => bad.push(format!("{what}:{}: {e}\n    {line}", n + 1)),
        }
    }
    if bad.is_empty() { Ok(events) } else { Err(bad) }
}

fn jsonl_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        // `*-concurrent/` holds scripts/concurrent-detect.sh's JSON lines (one detect report a
        // line, read by tests/concurrent_fixture.rs), not the probe program's protocol.
        let concurrent = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with("-concurrent"));
        if p.is_dir() && !concurrent {
            jsonl_files(&p, found);
        } else if p.is_file() && p.extension().is_some_and(|x| x == "jsonl") {
            found.push(p);
        }
    }
}

fn parse_lines(path: &Path, text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {l}", path.display(), n + 1))
        })
        .collect()
}

fn probe_name(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|e| match e {
        Event::Hello(h) => h.probe.as_deref(),
        _ => None,
    })
}

#[test]
fn the_probe_programs_recorded_output_reads_into_the_protocol_types_and_back() {
    let mut files = Vec::new();
    for dir in ["tests/fixtures", "tests/real-reports"] {
        jsonl_files(&root().join(dir), &mut files);
    }
    files.sort();
    let mut failures = Vec::new();
    let mut lines = 0;
    let mut kinds = std::collections::HashSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let values = parse_lines(f, &text);
        lines += values.len();
        let name = f.strip_prefix(root()).unwrap_or(f).display().to_string();
        match check_stream(&name, &values) {
            Ok(events) => {
                if !matches!(events.first(), Some(Event::Plan(_))) {
                    assert_eq!(
                        probe_name(&events),
                        Some("gpuprobe-probe"),
                        "{name}: not the probe program's output (its hello says otherwise)"
                    );
                    assert!(
                        matches!(events.last(), Some(Event::Done(_))),
                        "{name}: the stream does not end in done"
                    );
                }
                kinds.extend(events.iter().map(std::mem::discriminant));
            }
            Err(mut bad) => failures.append(&mut bad),
        }
    }
    assert!(
        failures.is_empty(),
        "{} line(s) of the probe program's output do not conform:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The H200 captures of tests/fixtures/nvidia-h200-driver580-smoke-v2: a pass and two faults.
    assert!(files.len() >= 3, "recorded outputs found: {files:?}");
    assert!(lines >= 2000, "only {lines} lines");
    assert!(kinds.len() >= 6, "only {} kinds of event", kinds.len());
}

#[test]
fn a_line_that_does_not_conform_fails_the_round_trip() {
    let good: Value = serde_json::from_str(
        r#"{"event":"peers_done","devices":2,"contexts_ms":1.500,"elapsed_ms":2.000}"#,
    )
    .unwrap();
    assert!(round_trip(&good).is_ok());
    for (bad, why) in [
        (
            r#"{"event":"peers_done","devices":2,"contexts_ms":1.5,"elapsed_ms":2.0,"extra":1}"#,
            "a field the type lacks",
        ),
        (
            r#"{"event":"peers_done","devices":"2","contexts_ms":1.5,"elapsed_ms":2.0}"#,
            "a field of another type",
        ),
        (
            r#"{"event":"peers_done","devices":2,"elapsed_ms":2.0}"#,
            "a field always printed, missing",
        ),
        (
            r#"{"event":"peers_finished","devices":2}"#,
            "an unknown event",
        ),
        (
            r#"{"event":"smoke","outcome":"passed","cycles":200}"#,
            "an unknown outcome",
        ),
        (
            r#"{"event":"hello","protocol":2,"probe":"gpuprobe-probe","backend":"hip","runtime_version":null,"driver_version":null,"device_count":0,"init_ms":1.0,"error":{"api":"x","code":1}}"#,
            "an error without name and message",
        ),
    ] {
        let v: Value = serde_json::from_str(bad).unwrap();
        assert!(round_trip(&v).is_err(), "{why} passed: {bad}");
    }
}

#[test]
fn the_cuda_childs_recorded_lines_are_what_the_protocol_types_write() {
    // Dumps hold the children's raw lines as they printed them; replaying them is tests/dumps.rs.
    let dir = root().join("tests/fixtures/dumps");
    let mut streams = 0;
    let mut failures = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let dump: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let Some(children) = dump["inputs"]["children"].as_object() else {
            continue;
        };
        for (key, child) in children {
            let Some(events) = child["events"].as_array() else {
                continue;
            };
            let name = format!("{} {key}", p.file_name().unwrap().to_string_lossy());
            if let Err(mut bad) = check_stream(&name, events) {
                failures.append(&mut bad);
            }
            streams += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} recorded line(s) do not conform:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(streams >= 4, "only {streams} recorded streams");
}

/// The probe's stdout, killed after a minute (a GPU machine runs the smoke test in about one
/// second; without a GPU it answers at once).
fn run_probe(probe: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(probe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", probe.display()));
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} did not finish within 60 s", probe.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, reader.join().unwrap_or_default())
}

#[test]
fn what_a_probe_program_built_here_prints_reads_into_the_protocol_types_and_back() {
    let probes = built_probes();
    if probes.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no probe program built: scripts/test.sh builds it before cargo test"
        );
        eprintln!(
            "skipped: no built probe program (scripts/build-probe.sh; GPUPROBE_PROBE_BIN names one)"
        );
        return;
    }
    let runs: &[&[&str]] = &[
        &["--list"],
        &["--device", "0", "--cycles", "1"],
        &["--device", "0", "--no-smoke"],
        &["--device", "7", "--no-smoke"],
        &["--peers"],
        &["--plan", "2097152", "150000000000"],
    ];
    let mut failures = Vec::new();
    for probe in &probes {
        for args in runs {
            let (code, out) = run_probe(probe, args);
            let what = format!("{} {}", probe.display(), args.join(" "));
            if code == Some(2) && args[0] == "--plan" && std::env::var_os("CI").is_none() {
                eprintln!("skipped: {what}: built from a checkout that predates --plan");
                continue;
            }
            assert_eq!(code, Some(0), "{what}: exit status\n{out}");
            let values = parse_lines(probe, &out);
            match check_stream(&what, &values) {
                Ok(events) => {
                    assert!(!events.is_empty(), "{what}: printed nothing");
                    if args[0] != "--plan" {
                        assert!(
                            matches!(events.first(), Some(Event::Hello(_))),
                            "{what}: does not start with hello"
                        );
                        assert!(
                            matches!(events.last(), Some(Event::Done(_))),
                            "{what}: does not end with done"
                        );
                    }
                    eprintln!("{what}: {} lines conform", events.len());
                }
                Err(mut bad) => failures.append(&mut bad),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the probe program's output does not conform:\n{}",
        failures.join("\n")
    );
}
