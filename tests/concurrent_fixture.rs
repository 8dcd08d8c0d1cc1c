//! The smoke test on a busy, shared GPU, as measured: reads what scripts/concurrent-detect.sh
//! wrote on a real GPU machine and was committed as tests/fixtures/<machine>-concurrent/
//! (reports.jsonl: one line per detect, with its report; table.txt: the table of the README).
//! Every report must parse as a gpuprobe report, no smoke test may have failed, hung or crashed
//! (issue #28: 13 of 40 concurrent runs failed at `vram_check` before), and the table must be
//! what the reports say.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuprobe::report::{Report, SmokeOutcome};
use serde_json::Value;

/// The committed folders whose name ends in `-concurrent`.
fn fixture_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.ends_with("-concurrent"))
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

struct Phase {
    detects: usize,
    outcomes: BTreeMap<&'static str, usize>,
    shared: usize,
}

#[test]
fn concurrent_detects_on_a_real_gpu_have_no_smoke_failures() {
    let dirs = fixture_dirs();
    if dirs.is_empty() {
        println!(
            "skipped: no tests/fixtures/*-concurrent/ yet (run scripts/concurrent-detect.sh on a GPU machine and commit its OUTDIR there)"
        );
        return;
    }
    for dir in dirs {
        let path = dir.join("reports.jsonl");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut phases: BTreeMap<String, Phase> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let at = format!("{}:{}", path.display(), i + 1);
            let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: {e}"));
            let phase = row["phase"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no phase"));
            assert_eq!(row["exit"], 0, "{at}: detect exited {}", row["exit"]);
            let report: Report = serde_json::from_value(row["report"].clone())
                .unwrap_or_else(|e| panic!("{at}: not a gpuprobe report: {e}"));
            let p = phases.entry(phase.to_string()).or_insert(Phase {
                detects: 0,
                outcomes: BTreeMap::new(),
                shared: 0,
            });
            p.detects += 1;
            assert!(!report.devices.is_empty(), "{at}: no device");
            for d in &report.devices {
                let s = &d.smoke;
                assert!(
                    matches!(
                        s.outcome,
                        SmokeOutcome::Pass | SmokeOutcome::Partial | SmokeOutcome::NotRun
                    ),
                    "{at}: device {} smoke {}: {:?} {:?}",
                    d.index,
                    s.outcome.as_str(),
                    s.reason,
                    s.error
                );
                *p.outcomes.entry(s.outcome.as_str()).or_default() += 1;
                p.shared += usize::from(s.sharing.as_ref().is_some_and(|x| x.shared));
            }
        }
        let concurrent = phases
            .get("concurrent")
            .unwrap_or_else(|| panic!("{}: no concurrent phase", path.display()));
        assert!(
            concurrent.detects >= 40,
            "{}: {} concurrent detects",
            path.display(),
            concurrent.detects
        );
        // Eight at once: every one of them saw the others.
        assert!(
            concurrent.shared > 0,
            "{}: no concurrent detect saw another process",
            path.display()
        );
        if let Some(b) = phases.get("beside") {
            assert!(
                b.detects >= 10,
                "{}: {} detects beside the workload",
                path.display(),
                b.detects
            );
            assert!(
                b.shared > 0,
                "{}: no detect saw the workload",
                path.display()
            );
        }
        // The committed table says what the reports say.
        let table = std::fs::read_to_string(dir.join("table.txt"))
            .unwrap_or_else(|e| panic!("{}/table.txt: {e}", dir.display()));
        for (name, p) in &phases {
            let row = table
                .lines()
                .find(|l| {
                    l.starts_with("| ")
                        && l.contains(if name == "beside" {
                            "beside"
                        } else {
                            "concurrent"
                        })
                })
                .unwrap_or_else(|| panic!("table.txt: no row for {name}"));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert_eq!(cells[2], p.detects.to_string(), "table.txt row {row}");
            assert_eq!(
                cells[3],
                p.outcomes.get("pass").copied().unwrap_or(0).to_string(),
                "table.txt row {row}"
            );
            assert_eq!(cells[5], "0", "table.txt row {row}: failures");
        }
        println!(
            "{}: {:?}",
            dir.display(),
            phases
                .iter()
                .map(|(k, v)| (k, v.detects, &v.outcomes))
                .collect::<Vec<_>>()
        );
    }
}
