//! Fuzzing with a fixed budget, run by `cargo test` (so in CI): hostile and malformed report JSON,
//! quirk TOML, llama.cpp logs and CMake text must never make gpuprobe panic, and whatever gets
//! through validation must come out inert in every format. Generated inputs mix arbitrary
//! Unicode with the pieces that break formats (newlines, quotes, `$(`, `${{`, escape sequences,
//! heredoc delimiters). The budgets are fixed (no environment variable changes them) and the
//! whole file runs in well under a minute unoptimised.

#![cfg(unix)]

use std::sync::OnceLock;

use gpuprobe::llama::LlamaTarget;
use gpuprobe::neutral;
use gpuprobe::plan::{Mode, Plan};
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::Report;
use gpuprobe::resolve::{Devices, Request, resolve};
use proptest::prelude::*;
use serde_json::Value;

const REPORT: &str = include_str!("fixtures/nvidia-2x-h200-driver580/detect.json");
const LOGS: &[&str] = &[
    include_str!("fixtures/llama-logs/h200-b11434-sdist-server-lv4.txt"),
    include_str!("fixtures/llama-logs/lemonade-87-r9700-no-vmm.txt"),
    include_str!("fixtures/llama-logs/ggml-ci-v100-b968.txt"),
    include_str!("fixtures/llama-logs/rocmlibs-50-gfx1103-windows-b6367.txt"),
];

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    }
}

fn knowledge() -> &'static Knowledge {
    static K: OnceLock<Knowledge> = OnceLock::new();
    K.get_or_init(|| Knowledge::bundled().expect("bundled profiles load"))
}

/// Pieces that end lines, quotes, comments, heredocs, expressions or terminal state.
const HOSTILE: &[&str] = &[
    "\n",
    "\r",
    "\r\n",
    "\t",
    "\0",
    "'",
    "\"",
    "\\",
    "`",
    "$(",
    ")",
    "${",
    "}",
    "${{",
    "}}",
    "#",
    ";",
    "|",
    "&",
    "*",
    "?",
    "[",
    " ",
    "=",
    "<<",
    "GPUPROBE_EOF",
    "::warning::",
    "%0A",
    "%",
    "\u{1b}[2J",
    "\u{1b}]0;t\u{7}",
    "\u{9b}",
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\u{202e}",
    "\u{feff}",
    "-P",
    "-C",
    "sm_90",
    "gfx1201",
    "GGML_HIP_NO_VMM",
    "ON",
];

fn hostile() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(HOSTILE).prop_map(str::to_string),
            2 => "[a-zA-Z0-9_.-]{0,6}",
            1 => any::<char>().prop_map(String::from),
        ],
        0..10,
    )
    .prop_map(|parts| parts.concat())
}

// ---- the neutralisers ---------------------------------------------------------------------------

/// The runner's reading of a `$GITHUB_OUTPUT` file: (key, value) pairs.
fn github_entries(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        match (line.find('='), line.find("<<")) {
            (Some(eq), h) if h.is_none_or(|h| eq < h) => {
                out.push((line[..eq].to_string(), line[eq + 1..].to_string()));
            }
            (_, Some(h)) => {
                let delim = &line[h + 2..];
                let mut value = Vec::new();
                for l in lines.by_ref() {
                    if l == delim {
                        break;
                    }
                    value.push(l);
                }
                out.push((line[..h].to_string(), value.join("\n")));
            }
            _ => out.push(("<malformed>".into(), line.to_string())),
        }
    }
    out
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn neutralised_text_keeps_its_place(s in hostile()) {
        prop_assert!(!neutral::inline(&s).chars().any(neutral::is_hostile));
        prop_assert!(!neutral::comment(&s).contains('\n'));
        prop_assert!(!neutral::terminal(&s)
            .chars()
            .any(|c| c != '\n' && c != '\t' && neutral::is_hostile(c)));

        let w = neutral::sh_word(&s);
        prop_assert!(!w.chars().any(neutral::is_hostile));
        if !neutral::is_plain_word(&w) {
            // One single-quoted word: quotes only as `'\''` inside.
            prop_assert!(w.starts_with('\'') && w.ends_with('\'') && w.len() >= 2);
            prop_assert!(!w[1..w.len() - 1].replace(r"'\''", "").contains('\''));
        }

        let y = neutral::yaml_quoted(&s);
        prop_assert!(y.starts_with('"') && y.ends_with('"') && y.len() >= 2);
        prop_assert!(!y.chars().any(neutral::is_hostile));
        prop_assert!(!y.replace("${{ '${{' }}", "").contains("${{"));
        let body = &y[1..y.len() - 1];
        prop_assert!(!body.replace("\\\\", "").replace("\\\"", "").contains('"'));
        prop_assert!(!neutral::yaml_text(&s).replace("${{ '${{' }}", "").contains("${{"));

        let line = neutral::github_line("cmake-args", &s);
        prop_assert_eq!(github_entries(&line).len(), 1);
        let block = neutral::github_block("env", &s);
        let entries = github_entries(&block);
        prop_assert_eq!(entries.len(), 1);
        prop_assert_eq!(&entries[0].1, &neutral::terminal(&s).into_owned());

        let a = neutral::annotation(&s);
        prop_assert!(!a.contains('\n') && !a.contains('\r'));
        let md = neutral::markdown(&s);
        prop_assert!(!md.chars().any(neutral::is_hostile));
        prop_assert!(!md.replace("\\\\", "").replace("\\|", "").contains('|'));
    }
}

// ---- plans with hostile text, through every emitter ----------------------------------------------

fn llama() -> LlamaTarget {
    LlamaTarget {
        build: Some(11434),
        source: "fuzz".into(),
        checkout: None,
    }
}

fn request(devices: Devices<'_>) -> Request<'_> {
    Request {
        devices,
        backend: None,
        llama: llama(),
        rocm: None,
        cuda: None,
        rocm_source: "fuzz".into(),
        cuda_source: "fuzz".into(),
        os: Os::Linux,
        env_set: Vec::new(),
        force_no_vmm: false,
        evidence: gpuprobe::evidence::Evidence::default(),
    }
}

fn declared_plan(targets: &str) -> Plan {
    let k = knowledge();
    resolve(
        k,
        &request(Devices::Declared(k.targets.expand(targets).unwrap())),
    )
    .unwrap()
}

/// Lines gpuprobe itself writes into a shell fragment; everything else must be a comment.
fn is_own_shell_line(l: &str) -> bool {
    let t = l.trim_start();
    l.is_empty()
        || t.starts_with('#')
        || [
            "(",
            "set -e",
            "src=\"${LLAMA_CPP_DIR:-.}\"",
            "out=\"${LLAMA_BUILD_DIR:-build}\"",
            "if [ -z \"${HIPCXX:-}\" ] && command -v hipconfig >/dev/null 2>&1; then",
            "HIPCXX=\"$(hipconfig -l)/clang\"; export HIPCXX",
            "fi",
            "set --",
            "cmake -S \"$src\" -B \"$out\" \"$@\" ${LLAMA_CMAKE_ARGS:-}",
            "jobs=\"${LLAMA_BUILD_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)}\"",
            "if [ -n \"${LLAMA_BUILD_TARGETS:-}\" ]; then",
            "cmake --build \"$out\" --config Release -j \"$jobs\" --target $LLAMA_BUILD_TARGETS",
            "else",
            "cmake --build \"$out\" --config Release -j \"$jobs\"",
            ") || exit $?",
        ]
        .contains(&t)
        || t.strip_prefix("set -- \"$@\" ").is_some_and(is_one_word)
        || t.strip_prefix("out=\"${LLAMA_BUILD_DIR:-build}\"")
            .is_some_and(is_one_word)
}

/// A plain word or one single-quoted word.
fn is_one_word(w: &str) -> bool {
    neutral::is_plain_word(w)
        || (w.len() >= 2
            && w.starts_with('\'')
            && w.ends_with('\'')
            && !w[1..w.len() - 1].replace(r"'\''", "").contains('\''))
}

/// Every emitter over `plan`: no panic, and each format's own invariant.
fn check_emitters(plan: &Plan) -> Result<(), TestCaseError> {
    let shell = gpuprobe::emit::shell::render(plan);
    for l in shell.lines() {
        prop_assert!(
            is_own_shell_line(l),
            "not gpuprobe's own line: {l:?}\n{shell}"
        );
        prop_assert!(
            !l.chars().any(|c| c != '\t' && neutral::is_hostile(c)),
            "{l:?}"
        );
    }
    for g in &plan.groups {
        if let Ok(a) = gpuprobe::emit::args::render(g, &Default::default()) {
            prop_assert_eq!(a.matches('\n').count(), 1);
            prop_assert!(a.trim_end().split(' ').all(neutral::is_plain_word), "{a:?}");
        }
    }
    if let Ok(p) = gpuprobe::emit::preset::render(plan) {
        let v: Value = serde_json::from_str(&p).unwrap();
        for preset in v["configurePresets"].as_array().unwrap() {
            for value in preset["cacheVariables"].as_object().unwrap().values() {
                prop_assert!(!value.as_str().unwrap().contains('$'), "{value}");
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let summary = dir.path().join("summary");
    let annotations =
        gpuprobe::emit::github::write(plan, &Default::default(), &out, Some(&summary)).unwrap();
    let keys: Vec<String> = github_entries(&std::fs::read_to_string(&out).unwrap())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    prop_assert_eq!(
        keys,
        ["cmake-args", "configure-env", "matrix", "env", "plan"]
    );
    for l in annotations.lines() {
        prop_assert!(
            l.starts_with("::error title=gpuprobe::")
                || l.starts_with("::warning title=gpuprobe::"),
            "{l:?}"
        );
    }
    let explain = gpuprobe::emit::explain(plan, knowledge());
    prop_assert!(!explain.chars().any(|c| c != '\n' && neutral::is_hostile(c)));
    Ok(())
}

/// Puts `s` into every text field of a plan (values too: the emitters are the last line).
fn poison(plan: &mut Plan, s: &str) {
    plan.llama.source = s.to_string();
    plan.toolkit.version = Some(s.to_string());
    plan.toolkit.source = s.to_string();
    for g in &mut plan.groups {
        g.targets.push(s.to_string());
        for f in &mut g.flags {
            f.reason = s.to_string();
            f.value = format!("{}{s}", f.value);
        }
        g.env.push(gpuprobe::plan::EnvAdvice {
            name: s.to_string(),
            value: s.to_string(),
            reason: s.to_string(),
            when: Some(s.to_string()),
            quirks: vec![s.to_string()],
        });
    }
    for notes in [&mut plan.warnings, &mut plan.notes, &mut plan.refusals] {
        for n in notes.iter_mut() {
            n.message = s.to_string();
        }
    }
    plan.trace.push(s.to_string());
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn hostile_plans_come_out_inert(s in hostile(), multi in any::<bool>()) {
        let mut plan = declared_plan(if multi { "gfx1151,gfx1100" } else { "sm_90" });
        poison(&mut plan, &s);
        check_emitters(&plan)?;
    }
}

proptest! {
    // Runs the fragment: costs a process per case.
    #![proptest_config(config(12))]

    #[test]
    fn a_hostile_plan_runs_exactly_the_planned_cmake(s in hostile()) {
        let mut plan = declared_plan("sm_90");
        poison(&mut plan, &s);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("args");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let cmake = bin.join("cmake");
        std::fs::write(
            &cmake,
            format!("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\n", log.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cmake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fragment = dir.path().join("build.sh");
        std::fs::write(&fragment, gpuprobe::emit::shell::render(&plan)).unwrap();
        let out = std::process::Command::new("sh")
            .arg(&fragment)
            .current_dir(dir.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("LLAMA_CPP_DIR", "src")
            .env("LLAMA_BUILD_JOBS", "1")
            .env_remove("LLAMA_CMAKE_ARGS")
            .env_remove("LLAMA_BUILD_TARGETS")
            .env_remove("HIPCXX")
            .output()
            .unwrap();
        prop_assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut want = vec!["-S".to_string(), "src".into(), "-B".into(), "build".into()];
        for f in &plan.groups[0].flags {
            want.push(neutral::inline(&format!("-D{}={}", f.name, f.value)).into_owned());
        }
        want.extend(["--build", "build", "--config", "Release", "-j", "1"].map(String::from));
        let got = std::fs::read_to_string(&log).unwrap();
        let want = want.join("\n") + "\n";
        prop_assert_eq!(got, want);
        // Nothing but the fragment and what cmake wrote appeared.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        prop_assert_eq!(names.len(), 3, "{:?}", names);
    }
}

// ---- reports ---------------------------------------------------------------------------------------

const DEVICE_FIELDS: &[&str] = &[
    "arch",
    "name",
    "vendor",
    "backend",
    "arch_features",
    "pci_bus_id",
    "driver_version",
    "runtime_version",
    "source",
    "index",
    "vram_free_bytes",
    "vmm_supported",
    "integrated",
];
const SMOKE_FIELDS: &[&str] = &[
    "outcome",
    "stage",
    "mismatches",
    "cycles_done",
    "cycles",
    "reason",
    "signal",
    "stderr_tail",
];

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        hostile().prop_map(Value::from),
        prop::sample::select(
            &[
                "sm_90", "sm_86", "gfx1201", "gfx90a", "unknown", "amd", "nvidia", "cuda", "hip",
                "pass", "fail", "hang", "not-run"
            ][..]
        )
        .prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        prop::collection::vec(hostile().prop_map(Value::from), 0..3).prop_map(Value::from),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Device(usize, &'static str, Value),
    Smoke(usize, &'static str, Value),
    Top(&'static str, Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (0..3usize, prop::sample::select(DEVICE_FIELDS), json_value()).prop_map(|(i, f, v)| Edit::Device(i, f, v)),
        3 => (0..3usize, prop::sample::select(SMOKE_FIELDS), json_value()).prop_map(|(i, f, v)| Edit::Smoke(i, f, v)),
        1 => (prop::sample::select(&["schema", "devices", "peers", "environment", "host", "backends"][..]), json_value()).prop_map(|(f, v)| Edit::Top(f, v)),
    ]
}

fn device(v: &mut Value, i: usize) -> Option<&mut serde_json::Map<String, Value>> {
    v.get_mut("devices")?.get_mut(i)?.as_object_mut()
}

/// Applies an edit where its target is an object (an earlier edit may have replaced it).
fn apply(v: &mut Value, e: &Edit) {
    match e {
        Edit::Device(i, f, x) => {
            if let Some(d) = device(v, *i) {
                d.insert(f.to_string(), x.clone());
            }
        }
        Edit::Smoke(i, f, x) => {
            if let Some(s) = device(v, *i)
                .and_then(|d| d.get_mut("smoke"))
                .and_then(Value::as_object_mut)
            {
                s.insert(f.to_string(), x.clone());
            }
        }
        Edit::Top(f, x) => {
            if let Some(o) = v.as_object_mut() {
                o.insert(f.to_string(), x.clone());
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn edited_reports_are_refused_or_planned_inertly(edits in prop::collection::vec(edit(), 1..4)) {
        let mut v: Value = serde_json::from_str(REPORT).unwrap();
        for e in &edits {
            apply(&mut v, e);
        }
        let Ok(report) = Report::from_json(&v.to_string(), "fuzz.json") else {
            return Ok(());
        };
        // Accepted: every string is free of control characters (the captured stderr aside).
        for d in &report.devices {
            prop_assert!(!d.arch.chars().any(neutral::is_hostile));
            prop_assert!(d.arch == "unknown" || gpuprobe::targets::vendor_of_name(&d.arch) == Some(d.vendor));
        }
        let k = knowledge();
        if let Ok(plan) = resolve(k, &request(Devices::Measured { report: &report, mode: Mode::Report })) {
            check_emitters(&plan)?;
        }
    }

    #[test]
    fn damaged_report_text_never_panics(cut in 0usize..REPORT.len(), insert in hostile(), drop in 0usize..64) {
        let mut text = REPORT.to_string();
        let at = (0..=cut).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(at, &insert);
        let end = (at + drop).min(text.len());
        let end = (end..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text.replace_range(at..end, "");
        let _ = Report::from_json(&text, "fuzz.json");
    }
}

// ---- quirk files -----------------------------------------------------------------------------------

fn quirk_record(id: &str, fields: &[(&str, String)]) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    let mut t = toml_edit::Table::new();
    t["id"] = toml_edit::value(id);
    t["title"] = toml_edit::value("fuzz");
    t["summary"] = toml_edit::value("fuzz");
    t["severity"] = toml_edit::value("high");
    t["confidence"] = toml_edit::value("high");
    t["sources"] = toml_edit::value(toml_edit::Array::from_iter(["https://example.org/x"]));
    let mut m = toml_edit::Table::new();
    m["archs"] = toml_edit::value(toml_edit::Array::from_iter(["sm_90", "gfx1100"]));
    t["match"] = toml_edit::Item::Table(m);
    let mut e = toml_edit::Table::new();
    for (k, v) in fields {
        match *k {
            "set" | "env" => {
                let mut sub = toml_edit::Table::new();
                sub[v.as_str()] = toml_edit::value(v.as_str());
                sub["GGML_FUZZ"] = toml_edit::value(v.as_str());
                e[*k] = toml_edit::Item::Table(sub);
            }
            _ => e[*k] = toml_edit::value(v.as_str()),
        }
    }
    t["effect"] = toml_edit::Item::Table(e);
    let mut list = toml_edit::ArrayOfTables::new();
    list.push(t);
    doc["quirk"] = toml_edit::Item::ArrayOfTables(list);
    doc.to_string()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn hostile_quirk_records_are_refused_or_planned_inertly(
        fields in prop::collection::vec((prop::sample::select(&["set", "env", "env_when", "warn", "refuse", "runner"][..]), hostile()), 1..4),
        title in hostile(),
        targets in prop::sample::select(&["sm_90", "gfx1100"][..]),
    ) {
        let mut text = quirk_record("FUZZ1", &fields);
        text = text.replace("title = \"fuzz\"", &format!("title = {}", toml_edit::value(title.as_str())));
        let Ok(file) = gpuprobe::toml_file::parse_toml::<gpuprobe::quirks::QuirkFile>(&text, "fuzz.toml") else {
            return Ok(());
        };
        if file.validate(&text, "fuzz.toml").is_err() {
            return Ok(());
        }
        let mut k = knowledge().clone();
        k.quirks.extend(file.quirk);
        let req = request(Devices::Declared(k.targets.expand(targets).unwrap()));
        if let Ok(plan) = resolve(&k, &req) {
            check_emitters(&plan)?;
        }
    }

    #[test]
    fn damaged_quirk_text_never_panics(at in 0usize..4000, insert in hostile()) {
        let base = gpuprobe::profiles::BUNDLED_QUIRKS;
        let mut text = base[..base.len().min(4000)].to_string();
        let at = (0..=at.min(text.len())).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(at, &insert);
        if let Ok(file) = gpuprobe::toml_file::parse_toml::<gpuprobe::quirks::QuirkFile>(&text, "fuzz.toml") {
            let _ = file.validate(&text, "fuzz.toml");
        }
    }
}

// ---- logs and CMake text ---------------------------------------------------------------------------

const CMAKE_PIECES: &[&str] = &[
    "set",
    "option",
    "SET",
    "if",
    "(",
    ")",
    "\"",
    "\\",
    "#",
    "[[",
    "]]",
    "[=[",
    "]=]",
    "#[[",
    "CACHE",
    "STRING",
    "BOOL",
    "ON",
    "OFF",
    "\n",
    " ",
    "\t",
    "GGML_X",
    "${GGML_X_DEFAULT}",
    ";",
];

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn damaged_logs_never_panic(which in 0usize..LOGS.len(), at in 0usize..20_000, lines in prop::collection::vec(hostile(), 0..6)) {
        let base = LOGS[which];
        let mut text = base.to_string();
        let at = (0..=at.min(text.len())).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(at, &lines.join("\n"));
        let _ = gpuprobe::check_build::parse::parse(&text);
    }

    #[test]
    fn cmake_text_never_panics_and_yields_names(pieces in prop::collection::vec(prop_oneof![
        4 => prop::sample::select(CMAKE_PIECES).prop_map(str::to_string),
        1 => hostile(),
    ], 0..60)) {
        let text = pieces.concat();
        for (name, _, line) in gpuprobe::llama::checkout::scan_declarations(&text) {
            prop_assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name:?}");
            prop_assert!(line >= 1 && line <= text.matches('\n').count() + 1);
        }
    }
}

// ---- the workflow template's value boundary ---------------------------------------------------------

/// A workflow whose every string from outside gpuprobe's own template is `s`, except the two
/// that sit inside plain YAML scalars (`llama_ref`, `install.version`): those are validated where
/// they are parsed (`--llama-ref`, `--cuda`/`--rocm`), and `plain` gives them.
fn workflow_with(s: &str, plain: &str) -> gpuprobe::emit::workflow::Workflow {
    use gpuprobe::emit::workflow::{Entry, Job, JobBundle, Release, Tools, Workflow};
    use gpuprobe::version::ToolVersion;
    let mut install = gpuprobe::workflow::install::install(
        &gpuprobe::toolkits::ToolkitTable::bundled().unwrap(),
        gpuprobe::report::Backend::Cuda,
        Os::Linux,
        &ToolVersion::parse("--cuda", "12.8").unwrap(),
    )
    .unwrap();
    install.version = plain.to_string();
    install.comment = vec![s.to_string()];
    for v in &mut install.env {
        v.value = s.to_string();
    }
    let entry = Entry {
        group: s.to_string(),
        targets: s.to_string(),
        cmake_args: s.to_string(),
        vmm_flag: s.to_string(),
        expect_no_vmm: s.to_string(),
        artifact: s.to_string(),
        rocm_extras: s.to_string(),
        bundle_data: s.to_string(),
        comment: vec![s.to_string()],
    };
    Workflow {
        name: s.to_string(),
        header: vec![s.to_string(), String::new()],
        backend: "cuda",
        llama_repository: s.to_string(),
        llama_ref: plain.to_string(),
        expected_build: s.to_string(),
        jobs: vec![Job {
            id: "linux",
            runner: s.to_string(),
            runner_comment: vec![s.to_string()],
            container: Some(s.to_string()),
            install,
            cli_needs: "",
            entries: vec![entry.clone(), entry],
            package_args: s.to_string(),
            package_comment: vec![s.to_string()],
            bundle: JobBundle {
                driver_libs: s.to_string(),
                expect: s.to_string(),
                extra: s.to_string(),
                data: s.to_string(),
            },
            notes: s.to_string(),
        }],
        tools: Tools {
            python: plain.to_string(),
            pip: s.to_string(),
        },
        release: Release {
            needs: vec!["linux"],
            notes: s.to_string(),
            assets: vec![s.to_string()],
        },
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn hostile_workflow_values_add_no_line_and_no_expression(s in hostile(), plain in hostile()) {
        // Never empty: an empty container or comment drops lines by the template's own logic.
        let (s, plain) = (format!("x{s}"), format!("x{plain}"));
        let benign = gpuprobe::emit::workflow::render(&workflow_with("x", "x")).unwrap();
        let text = gpuprobe::emit::workflow::render(&workflow_with(&s, &plain)).unwrap();
        prop_assert_eq!(text.lines().count(), benign.lines().count(), "{}", text);
        prop_assert!(!text.chars().any(|c| c != '\n' && neutral::is_hostile(c)));
        let own = |t: &str| t.replace("${{ '${{' }}", "").matches("${{").count();
        prop_assert_eq!(own(&text), own(&benign));
    }
}

/// The values really are what YAML reads back (PyYAML, which the test script installs).
#[test]
fn hostile_workflow_values_read_back_as_themselves() {
    for s in [
        "a\nb: c",
        "x\" # y",
        "'; echo pwned",
        "${{ secrets.GITHUB_TOKEN }}",
        "\u{1b}[2J\u{2028}\u{85}end",
        "- item",
        "*anchor &a !tag |",
    ] {
        let text = gpuprobe::emit::workflow::render(&workflow_with(s, "b1234")).unwrap();
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import json, sys, yaml; d = yaml.safe_load(sys.stdin); \
                 e = d['jobs']['linux']['strategy']['matrix']['include'][0]; \
                 print(json.dumps([d['name'], d['jobs']['linux']['runs-on'], e['group'], e['cmake_args']]))",
            ])
            .stdin({
                let mut f = tempfile::tempfile().unwrap();
                use std::io::{Seek, Write};
                f.write_all(text.as_bytes()).unwrap();
                f.rewind().unwrap();
                f
            })
            .output()
            .expect("python3 with PyYAML (scripts/test.sh installs python3-yaml)");
        assert!(
            out.status.success(),
            "{}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
        for g in &got {
            // GitHub then evaluates each `${{ '${{' }}` to the literal `${{`.
            assert_eq!(&g.replace("${{ '${{' }}", "${{"), s, "{text}");
        }
    }
}

// ---- one sink each: CI log, JSON, shell (round 2) ------------------------------------------------

#[path = "common/actions_runner.rs"]
mod actions_runner;

/// [`hostile`] pieces plus those that start workflow commands in a CI log.
fn ci_hostile() -> impl Strategy<Value = String> {
    const CI: &[&str] = &[
        "::",
        "##[",
        "]",
        "::set-output name=x::",
        "::add-mask::",
        "::stop-commands::",
        "##[add-mask]",
        "##[stop-commands]",
        "\n",
        "\r",
        " ",
        "\t",
        "\u{3000}",
        "\u{a0}",
        "\u{2003}",
        "\u{200b}",
        "\u{85}",
        "\u{2028}",
    ];
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(CI).prop_map(str::to_string),
            2 => hostile(),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn printed_text_holds_no_workflow_command(s in ci_hostile()) {
        let printed = neutral::printed(&s);
        prop_assert!(actions_runner::commands(&printed).is_empty(), "{:?}", printed);
        let line = neutral::ci_log(&neutral::inline(&s)).into_owned();
        prop_assert!(actions_runner::commands(&line).is_empty(), "{:?}", line);
        // Only `\` is added: the text stays what it was, readable.
        prop_assert_eq!(neutral::ci_log(&s).replace('\\', ""), s.replace('\\', ""));
    }

    #[test]
    fn json_output_reads_back_as_itself_and_is_inert(s in ci_hostile()) {
        let v = serde_json::json!({ "name": s, "list": [s.clone()] });
        for doc in [serde_json::to_string_pretty(&v).unwrap(), serde_json::to_string(&v).unwrap()] {
            let safe = neutral::json(&doc);
            let back: Value = serde_json::from_str(&safe).unwrap();
            prop_assert_eq!(&back, &v);
            prop_assert!(actions_runner::commands(&safe).is_empty(), "{}", safe);
            prop_assert!(!safe.chars().any(|c| c != '\n' && neutral::is_hostile(c)), "{}", safe);
        }
    }
}

proptest! {
    // Each case starts a shell: a small budget.
    #![proptest_config(config(48))]

    /// POSIX sh (the real parser, `sh` on PATH) reads each word back as the text (its control
    /// characters shown escaped), one argument each.
    #[test]
    fn shell_words_read_back_through_sh(words in prop::collection::vec(ci_hostile(), 1..6)) {
        let script: Vec<String> = words.iter().map(|w| neutral::sh_word(w)).collect();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {}", script.join(" ")))
            .output()
            .unwrap();
        prop_assert!(out.status.success());
        let got: Vec<String> = out.stdout.split(|b| *b == 0).filter(|_| true).map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        let want: Vec<String> = words.iter().map(|w| neutral::inline(w).into_owned()).chain([String::new()]).collect();
        prop_assert_eq!(got, want);
    }
}
