//! The real-report regression suite: every folder in tests/real-reports/ is one public report
//! (an issue, pull request or forum thread) with the facts it states, the log lines it quotes,
//! the resolution its thread confirmed, and what gpuprobe must and must not say about it.
//!
//! gpuprobe is run on each case the way a user holding only that report would run it:
//! `cmake-flags --targets ... --format json` with the declared facts (architectures, OS, toolkit,
//! llama.cpp build), and `check-build --log log.txt --no-probe --json` on the quoted lines. Each
//! case is scored:
//! - right:   every `must` item holds and no `must_not` item does;
//! - partly:  some `must` items hold, none of the `must_not`;
//! - silent:  no `must` item holds, none of the `must_not`;
//! - harmful: a `must_not` item holds (advice that would cause or keep the problem).
//!
//! The test fails when a case scores worse than the status recorded in its case.toml, when a case
//! is harmful without being recorded so (a recorded harmful case names the pending fix in its
//! `gap` and is listed on every run), or when a README score table is stale. It prints every case
//! that scores better than recorded; `REAL_REPORTS_BLESS=1` raises those statuses and rewrites
//! the tables.

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// the case format (tests/real-reports/README.md documents it for people)

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    title: String,
    url: String,
    #[serde(default)]
    also: Vec<String>,
    /// When the report (or the quoted comment) was written, YYYY-MM-DD.
    date: String,
    /// Where it was reported: llama.cpp, ollama, koboldcpp-rocm, lemonade, TheRock, ...
    project: String,
    kind: Kind,
    vendor: Vendor,
    /// What class of problem, for the README table (free text, short).
    class: String,
    facts: Facts,
    resolution: Resolution,
    expect: Expect,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Build,
    Run,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Vendor {
    Amd,
    Nvidia,
}

/// Only what the report states. `archs` may be derived from a stated product name (an RTX 5090
/// is sm_120); everything else is as written in the report. Fields that only people read are
/// still parsed, so that a misspelled key fails.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Facts {
    #[serde(default)]
    gpus: Vec<String>,
    #[serde(default)]
    archs: Vec<String>,
    /// The archs are the GPUs of one machine (several entries: several GPUs in one box).
    #[serde(default)]
    machine: bool,
    os: Option<String>,
    rocm: Option<String>,
    cuda: Option<String>,
    driver: Option<String>,
    /// The llama.cpp build number (the N of tag bN), when the report gives it or its commit.
    llama_build: Option<u64>,
    /// The CMake flags or build command the reporter used, as written.
    flags: Option<String>,
    /// Environment variables set where the reporter ran llama.cpp.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Other stated facts, in this suite's words.
    #[serde(default)]
    stated: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resolution {
    /// Whether someone in the thread confirmed that the fix worked.
    confirmed: bool,
    /// Who: reporter, maintainer, commenter, vendor; "none" when nobody did.
    by: String,
    /// What fixed it (or, unconfirmed, what the thread settled on), in this suite's words.
    text: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// The score recorded for the current gpuprobe: the test fails if the case does worse.
    status: Score,
    /// `heldout`: the expectations were written before gpuprobe was run on the case, and
    /// `first_status` is the score of that first run, before any change made for the case.
    #[serde(default)]
    split: Option<Split>,
    /// The score at the first run of a held-out case; it never changes afterwards.
    #[serde(default)]
    first_status: Option<Score>,
    /// The expected verdict in words: what a right answer says.
    verdict: String,
    /// What gpuprobe still lacks for a right answer, when status is not `right`.
    #[serde(default)]
    gap: Option<String>,
    /// Ids of proposed quirk records (tests/real-reports/PROPOSED-QUIRKS.md) the case needs.
    #[serde(default)]
    proposals: Vec<String>,
    must: Vec<Check>,
    #[serde(default)]
    must_not: Vec<Check>,
}

/// Which part of the suite a case belongs to. Cases without a split were written while (or after)
/// the records they exercise were, so they measure recall; held-out cases measure generalisation.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Split {
    Heldout,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
enum Score {
    Harmful,
    Silent,
    Partly,
    Right,
}

impl Score {
    fn as_str(self) -> &'static str {
        match self {
            Score::Harmful => "harmful",
            Score::Silent => "silent",
            Score::Partly => "partly",
            Score::Right => "right",
        }
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Cmd {
    CmakeFlags,
    CheckBuild,
}

/// One thing gpuprobe must (or must not) say. Exactly one predicate is set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    cmd: Cmd,
    /// Why this item matters for the case (one line).
    why: String,
    /// cmake-flags: some build group carries `-DNAME=VALUE` (`NAME=VALUE`).
    flag: Option<String>,
    /// cmake-flags: CMAKE_CUDA_ARCHITECTURES / GPU_TARGETS of some group has this entry (`120a`
    /// matches `120a`, `120a-real`, `120a-virtual`; `120*` any spelling of 120).
    arch: Option<String>,
    /// cmake-flags: some group advises this runtime variable (`NAME=VALUE`).
    env: Option<String>,
    /// cmake-flags: the plan has build groups and none carries `-DNAME=VALUE` (for `must_not`: a
    /// plan that omits the switch its build needs describes the failing build).
    omits: Option<String>,
    /// cmake-flags: a warning, refusal or a record's own note (not a "may apply" note) contains
    /// this text or quirk id.
    warns: Option<String>,
    /// cmake-flags: a warning, note, refusal or flag/env reason, or stderr, contains this text.
    mentions: Option<String>,
    /// cmake-flags: the plan is refused (exit 1 with a reason).
    refuses: Option<bool>,
    /// check-build: a warning or error finding contains this text (title, reason, fix, quirk ids).
    problem: Option<String>,
    /// check-build: a warning or error finding rests on this line of log.txt (1-based).
    cites_line: Option<u64>,
    /// The command's exit code.
    exit: Option<i32>,
}

impl Check {
    fn predicates(&self) -> usize {
        [
            self.flag.is_some(),
            self.arch.is_some(),
            self.env.is_some(),
            self.omits.is_some(),
            self.warns.is_some(),
            self.mentions.is_some(),
            self.refuses.is_some(),
            self.problem.is_some(),
            self.cites_line.is_some(),
            self.exit.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }

    fn describe(&self) -> String {
        let what = if let Some(v) = &self.flag {
            format!("flag -D{v}")
        } else if let Some(v) = &self.arch {
            format!("arch {v}")
        } else if let Some(v) = &self.env {
            format!("env {v}")
        } else if let Some(v) = &self.omits {
            format!("omits -D{v}")
        } else if let Some(v) = &self.warns {
            format!("warns {v:?}")
        } else if let Some(v) = &self.mentions {
            format!("mentions {v:?}")
        } else if let Some(v) = self.refuses {
            format!("refuses = {v}")
        } else if let Some(v) = &self.problem {
            format!("problem {v:?}")
        } else if let Some(v) = self.cites_line {
            format!("cites log line {v}")
        } else if let Some(v) = self.exit {
            format!("exit {v}")
        } else {
            "nothing".into()
        };
        let cmd = match self.cmd {
            Cmd::CmakeFlags => "cmake-flags",
            Cmd::CheckBuild => "check-build",
        };
        format!("{cmd}: {what}")
    }
}

// ---------------------------------------------------------------------------------------------
// loading and validating

struct Loaded {
    id: String,
    dir: PathBuf,
    case: Case,
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real-reports")
}

fn load_cases() -> Vec<Loaded> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(suite_dir())
        .expect("tests/real-reports exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let proposals = std::fs::read_to_string(suite_dir().join("PROPOSED-QUIRKS.md"))
        .expect("tests/real-reports/PROPOSED-QUIRKS.md exists");
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for dir in dirs {
        let id = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let path = dir.join("case.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{id}: cannot read case.toml: {e}"));
                continue;
            }
        };
        let case: Case = match toml::from_str(&text) {
            Ok(c) => c,
            Err(e) => {
                errors.push(format!("{id}/case.toml: {e}"));
                continue;
            }
        };
        errors.extend(
            validate(&id, &dir, &case, &proposals)
                .into_iter()
                .map(|e| format!("{id}: {e}")),
        );
        out.push(Loaded { id, dir, case });
    }
    assert!(
        errors.is_empty(),
        "invalid cases:\n  {}",
        errors.join("\n  ")
    );
    out
}

fn validate(id: &str, dir: &Path, c: &Case, proposals: &str) -> Vec<String> {
    let mut e = Vec::new();
    if !id
        .chars()
        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
    {
        e.push("folder names are lowercase letters, digits and '-'".into());
    }
    for u in std::iter::once(&c.url).chain(&c.also) {
        if !u.starts_with("https://") {
            e.push(format!("source {u:?} is not an https URL"));
        }
    }
    let d = c.date.as_bytes();
    if !(d.len() == 10 && d[4] == b'-' && d[7] == b'-') {
        e.push(format!("date {:?} is not YYYY-MM-DD", c.date));
    }
    if c.title.trim().is_empty() || c.class.trim().is_empty() || c.project.trim().is_empty() {
        e.push("title, class and project must be set".into());
    }
    if c.facts.gpus.is_empty() {
        e.push("facts.gpus names the GPUs of the report".into());
    }
    if c.expect.verdict.trim().is_empty() {
        e.push("expect.verdict says what a right answer is".into());
    }
    if c.resolution.text.trim().is_empty() {
        e.push("resolution.text is empty".into());
    }
    if c.resolution.confirmed == (c.resolution.by == "none") {
        e.push("resolution.by names who confirmed it, or is \"none\" when unconfirmed".into());
    }
    if c.expect.must.is_empty() {
        e.push("expect.must is empty: a case must say what a right answer contains".into());
    }
    if c.expect.status != Score::Right && c.expect.gap.is_none() {
        e.push("a case not scored right says what is missing (expect.gap)".into());
    }
    if c.expect.status == Score::Right && c.expect.gap.is_some() {
        e.push("a case scored right has nothing missing: drop expect.gap".into());
    }
    match (c.expect.split, c.expect.first_status) {
        (Some(Split::Heldout), None) => e.push(
            "a held-out case records the score of its first run (expect.first_status)".into(),
        ),
        (None, Some(_)) => {
            e.push("expect.first_status belongs to held-out cases (split = \"heldout\")".into())
        }
        // A case that now scores worse than at its first run has regressed: the status says so,
        // and the comparison with the recorded status fails the test.
        (Some(Split::Heldout), Some(first)) if c.expect.status < first => e.push(format!(
            "status {} is below the first run's {first}: a recorded status is never lowered",
            c.expect.status
        )),
        _ => {}
    }
    let uses_log = c
        .expect
        .must
        .iter()
        .chain(&c.expect.must_not)
        .any(|k| k.cmd == Cmd::CheckBuild);
    let has_log = dir.join("log.txt").is_file();
    if uses_log && !has_log {
        e.push("check-build items need log.txt".into());
    }
    if has_log && !uses_log {
        e.push("log.txt is there but no item checks it".into());
    }
    let uses_plan = c
        .expect
        .must
        .iter()
        .chain(&c.expect.must_not)
        .any(|k| k.cmd == Cmd::CmakeFlags);
    if uses_plan && c.facts.archs.is_empty() {
        e.push("cmake-flags items need facts.archs".into());
    }
    for k in c.expect.must.iter().chain(&c.expect.must_not) {
        if k.predicates() != 1 {
            e.push(format!(
                "item {:?} must have exactly one predicate",
                k.describe()
            ));
        }
        if k.why.trim().is_empty() {
            e.push(format!("item {:?} says nothing in `why`", k.describe()));
        }
        let plan_only = k.flag.is_some()
            || k.arch.is_some()
            || k.env.is_some()
            || k.omits.is_some()
            || k.warns.is_some()
            || k.mentions.is_some()
            || k.refuses.is_some();
        let log_only = k.problem.is_some() || k.cites_line.is_some();
        if (plan_only && k.cmd != Cmd::CmakeFlags) || (log_only && k.cmd != Cmd::CheckBuild) {
            e.push(format!("item {:?} uses the wrong command", k.describe()));
        }
    }
    for p in &c.expect.proposals {
        if !proposals.contains(&format!("## {p}:")) {
            e.push(format!(
                "proposal {p} is not in PROPOSED-QUIRKS.md (a `## {p}: ...` heading)"
            ));
        }
    }
    e
}

// ---------------------------------------------------------------------------------------------
// running gpuprobe

/// What one command printed.
#[derive(Debug, Default)]
struct Output {
    exit: Option<i32>,
    json: Option<Value>,
    stderr: String,
}

/// Variables that would let the machine running the suite leak into a case.
const MORE_HOST_VARIABLES: &[&str] = &["GGML_CUDA_DISABLE_GRAPHS", "HSA_ENABLE_SDMA"];

fn run(args: &[String], env: &BTreeMap<String, String>) -> Output {
    let mut cmd = common::gpuprobe();
    for v in MORE_HOST_VARIABLES {
        cmd.env_remove(v);
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.timeout(std::time::Duration::from_secs(60));
    let out = cmd.output().expect("gpuprobe runs");
    Output {
        exit: out.status.code(),
        json: serde_json::from_slice(&out.stdout).ok(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether this gpuprobe can declare one machine's GPUs (`cmake-flags --machine`); without it a
/// machine's GPUs are given as targets, and quirks that depend on the set of GPUs stay "may apply".
fn machine_option() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let out = common::gpuprobe()
            .args(["cmake-flags", "--help"])
            .output()
            .expect("gpuprobe runs");
        String::from_utf8_lossy(&out.stdout).contains("--machine")
    })
}

fn plan_args(f: &Facts) -> Vec<String> {
    let mut a: Vec<String> = vec!["cmake-flags".into()];
    a.push(if f.machine && machine_option() {
        "--machine".into()
    } else {
        "--targets".into()
    });
    a.push(f.archs.join(","));
    if let Some(v) = &f.rocm {
        a.extend(["--rocm".into(), v.clone()]);
    }
    if let Some(v) = &f.cuda {
        a.extend(["--cuda".into(), v.clone()]);
    }
    // Never the toolkit of the machine running the suite.
    a.extend(["--toolchain".into(), "none".into()]);
    if let Some(v) = &f.os {
        a.extend(["--os".into(), v.clone()]);
    }
    if let Some(b) = f.llama_build {
        a.extend(["--llama-build".into(), b.to_string()]);
    }
    a.extend(["--format".into(), "json".into()]);
    a
}

fn check_args(dir: &Path, f: &Facts) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "check-build".into(),
        "--no-probe".into(),
        "--json".into(),
        "--log".into(),
        dir.join("log.txt").display().to_string(),
    ];
    if let Some(b) = f.llama_build {
        a.extend(["--llama-build".into(), b.to_string()]);
    }
    a
}

// ---------------------------------------------------------------------------------------------
// judging

fn lower(s: &str) -> String {
    s.to_lowercase()
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn groups(plan: &Value) -> &[Value] {
    array(plan, "groups")
}

fn has_flag(plan: &Value, want: &str) -> bool {
    groups(plan).iter().any(|g| {
        array(g, "flags")
            .iter()
            .any(|f| format!("{}={}", str_field(f, "name"), str_field(f, "value")) == want)
    })
}

fn arch_entry_matches(entry: &str, want: &str) -> bool {
    let entry = entry.trim();
    // `120*`: any spelling of that architecture (120, 120a, 120f, with -real or -virtual).
    if let Some(stem) = want.strip_suffix('*') {
        return entry
            .strip_prefix(stem)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()));
    }
    entry == want
        || entry
            .strip_prefix(want)
            .is_some_and(|rest| rest == "-real" || rest == "-virtual")
}

fn has_arch(plan: &Value, want: &str) -> bool {
    groups(plan).iter().any(|g| {
        array(g, "flags").iter().any(|f| {
            matches!(
                str_field(f, "name"),
                "CMAKE_CUDA_ARCHITECTURES" | "GPU_TARGETS" | "AMDGPU_TARGETS"
            ) && str_field(f, "value")
                .split([';', ','])
                .any(|e| arch_entry_matches(e, want))
        })
    })
}

fn has_env(plan: &Value, want: &str) -> bool {
    groups(plan).iter().any(|g| {
        array(g, "env")
            .iter()
            .any(|e| format!("{}={}", str_field(e, "name"), str_field(e, "value")) == want)
    })
}

/// A note's message and quirk ids, lowercased.
fn note_text(n: &Value) -> String {
    let quirks: Vec<&str> = array(n, "quirks")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    lower(&format!("{} {}", str_field(n, "message"), quirks.join(" ")))
}

fn plan_warns(plan: &Value, want: &str) -> bool {
    let want = lower(want);
    // A record's own text counts at either level (the severity policy makes what the plan
    // already did a note); a "may apply" note does not.
    let told = |n: &&Value| !str_field(n, "message").contains(" may apply: ");
    array(plan, "warnings")
        .iter()
        .chain(array(plan, "refusals"))
        .chain(array(plan, "notes").iter().filter(told))
        .any(|n| note_text(n).contains(&want))
}

fn plan_mentions(out: &Output, want: &str) -> bool {
    let want = lower(want);
    if lower(&out.stderr).contains(&want) {
        return true;
    }
    let Some(plan) = &out.json else {
        return false;
    };
    let notes = array(plan, "warnings")
        .iter()
        .chain(array(plan, "notes"))
        .chain(array(plan, "refusals"))
        .any(|n| note_text(n).contains(&want));
    let reasons = groups(plan).iter().any(|g| {
        array(g, "flags")
            .iter()
            .chain(array(g, "env"))
            .any(|f| lower(&f.to_string()).contains(&want))
    });
    notes || reasons
}

fn problem_findings(report: &Value) -> Vec<&Value> {
    array(report, "findings")
        .iter()
        .filter(|f| matches!(str_field(f, "severity"), "warning" | "error"))
        .collect()
}

fn finding_text(f: &Value) -> String {
    let quirks: Vec<&str> = array(f, "quirks")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    lower(&format!(
        "{} {} {} {}",
        str_field(f, "title"),
        str_field(f, "reason"),
        str_field(f, "fix"),
        quirks.join(" ")
    ))
}

/// Whether a JSON value names line `n`: a number under a key with "line" in its name (also in
/// arrays and objects below it), or text such as "line 12" / "lines 3-12" / "lines 3, 12".
fn cites_line(v: &Value, n: u64, under_line_key: bool) -> bool {
    match v {
        Value::Number(x) => under_line_key && x.as_u64() == Some(n),
        Value::Array(items) => items.iter().any(|i| cites_line(i, n, under_line_key)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| cites_line(v, n, under_line_key || k.contains("line"))),
        Value::String(s) => text_cites_line(s, n),
        _ => false,
    }
}

fn text_cites_line(s: &str, n: u64) -> bool {
    let s = lower(s);
    let mut rest = s.as_str();
    while let Some(i) = rest.find("line") {
        rest = &rest[i + 4..];
        let after = rest.strip_prefix('s').unwrap_or(rest);
        // the numbers right after: "12", "3-12", "3, 12", "3 and 12"
        let numbers: String = after
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, ' ' | ',' | '-' | '–'))
            .collect();
        let mut found: Vec<u64> = Vec::new();
        for part in numbers.split([' ', ',']) {
            let range: Vec<u64> = part
                .split(['-', '–'])
                .filter_map(|x| x.parse().ok())
                .collect();
            match range.as_slice() {
                [a] => found.push(*a),
                [a, b] if a <= b => found.extend(*a..=*b),
                _ => {}
            }
        }
        if found.contains(&n) {
            return true;
        }
    }
    false
}

fn holds(k: &Check, plan: &Output, check: &Output) -> bool {
    let out = match k.cmd {
        Cmd::CmakeFlags => plan,
        Cmd::CheckBuild => check,
    };
    if let Some(code) = k.exit {
        return out.exit == Some(code);
    }
    if k.mentions.is_some() {
        return plan_mentions(out, k.mentions.as_deref().unwrap_or(""));
    }
    let Some(json) = &out.json else {
        return false;
    };
    if let Some(v) = &k.flag {
        has_flag(json, v)
    } else if let Some(v) = &k.arch {
        has_arch(json, v)
    } else if let Some(v) = &k.env {
        has_env(json, v)
    } else if let Some(v) = &k.omits {
        !groups(json).is_empty() && !has_flag(json, v)
    } else if let Some(v) = &k.warns {
        plan_warns(json, v)
    } else if let Some(want) = k.refuses {
        (!array(json, "refusals").is_empty() && out.exit == Some(1)) == want
    } else if let Some(v) = &k.problem {
        let v = lower(v);
        problem_findings(json)
            .iter()
            .any(|f| finding_text(f).contains(&v))
    } else if let Some(n) = k.cites_line {
        problem_findings(json)
            .iter()
            .any(|f| cites_line(f, n, false))
    } else {
        false
    }
}

/// A refused plan (exit 1 with refusals) prints no build script: the groups its JSON still
/// lists are the refused request, not advice, so a `must_not` item about what a build carries
/// (`flag`, `arch`, `env`, `omits`) cannot hold against it.
fn refused_build(k: &Check, plan: &Output) -> bool {
    let about_build = k.flag.is_some() || k.arch.is_some() || k.env.is_some() || k.omits.is_some();
    about_build
        && k.cmd == Cmd::CmakeFlags
        && plan.exit == Some(1)
        && plan
            .json
            .as_ref()
            .is_some_and(|j| !array(j, "refusals").is_empty())
}

#[derive(Debug)]
struct Verdict {
    score: Score,
    held: Vec<String>,
    missed: Vec<String>,
    harmful: Vec<String>,
}

fn score(e: &Expect, plan: &Output, check: &Output) -> Verdict {
    let mut held = Vec::new();
    let mut missed = Vec::new();
    for k in &e.must {
        if holds(k, plan, check) {
            held.push(k.describe());
        } else {
            missed.push(k.describe());
        }
    }
    let harmful: Vec<String> = e
        .must_not
        .iter()
        .filter(|k| holds(k, plan, check) && !refused_build(k, plan))
        .map(|k| format!("{} ({})", k.describe(), k.why))
        .collect();
    let score = if !harmful.is_empty() {
        Score::Harmful
    } else if missed.is_empty() {
        Score::Right
    } else if held.is_empty() {
        Score::Silent
    } else {
        Score::Partly
    };
    Verdict {
        score,
        held,
        missed,
        harmful,
    }
}

fn judge(l: &Loaded) -> Verdict {
    let e = &l.case.expect;
    let items = || e.must.iter().chain(&e.must_not);
    let plan = if items().any(|k| k.cmd == Cmd::CmakeFlags) {
        run(&plan_args(&l.case.facts), &l.case.facts.env)
    } else {
        Output::default()
    };
    let check = if items().any(|k| k.cmd == Cmd::CheckBuild) {
        run(&check_args(&l.dir, &l.case.facts), &l.case.facts.env)
    } else {
        Output::default()
    };
    score(e, &plan, &check)
}

// ---------------------------------------------------------------------------------------------
// the score tables (tests/real-reports/README.md and the project README)

const BEGIN: &str = "<!-- real-reports score: generated by tests/real_reports.rs, do not edit -->";
const END: &str = "<!-- end of real-reports score -->";

fn totals(statuses: &[(String, &Case, Score)]) -> String {
    let n = |s: Score| statuses.iter().filter(|(_, _, x)| *x == s).count();
    let by = |k: Kind, v: Vendor| {
        statuses
            .iter()
            .filter(|(_, c, _)| c.kind == k && c.vendor == v)
            .count()
    };
    format!(
        "{} cases ({} AMD, {} NVIDIA; {} build time, {} run time): **{} right, {} partly, {} silent, {} harmful**.",
        statuses.len(),
        by(Kind::Build, Vendor::Amd) + by(Kind::Run, Vendor::Amd),
        by(Kind::Build, Vendor::Nvidia) + by(Kind::Run, Vendor::Nvidia),
        by(Kind::Build, Vendor::Amd) + by(Kind::Build, Vendor::Nvidia),
        by(Kind::Run, Vendor::Amd) + by(Kind::Run, Vendor::Nvidia),
        n(Score::Right),
        n(Score::Partly),
        n(Score::Silent),
        n(Score::Harmful),
    )
}

/// The held-out split: its score at the first run of each case and now.
fn heldout_totals(statuses: &[(String, &Case, Score)]) -> String {
    let held: Vec<(Score, Score)> = statuses
        .iter()
        .filter(|(_, c, _)| c.expect.split == Some(Split::Heldout))
        .map(|(_, c, s)| (c.expect.first_status.unwrap_or(Score::Silent), *s))
        .collect();
    let count = |pick: &dyn Fn(&(Score, Score)) -> Score, s: Score| {
        held.iter().filter(|p| pick(p) == s).count()
    };
    let line = |pick: &dyn Fn(&(Score, Score)) -> Score| {
        format!(
            "{} right, {} partly, {} silent, {} harmful",
            count(pick, Score::Right),
            count(pick, Score::Partly),
            count(pick, Score::Silent),
            count(pick, Score::Harmful)
        )
    };
    format!(
        "{} held-out cases (expectations written before the first run): first run {}; now **{}**.",
        held.len(),
        line(&|p| p.0),
        line(&|p| p.1),
    )
}

fn suite_table(statuses: &[(String, &Case, Score)]) -> String {
    let mut t = String::new();
    t.push_str(BEGIN);
    t.push('\n');
    t.push_str(&totals(statuses));
    t.push_str("\n\n");
    t.push_str(&heldout_totals(statuses));
    t.push_str(
        "\n\n| case | source | class | kind | status | needs |\n|---|---|---|---|---|---|\n",
    );
    for (id, c, s) in statuses {
        let source = c
            .url
            .trim_start_matches("https://github.com/")
            .trim_start_matches("https://")
            .replace("/issues/", "#")
            .replace("/pull/", "#");
        let needs = if c.expect.proposals.is_empty() {
            String::new()
        } else {
            c.expect.proposals.join(", ")
        };
        let status = match (c.expect.split, c.expect.first_status) {
            (Some(Split::Heldout), Some(first)) => format!("{s} (held out, first {first})"),
            _ => s.to_string(),
        };
        t.push_str(&format!(
            "| [{id}]({id}/case.toml) | [{source}]({}) | {} | {} {} | {status} | {needs} |\n",
            c.url,
            c.class.replace('|', "/"),
            match c.vendor {
                Vendor::Amd => "AMD",
                Vendor::Nvidia => "NVIDIA",
            },
            match c.kind {
                Kind::Build => "build",
                Kind::Run => "run",
            },
        ));
    }
    t.push_str(END);
    t
}

fn project_summary(statuses: &[(String, &Case, Score)]) -> String {
    format!(
        "{BEGIN}\n{}\n{} Per case: [tests/real-reports/README.md](tests/real-reports/README.md).\n{END}",
        totals(statuses),
        heldout_totals(statuses)
    )
}

/// `text` with the generated block replaced by `block`; None when the markers are missing.
fn splice(text: &str, block: &str) -> Option<String> {
    let a = text.find(BEGIN)?;
    let b = text[a..].find(END)? + a + END.len();
    Some(format!("{}{}{}", &text[..a], block, &text[b..]))
}

/// Sets `status = "..."` in the [expect] table of a case.toml, keeping everything else; a case
/// raised to right loses its (one-line) `gap`.
fn raise_status(path: &Path, to: Score) {
    let text = std::fs::read_to_string(path).expect("case.toml readable");
    let mut in_expect = false;
    let mut done = false;
    let lines: Vec<String> = text
        .lines()
        .filter_map(|line| {
            let t = line.trim_start();
            if t.starts_with('[') {
                in_expect = t.starts_with("[expect]");
            }
            if in_expect && !done && t.starts_with("status") && t.contains('=') {
                done = true;
                return Some(format!("status = \"{to}\""));
            }
            if in_expect && to == Score::Right && t.starts_with("gap") && t.contains('=') {
                return None;
            }
            Some(line.to_string())
        })
        .collect();
    assert!(done, "{}: no status line in [expect]", path.display());
    std::fs::write(path, lines.join("\n") + "\n").expect("case.toml writable");
}

// ---------------------------------------------------------------------------------------------
// the tests

#[test]
fn real_reports_do_not_regress() {
    let cases = load_cases();
    let bless = std::env::var_os("REAL_REPORTS_BLESS").is_some();
    // REAL_REPORTS_VERBOSE=1: every item of every case, held or missing.
    let verbose = std::env::var_os("REAL_REPORTS_VERBOSE").is_some();
    let mut worse = Vec::new();
    let mut better = Vec::new();
    let mut harmful = Vec::new();
    let mut report = String::new();
    let mut statuses: Vec<(String, &Case, Score)> = Vec::new();
    for l in &cases {
        let v = judge(l);
        let recorded = l.case.expect.status;
        report.push_str(&format!(
            "{:<44} {:<8} (recorded {:<7}) held {}/{}\n",
            l.id,
            v.score,
            recorded,
            v.held.len(),
            v.held.len() + v.missed.len()
        ));
        if verbose {
            for h in &v.held {
                report.push_str(&format!("    held    {h}\n"));
            }
            for m in &v.missed {
                report.push_str(&format!("    missing {m}\n"));
            }
            for h in &v.harmful {
                report.push_str(&format!("    HARMFUL {h}\n"));
            }
        }
        if v.score == Score::Harmful {
            harmful.push(format!("{}: {}", l.id, v.harmful.join("; ")));
        }
        if v.score < recorded {
            worse.push(format!(
                "{}: now {} (recorded {recorded}); missing: {}{}",
                l.id,
                v.score,
                v.missed.join("; "),
                if v.harmful.is_empty() {
                    String::new()
                } else {
                    format!("; harmful: {}", v.harmful.join("; "))
                }
            ));
        }
        let status = if v.score > recorded {
            better.push(format!("{}: now {} (recorded {recorded})", l.id, v.score));
            if bless {
                raise_status(&l.dir.join("case.toml"), v.score);
                v.score
            } else {
                recorded
            }
        } else {
            recorded
        };
        statuses.push((l.id.clone(), &l.case, status));
    }
    eprintln!("{report}");
    if !better.is_empty() {
        eprintln!(
            "improved (raise the recorded status: REAL_REPORTS_BLESS=1 cargo test --test real_reports):\n  {}",
            better.join("\n  ")
        );
    }
    let mut problems: Vec<String> = Vec::new();
    if cases.len() < 40 {
        problems.push(format!(
            "the suite holds {} cases; it needs at least 40",
            cases.len()
        ));
    }
    if !worse.is_empty() {
        problems.push(format!(
            "cases scoring worse than recorded:\n  {}",
            worse.join("\n  ")
        ));
    }
    // A harmful answer fails the test unless the case records it (status = "harmful", with the
    // change that fixes it named in `gap`): such a case is a known defect, listed on every run.
    let unrecorded: Vec<&String> = harmful
        .iter()
        .filter(|h| {
            cases.iter().any(|l| {
                h.starts_with(&format!("{}:", l.id)) && l.case.expect.status != Score::Harmful
            })
        })
        .collect();
    if !harmful.is_empty() {
        eprintln!(
            "harmful answers (advice that would cause or keep the problem):\n  {}",
            harmful.join("\n  ")
        );
    }
    if !unrecorded.is_empty() {
        problems.push(format!(
            "harmful answers (advice that would cause or keep the problem):\n  {}",
            unrecorded
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }

    // The score tables show the recorded statuses.
    let suite_readme = suite_dir().join("README.md");
    let project_readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    for (path, block) in [
        (&suite_readme, suite_table(&statuses)),
        (&project_readme, project_summary(&statuses)),
    ] {
        let text = std::fs::read_to_string(path).expect("README readable");
        let Some(updated) = splice(&text, &block) else {
            problems.push(format!(
                "{} has no generated score block (the lines {BEGIN:?} ... {END:?})",
                path.display()
            ));
            continue;
        };
        if updated != text {
            if bless {
                std::fs::write(path, &updated).expect("README writable");
            } else {
                problems.push(format!(
                    "{} shows a stale score: run REAL_REPORTS_BLESS=1 cargo test --test real_reports",
                    path.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// The judging itself must be able to fail: scores of made-up outputs.

fn check(toml_text: &str) -> Expect {
    toml::from_str(toml_text).expect("test expectation parses")
}

fn out(json: Value, exit: i32) -> Output {
    Output {
        exit: Some(exit),
        json: Some(json),
        stderr: String::new(),
    }
}

#[test]
fn scoring_tells_right_partly_silent_and_harmful_apart() {
    let e = check(
        r#"
status = "right"
verdict = "x"
[[must]]
cmd = "cmake-flags"
why = "legacy pool"
flag = "GGML_HIP_NO_VMM=ON"
[[must]]
cmd = "cmake-flags"
why = "names the quirk"
warns = "Q3"
[[must_not]]
cmd = "cmake-flags"
why = "VMM on"
flag = "GGML_HIP_NO_VMM=OFF"
"#,
    );
    let plan = |vmm: &str, warn: bool| {
        let warnings = if warn {
            serde_json::json!([{"severity": "high", "message": "Q3: offsets", "quirks": ["Q3"]}])
        } else {
            serde_json::json!([])
        };
        out(
            serde_json::json!({
                "groups": [{"flags": [{"name": "GGML_HIP_NO_VMM", "value": vmm}], "env": []}],
                "warnings": warnings, "notes": [], "refusals": []
            }),
            0,
        )
    };
    let none = Output::default();
    assert_eq!(score(&e, &plan("ON", true), &none).score, Score::Right);
    assert_eq!(score(&e, &plan("ON", false), &none).score, Score::Partly);
    assert_eq!(score(&e, &plan("OFF", true), &none).score, Score::Harmful);
    let silent = out(
        serde_json::json!({"groups": [], "warnings": [], "notes": [], "refusals": []}),
        0,
    );
    assert_eq!(score(&e, &silent, &none).score, Score::Silent);
    // A usage error (no JSON) is silent, never right.
    assert_eq!(score(&e, &none, &none).score, Score::Silent);
    // A refused plan prints no build: the refused group's flags are not advice.
    let refused = out(
        serde_json::json!({
            "groups": [{"flags": [{"name": "GGML_HIP_NO_VMM", "value": "OFF"}], "env": []}],
            "warnings": [{"severity": "high", "message": "Q3: offsets", "quirks": ["Q3"]}],
            "notes": [], "refusals": [{"severity": "high", "message": "cannot build"}]
        }),
        1,
    );
    assert_eq!(score(&e, &refused, &none).score, Score::Partly);
}

#[test]
fn findings_are_judged_by_level_text_and_cited_line() {
    let e = check(
        r#"
status = "right"
verdict = "x"
[[must]]
cmd = "check-build"
why = "names the fix"
problem = "CMAKE_CUDA_ARCHITECTURES"
[[must]]
cmd = "check-build"
why = "rests on the line"
cites_line = 7
"#,
    );
    let report = |severity: &str, reason: &str, extra: Value| {
        let mut f = serde_json::json!({"severity": severity, "title": "t", "reason": reason,
            "fix": "rebuild with CMAKE_CUDA_ARCHITECTURES=120a-real"});
        if let (Some(o), Some(x)) = (f.as_object_mut(), extra.as_object()) {
            o.extend(x.clone());
        }
        out(serde_json::json!({"findings": [f]}), 1)
    };
    let none = Output::default();
    let j = serde_json::json!({});
    assert_eq!(
        score(&e, &none, &report("error", "log line 7 says so", j.clone())).score,
        Score::Right
    );
    assert_eq!(
        score(
            &e,
            &none,
            &report("error", "x", serde_json::json!({"lines": [3, 7]}))
        )
        .score,
        Score::Right
    );
    assert_eq!(
        score(&e, &none, &report("error", "lines 5-9", j.clone())).score,
        Score::Right
    );
    assert_eq!(
        score(&e, &none, &report("error", "line 17", j.clone())).score,
        Score::Partly
    );
    // Information is not a problem finding.
    assert_eq!(
        score(&e, &none, &report("info", "line 7", j)).score,
        Score::Silent
    );
}

#[test]
fn arch_entries_match_with_real_and_virtual_suffixes_only() {
    assert!(arch_entry_matches("120a-real", "120a"));
    assert!(arch_entry_matches("121", "121"));
    assert!(arch_entry_matches("121-virtual", "121"));
    assert!(!arch_entry_matches("121a-real", "121"));
    assert!(!arch_entry_matches("1201", "120"));
    assert!(arch_entry_matches("120a-real", "120*"));
    assert!(arch_entry_matches("120", "120*"));
    assert!(!arch_entry_matches("1201", "120*"));
    assert!(arch_entry_matches("gfx1152", "gfx1152"));
}

/// Signature rows whose failure has no case in the suite (the reports are not llama.cpp logs, or
/// have no confirmed resolution): the lines their sources quote are recognised, on the right line.
#[test]
fn rows_without_a_case_match_the_lines_their_sources_quote() {
    let rows: &[(&str, &str, &str, u64)] = &[
        // https://github.com/NVIDIA/TensorRT-LLM/issues/3173 (CMake 3.24 and an `a` suffix)
        (
            "log-cmake-cuda-architectures-invalid",
            "-- GPU architectures: 80;86;89;90\nCMake Error at cmake-3.24.1/share/cmake-3.24/Modules/CMakeDetermineCUDACompiler.cmake:279 (message):\n  CMAKE_CUDA_ARCHITECTURES:\n    80-real;86-real;89-real;90a-real\n  is not one of the following:\n",
            "CMAKE_CUDA_ARCHITECTURES",
            2,
        ),
        // https://github.com/bycloudai/instant-ngp-Windows/issues/4
        (
            "log-cmake-cuda-architectures-invalid",
            "CMake Error at E:/Software/cmake/share/cmake-3.23/Modules/CMakeDetermineCUDACompiler.cmake:311 (message):\n  CMAKE_CUDA_ARCHITECTURES must be valid if set.\n",
            "CMAKE_CUDA_ARCHITECTURES",
            1,
        ),
        // https://github.com/ollama/ollama/issues/6997
        (
            "log-cuda-kernel-image-invalid",
            "Error: llama runner process has terminated: CUDA error: device kernel image is invalid current device: 0, in function ggml_cuda_compute_forward at C:\\a\\ollama\\ollama/llm/llama.cpp/ggml/src/ggml-cuda.cu:2326\n",
            "driver",
            1,
        ),
    ];
    for (id, text, says, line) in rows {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("log.txt");
        std::fs::write(&log, text).expect("log written");
        let out = run(
            &[
                "check-build".into(),
                "--no-probe".into(),
                "--json".into(),
                "--log".into(),
                log.display().to_string(),
            ],
            &BTreeMap::new(),
        );
        let json = out.json.expect("check-build prints JSON");
        let f = problem_findings(&json)
            .into_iter()
            .find(|f| str_field(f, "id") == *id)
            .unwrap_or_else(|| panic!("{id} not found in {json}"));
        assert!(finding_text(f).contains(&lower(says)), "{id}: {f}");
        assert!(
            cites_line(f, *line, false),
            "{id} does not cite line {line}: {f}"
        );
        assert_eq!(out.exit, Some(1), "{id}");
    }
}

/// A held-out case without the score of its first run is refused, and so is a first run recorded
/// on a case outside the split or a status below the first run's.
#[test]
fn held_out_cases_carry_their_first_score() {
    let case = |expect: &str| -> Case {
        toml::from_str(&format!(
            r#"
title = "t"
url = "https://example.org/1"
date = "2026-01-01"
project = "p"
kind = "run"
vendor = "amd"
class = "c"
[facts]
gpus = ["g"]
archs = ["gfx1100"]
[resolution]
confirmed = false
by = "none"
text = "x"
[expect]
verdict = "v"
{expect}
[[expect.must]]
cmd = "cmake-flags"
why = "w"
warns = "Q1"
"#
        ))
        .expect("test case parses")
    };
    let errors = |expect: &str| {
        let dir = tempfile::tempdir().expect("temp dir");
        validate("x", dir.path(), &case(expect), "")
    };
    assert!(errors("status = \"right\"").is_empty());
    assert!(
        errors("status = \"right\"\nsplit = \"heldout\"\nfirst_status = \"silent\"").is_empty()
    );
    let missing = errors("status = \"right\"\nsplit = \"heldout\"");
    assert!(
        missing.iter().any(|e| e.contains("first_status")),
        "{missing:?}"
    );
    let stray = errors("status = \"right\"\nfirst_status = \"right\"");
    assert!(stray.iter().any(|e| e.contains("held-out")), "{stray:?}");
    let lowered =
        errors("status = \"partly\"\ngap = \"g\"\nsplit = \"heldout\"\nfirst_status = \"right\"");
    assert!(
        lowered.iter().any(|e| e.contains("never lowered")),
        "{lowered:?}"
    );
    assert!(toml::from_str::<Case>("split = \"later\"").is_err());
}
