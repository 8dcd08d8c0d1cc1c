//! Messages that agree with each other and with the data: one toolkit minimum per message (from
//! profiles/targets.toml), headers without nested or doubled phrases, every reason naming exactly
//! the quirk ids it lists, toolkit discovery only for the plan's backend, ranges for people.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gpuprobe::plan::named_quirks;
use gpuprobe::profiles::Knowledge;
use gpuprobe::version::Version;
use serde_json::Value;

/// Every `ROCm X` / `CUDA X` / `>= X` version a message names.
fn toolkit_versions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for marker in ["ROCm ", "CUDA ", ">= ", ">="] {
        for (at, _) in text.match_indices(marker) {
            let v: String = text[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let v = v.trim_end_matches('.');
            if v.starts_with(|c: char| c.is_ascii_digit()) {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// A version past the range's upper bound: the one that dropped the target, which a note may
/// name ("CUDA 13 dropped Maxwell"); it is no second minimum.
fn above_the_range(t: &gpuprobe::targets::Target, v: &str) -> bool {
    let Ok(v) = v.parse::<Version>() else {
        return false;
    };
    t.toolkit.max.is_some()
        && !t.toolkit.contains(&v)
        && t.toolkit.min.as_ref().is_none_or(|m| &v > m)
}

#[test]
fn every_toolkit_message_states_one_minimum_from_the_target_table() {
    let k = Knowledge::load().unwrap();
    let mut checked = 0;
    for t in &k.targets.target {
        let min = t.toolkit.min.as_ref().map(|v| v.to_string());
        let max = t.toolkit.max.as_ref().map(|v| v.to_string());
        let bounds: Vec<&String> = min.iter().chain(max.iter()).collect();
        let mut cases: Vec<(Version, String)> = Vec::new();
        if t.toolkit.min.is_some() {
            cases.push(("0.1".parse().unwrap(), "0.1".into()));
        }
        if let Some(m) = &t.toolkit.max {
            let above = format!("{}.0", m.major() + 1);
            cases.push((above.parse().unwrap(), above));
        }
        for (v, shown) in cases {
            let Some(msg) = t.unbuildable_with(&v) else {
                panic!(
                    "{}: {shown} is outside {}, yet buildable",
                    t.name, t.toolkit
                )
            };
            let named = toolkit_versions(&msg);
            for n in &named {
                assert!(
                    *n == shown || bounds.contains(&n) || above_the_range(t, n),
                    "{}: `{msg}` names {} {n}, which is neither the given version, a bound of the table's range {}, nor a version that dropped it",
                    t.name,
                    t.toolkit_name(),
                    t.toolkit
                );
            }
            for b in &bounds {
                assert!(
                    named.iter().filter(|n| n == b).count() <= 1,
                    "{}: `{msg}` names {b} twice",
                    t.name
                );
            }
            checked += 1;
        }
        if let Some(need) = t.toolkit_requirement() {
            let named = toolkit_versions(&need);
            for n in &named {
                assert!(
                    bounds.contains(&n) || above_the_range(t, n),
                    "{}: `{need}` names {n}, not a bound of {} nor a version that dropped it",
                    t.name,
                    t.toolkit
                );
                assert_eq!(
                    named.iter().filter(|m| *m == n).count(),
                    1,
                    "{}: `{need}` names {n} twice",
                    t.name
                );
            }
        }
    }
    assert!(checked > 10, "only {checked} messages checked");
}

#[test]
fn the_refusal_from_the_issue_names_one_minimum() {
    // Debian's hipcc (ROCm 5.2) asked to build gfx1100: one minimum, the table's.
    let out = common::gpuprobe()
        .args(["cmake-flags", "--targets", "gfx1100", "--rocm", "5.2.21153"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("cannot build gfx1100"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let mut named = toolkit_versions(line);
    named.sort();
    assert_eq!(named, ["5.2.21153", "5.4"], "{line}");
}

fn json_plan(args: &[&str]) -> Value {
    let out = common::gpuprobe()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("cmake-flags")
        .args(args)
        .args(["--format", "json", "--toolchain", "none"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_reason_names_exactly_the_quirks_it_lists() {
    let k = Knowledge::load().unwrap();
    let known: Vec<String> = k.quirks.iter().map(|q| q.id.clone()).collect();
    let h200 = "tests/fixtures/nvidia-2x-h200-driver580/detect.json";
    let cases: &[&[&str]] = &[
        &["--targets", "gfx1151,gfx120X,gfx110X", "--rocm", "7.14.0"],
        &["--targets", "gfx1100,gfx1201", "--rocm", "7.2.1"],
        &["--targets", "gfx1100,gfx1201", "--rocm", "6.4.1"],
        &[
            "--targets",
            "gfx906,gfx1030",
            "--rocm",
            "6.2",
            "--llama-build",
            "4500",
        ],
        &["--targets", "gfx1151,gfx1152", "--rocm", "7.13.0a20260601"],
        &["--targets", "gfx1151"],
        &["--targets", "gfx1100", "--os", "windows", "--rocm", "7.2.1"],
        &["--targets", "sm_90", "--cuda", "12.8"],
        &["--targets", "sm_61,sm_90", "--cuda", "13.0"],
        &[
            "--targets",
            "sm_87,sm_121",
            "--cuda",
            "12.9",
            "--llama-build",
            "7000",
        ],
        &["--machine", "gfx1201,gfx1103", "--rocm", "7.14.0"],
        &["--machine", "gfx1100,gfx1100", "--rocm", "7.2.1"],
        &[
            "--targets",
            "gfx1100,gfx120X",
            "--rocm",
            "7.14.0",
            "--from",
            "tests/fixtures/synthetic",
        ],
        &["--from", h200],
        &["--from", h200, "--force-no-vmm"],
    ];
    let mut wrong = Vec::new();
    let mut items = 0;
    for args in cases {
        let plan = json_plan(args);
        let mut check = |what: String, text: &str, listed: &Value| {
            let mut listed: Vec<String> = listed
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            listed.sort();
            let mut named = named_quirks(text, &known);
            named.sort();
            if named != listed {
                wrong.push(format!(
                    "{args:?} {what}: names {named:?}, lists {listed:?}: {text}"
                ));
            }
            // A lift command ends its sentence: nothing is appended to it.
            if let Some((_, lift)) = text.rsplit_once("; to lift it: ")
                && lift
                    .split("; ")
                    .next()
                    .is_some_and(|cmd| cmd.contains("(see "))
            {
                wrong.push(format!(
                    "{args:?} {what}: a citation after the lift command: {text}"
                ));
            }
            items += 1;
        };
        for g in plan["groups"].as_array().unwrap() {
            for f in g["flags"].as_array().unwrap() {
                check(
                    format!("flag {}", f["name"]),
                    f["reason"].as_str().unwrap(),
                    &f["quirks"],
                );
            }
            for e in g["env"].as_array().unwrap() {
                check(
                    format!("env {}", e["name"]),
                    e["reason"].as_str().unwrap(),
                    &e["quirks"],
                );
            }
        }
        for kind in ["warnings", "notes", "refusals"] {
            for n in plan[kind].as_array().unwrap() {
                check(
                    kind.to_string(),
                    n["message"].as_str().unwrap(),
                    &n["quirks"],
                );
            }
        }
    }
    assert!(items > 50, "only {items} items checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_check_build_finding_names_exactly_the_quirks_it_lists() {
    let k = Knowledge::load().unwrap();
    let known: Vec<String> = k.quirks.iter().map(|q| q.id.clone()).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut logs: Vec<_> = std::fs::read_dir(root.join("tests/fixtures/llama-logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    logs.sort();
    let mut wrong = Vec::new();
    let mut findings = 0;
    for log in &logs {
        for machine in [
            &["--no-probe"][..],
            &[
                "--from",
                "tests/fixtures/nvidia-2x-h200-driver580/detect.json",
            ],
        ] {
            let out = common::gpuprobe()
                .current_dir(root)
                .args(["check-build", "--json", "--log"])
                .arg(log)
                .args(machine)
                .output()
                .unwrap();
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            for f in doc["findings"].as_array().unwrap() {
                let text = format!(
                    "{} {} {}",
                    f["title"].as_str().unwrap_or(""),
                    f["reason"].as_str().unwrap_or(""),
                    f["fix"].as_str().unwrap_or("")
                );
                let mut named = named_quirks(&text, &known);
                named.sort();
                let mut listed: Vec<String> = f["quirks"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                listed.sort();
                if named != listed {
                    wrong.push(format!(
                        "{} {machine:?} {}: names {named:?}, lists {listed:?}",
                        log.display(),
                        f["id"]
                    ));
                }
                findings += 1;
            }
        }
    }
    assert!(findings > 20, "only {findings} findings checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A parenthesis opened inside another, or the same word twice in a row.
fn nested_or_doubled(line: &str) -> Option<String> {
    let mut depth = 0;
    for c in line.chars() {
        match c {
            '(' => {
                depth += 1;
                if depth > 1 {
                    return Some("nested parentheses".into());
                }
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || "(),;".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .find(|w| w[0] == w[1])
        .map(|w| format!("`{}` twice", w[0]))
}

#[test]
fn headers_have_no_nested_or_doubled_phrases() {
    for args in [
        &["--targets", "sm_90"][..],
        &["--targets", "sm_90", "--cuda", "12.8"],
        &[
            "--targets",
            "gfx1100",
            "--rocm",
            "7.2.1",
            "--llama-build",
            "9000",
        ],
    ] {
        let out = common::gpuprobe()
            .arg("cmake-flags")
            .args(args)
            .args(["--toolchain", "none", "--explain"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let header = stdout
            .lines()
            .find(|l| l.starts_with("# plan:"))
            .unwrap_or_else(|| panic!("{stdout}"));
        let explain = stderr
            .lines()
            .find(|l| l.starts_with("gpuprobe: plan for"))
            .unwrap_or_else(|| panic!("{stderr}"));
        for line in [header, explain] {
            if let Some(why) = nested_or_doubled(line) {
                panic!("{args:?}: {why}: {line}");
            }
            assert!(!line.contains("unknown (unknown)"), "{args:?}: {line}");
            assert_eq!(
                line.matches("11434").count() + line.matches("9000").count(),
                1,
                "{args:?}: the build number once: {line}"
            );
        }
    }
    assert!(nested_or_doubled("build 1 (latest (pass x))").is_some());
    assert!(nested_or_doubled("CUDA version unknown unknown").is_some());
}

/// A directory with fake `nvcc` and `hipconfig` that print real version banners.
fn fake_toolkits() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "nvcc",
            "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.8, V12.8.93",
        ),
        ("hipconfig", "6.4.43482-0f2d60242"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho '{text}'\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

#[test]
fn toolkits_are_looked_up_only_for_the_plans_backend() {
    if Path::new("/opt/rocm/.info/version").exists() {
        // A real ROCm install answers before PATH: this machine cannot show the difference.
        return;
    }
    let tools = fake_toolkits();
    let run = |targets: &str| {
        let out = common::gpuprobe()
            .args(["cmake-flags", "--targets", targets, "--explain"])
            .env("PATH", tools.path())
            .env_remove("ROCM_PATH")
            .env_remove("HIP_PATH")
            .env_remove("CUDA_HOME")
            .env_remove("CUDA_PATH")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{targets}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let cuda = run("sm_90");
    assert!(cuda.contains("CUDA 12.8 from"), "{cuda}");
    assert!(!cuda.contains("ROCm"), "a CUDA plan names no ROCm: {cuda}");
    let hip = run("gfx1100");
    assert!(hip.contains("ROCm 6.4.43482 from"), "{hip}");
    assert!(
        !hip.contains("CUDA 12.8"),
        "a HIP plan names no CUDA: {hip}"
    );
}

#[test]
fn ranges_are_printed_for_people() {
    let targets = common::gpuprobe()
        .args(["quirks", "targets"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&targets.stdout);
    assert!(!text.contains("\":\""), "{text}");
    assert!(!text.contains("toolkit \""), "{text}");
    assert!(text.contains("toolkit: any ROCm"), "{text}");
    assert!(text.contains("toolkit: CUDA 12.8 and later"), "{text}");
    assert!(text.contains("toolkit: CUDA 12 and earlier"), "{text}");
    let show = common::gpuprobe()
        .args(["quirks", "show", "Q3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("runtime = \"7.0:\"   # 7.0 and later"),
        "{text}"
    );
}

/// No output says a thing twice in one breath: across the snapshot corpus, no line or comment
/// paragraph repeats a phrase (`only for only for`) or a clause of its own (a lift sentence
/// once per target of a group).
#[test]
fn no_output_repeats_itself() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // A comment wrapped over several lines is one paragraph.
        let mut paragraphs: Vec<String> = Vec::new();
        let mut current = String::new();
        for line in text.lines() {
            let body = line.trim_start();
            let continued = body.starts_with("#  ") && !current.is_empty();
            if continued {
                current.push(' ');
                current.push_str(body.trim_start_matches('#').trim());
            } else {
                if !current.is_empty() {
                    paragraphs.push(std::mem::take(&mut current));
                }
                current = body.trim_start_matches('#').trim().to_string();
            }
        }
        paragraphs.push(current);
        for p in &paragraphs {
            let words: Vec<&str> = p.split_whitespace().collect();
            // A phrase said twice in a row (`only for only for`), or a condition stacked on a
            // condition (`only for only where`).
            for w in words.windows(4) {
                let alphabetic = |s: &str| s.chars().all(char::is_alphabetic);
                if (w[0] == w[2] && w[1] == w[3] && alphabetic(w[0]) && alphabetic(w[1]))
                    || (w[0] == "only" && w[2] == "only")
                {
                    problems.push(format!("{}: `{}`", path.display(), w.join(" ")));
                }
            }
            let mut seen = std::collections::BTreeSet::new();
            for clause in p
                .split("; ")
                .flat_map(|c| c.split(". "))
                .map(str::trim)
                .filter(|c| c.len() > 40)
            {
                if !seen.insert(clause) {
                    problems.push(format!("{}: said twice: {clause}", path.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
