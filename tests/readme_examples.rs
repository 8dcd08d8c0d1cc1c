//! The README's examples, as a new user pastes them. Every `sh`/`yaml` block in README.md is
//! preceded by a marker saying how it is checked:
//!
//! - `<!-- examples: run -->`: each line runs with `sh -c`, as pasted, in an empty directory of a
//!   machine without a GPU (only `gpuprobe` on PATH, no driver, an empty sysfs); it exits with the
//!   code its comment states (`# exit N`), else 0. The transcript is a snapshot.
//! - `<!-- examples: gpu -->`: lines that need a GPU or a llama.cpp build. Every `gpuprobe` line
//!   must parse (flags and values as the CLI defines them); a line reading `--from report.json`
//!   runs with a report captured on an H200 as `report.json`.
//! - `<!-- examples: action -->`: a workflow snippet using the Action: its `with:` keys are inputs
//!   and its `steps.<id>.outputs.X` are outputs of action.yml.
//! - `<!-- examples: not run (why) -->`: installs and the test suite itself.
//!
//! The install list in the README is checked against the scripts that install.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Run,
    Gpu,
    Action,
    NotRun,
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    /// 1-based line of the opening fence.
    line: usize,
    lines: Vec<String>,
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// Every fenced block, with the marker on the line before its fence. Blocks of a shell or YAML
/// language without a marker are an error: a new example must say how it is checked.
fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut unmarked = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let lang = lang.trim().to_string();
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim_start() != "```" {
            body.push(lines[i].to_string());
            i += 1;
        }
        i += 1;
        let marker = start
            .checked_sub(1)
            .map(|p| lines[p].trim())
            .and_then(|l| l.strip_prefix("<!-- examples:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(str::trim);
        let kind = match marker {
            Some("run") => Kind::Run,
            Some("gpu") => Kind::Gpu,
            Some("action") => Kind::Action,
            Some(m) if m.starts_with("not run") => Kind::NotRun,
            Some(m) => panic!("README.md:{}: unknown examples marker `{m}`", start),
            None => {
                if matches!(lang.as_str(), "sh" | "bash" | "console" | "yaml" | "yml") {
                    unmarked.push(start + 1);
                }
                continue;
            }
        };
        out.push(Block {
            kind,
            line: start + 1,
            lines: body,
        });
    }
    assert!(
        unmarked.is_empty(),
        "README.md: code blocks without an `<!-- examples: run|gpu|action|not run (why) -->` marker on the line before, at lines {unmarked:?}"
    );
    out
}

/// The command part of a line (before ` #`) and the exit code its comment states.
fn split_line(line: &str) -> (String, i32) {
    let (cmd, comment) = match line.find(" #") {
        Some(p) => (&line[..p], &line[p + 2..]),
        None => (line, ""),
    };
    let exit = comment
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0] == "exit")
        .map(|w| {
            w[1].trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .expect("`exit N` in a README comment")
        })
        .unwrap_or(0);
    (cmd.trim().to_string(), exit)
}

/// The words of a command as the shell would pass them, without redirections. README examples
/// use no quotes or substitutions: one that does is refused here rather than misread.
fn words(cmd: &str) -> Vec<String> {
    assert!(
        !cmd.contains(['\'', '"', '$', '`', '|', ';', '&', '\\']),
        "README example `{cmd}`: quoting, pipes and substitutions are not supported by this test; keep examples to plain words"
    );
    let mut out = Vec::new();
    let mut tokens = cmd.split_whitespace();
    while let Some(t) = tokens.next() {
        if matches!(t, ">" | ">>" | "<" | "2>") {
            tokens.next();
        } else if t.starts_with('>') || t.starts_with('<') {
            continue;
        } else {
            out.push(t.to_string());
        }
    }
    out
}

/// An empty machine: a temporary HOME and working directory, `gpuprobe` the only program on
/// PATH, no NVIDIA driver, an empty sysfs, no GPU or gpuprobe variables from the developer's shell.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["bin", "home", "work", "sysfs"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_gpuprobe"),
            dir.path().join("bin/gpuprobe"),
        )
        .unwrap();
        Sandbox { dir }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Runs `line` with `sh -c`; returns the exit code and a transcript with the sandbox's
    /// paths spelled `[SANDBOX]`.
    fn run(&self, line: &str) -> (i32, String) {
        let p = self.dir.path();
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(line)
            .current_dir(self.work())
            .env_clear()
            .env("PATH", p.join("bin"))
            .env("HOME", p.join("home"))
            .env("XDG_CONFIG_HOME", p.join("home/.config"))
            .env("XDG_CACHE_HOME", p.join("home/.cache"))
            .env("GPUPROBE_SYSFS_ROOT", p.join("sysfs"))
            .env("GPUPROBE_LIBCUDA", p.join("no-driver/libcuda.so.1"))
            .output()
            .expect("run /bin/sh");
        let code = out.status.code().unwrap_or(-1);
        let mut t = format!("$ {line}\n");
        t.push_str(&String::from_utf8_lossy(&out.stdout));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.is_empty() {
            t.push_str("[stderr]\n");
            t.push_str(&stderr);
        }
        t.push_str(&format!("[exit {code}]\n\n"));
        (code, t.replace(&p.display().to_string(), "[SANDBOX]"))
    }
}

fn example_lines(b: &Block) -> Vec<&str> {
    b.lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn every_run_example_runs_as_pasted_and_exits_as_stated() {
    let text = readme();
    let run_blocks: Vec<Block> = blocks(&text)
        .into_iter()
        .filter(|b| b.kind == Kind::Run)
        .collect();
    assert!(!run_blocks.is_empty(), "README.md has no `run` examples");
    for (n, b) in run_blocks.iter().enumerate() {
        // One sandbox per block: the lines of a block are pasted one after another.
        let sandbox = Sandbox::new();
        let mut transcript = String::new();
        let mut wrong = Vec::new();
        for line in example_lines(b) {
            let (cmd, want) = split_line(line);
            assert!(
                cmd.starts_with("gpuprobe "),
                "README.md block at line {}: `{cmd}` is not a gpuprobe command; mark the block `gpu` or `not run`",
                b.line
            );
            let (code, t) = sandbox.run(line);
            if code != want {
                wrong.push(format!(
                    "`{cmd}` exited {code}, the README says {want}:\n{t}"
                ));
            }
            transcript.push_str(&t);
        }
        assert!(
            wrong.is_empty(),
            "README.md block at line {}:\n{}",
            b.line,
            wrong.join("\n")
        );
        insta::assert_snapshot!(format!("run_block_{}", n + 1), transcript);
    }
}

#[test]
fn run_examples_leave_what_they_promise() {
    // The block's own claims about files: the workflow written under a new .github/workflows,
    // the schema written by `schema plan > ...`.
    let text = readme();
    for b in blocks(&text).iter().filter(|b| b.kind == Kind::Run) {
        let sandbox = Sandbox::new();
        for line in example_lines(b) {
            let (cmd, _) = split_line(line);
            sandbox.run(line);
            let w = words(&cmd);
            if let Some(i) = w.iter().position(|a| a == "--output") {
                let path = sandbox.work().join(&w[i + 1]);
                let written = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("`{cmd}` did not write {}: {e}", path.display()));
                assert!(written.contains("jobs:"), "{}", path.display());
            }
            if let Some(target) = cmd.split_once(" > ").map(|(_, t)| t.trim()) {
                let path = sandbox.work().join(target);
                let written = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("`{cmd}` did not write {}: {e}", path.display()));
                serde_json::from_str::<serde_json::Value>(&written)
                    .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
            }
        }
    }
}

#[test]
fn every_gpu_example_parses_and_the_saved_report_example_runs() {
    let text = readme();
    let gpu_blocks: Vec<Block> = blocks(&text)
        .into_iter()
        .filter(|b| b.kind == Kind::Gpu)
        .collect();
    assert!(!gpu_blocks.is_empty(), "README.md has no `gpu` examples");
    let mut from_report = 0;
    for b in &gpu_blocks {
        for line in example_lines(b) {
            let (cmd, want) = split_line(line);
            let w = words(&cmd);
            if w.first().map(String::as_str) != Some("gpuprobe") {
                // `sh build.sh` runs what `cmake-flags >> build.sh` wrote: llama.cpp and a GPU
                // toolkit are needed, which this machine need not have.
                continue;
            }
            if let Err(e) = gpuprobe::cli::Cli::try_parse_from(&w) {
                panic!(
                    "README.md block at line {}: `{cmd}` does not parse:\n{e}",
                    b.line
                );
            }
            if w.windows(2)
                .any(|p| p[0] == "--from" && p[1] == "report.json")
            {
                let sandbox = Sandbox::new();
                std::fs::copy(
                    root().join("tests/fixtures/nvidia-2x-h200-driver580/detect.json"),
                    sandbox.work().join("report.json"),
                )
                .unwrap();
                let (code, mut t) = sandbox.run(line);
                assert_eq!(code, want, "{t}");
                if let Some(target) = cmd.split_once(" > ").map(|(_, f)| f.trim()) {
                    let written = std::fs::read_to_string(sandbox.work().join(target))
                        .unwrap_or_else(|e| panic!("`{cmd}` did not write {target}: {e}"));
                    t.push_str(&format!("[{target}]\n{written}"));
                }
                from_report += 1;
                insta::assert_snapshot!(format!("gpu_from_report_{from_report}"), t);
            }
        }
    }
    assert!(
        from_report > 0,
        "the README shows no `--from report.json` example"
    );
}

/// `key:` lines directly under a top-level section of action.yml.
fn action_keys(section: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join("action.yml")).unwrap();
    let mut keys = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() && !line.starts_with('#') {
            inside = line.trim_end() == format!("{section}:");
            continue;
        }
        if inside
            && let Some(key) = line
                .strip_prefix("  ")
                .filter(|l| !l.starts_with(' '))
                .and_then(|l| l.strip_suffix(':'))
        {
            keys.push(key.to_string());
        }
    }
    assert!(!keys.is_empty(), "action.yml has no {section}");
    keys
}

#[test]
fn the_action_example_uses_real_inputs_and_outputs() {
    let inputs = action_keys("inputs");
    let outputs = action_keys("outputs");
    let text = readme();
    let action_blocks: Vec<Block> = blocks(&text)
        .into_iter()
        .filter(|b| b.kind == Kind::Action)
        .collect();
    assert!(
        !action_blocks.is_empty(),
        "README.md shows no Action example"
    );
    for b in &action_blocks {
        let mut with_indent: Option<usize> = None;
        let mut used_outputs = 0;
        // Whether the step being read uses the Action (other steps' `with:` are other actions').
        let mut gpuprobe_step = false;
        for line in &b.lines {
            let indent = line.len() - line.trim_start().len();
            let t = line.trim();
            if t.starts_with("- ") {
                gpuprobe_step = false;
            }
            if t.trim_start_matches("- ").starts_with("uses:") {
                gpuprobe_step = t.contains("gpuprobe/gpuprobe@");
            }
            if t == "with:" && gpuprobe_step {
                with_indent = Some(indent);
                continue;
            }
            if let Some(w) = with_indent {
                if indent > w && !t.is_empty() {
                    let key = t.split(':').next().unwrap();
                    assert!(
                        inputs.iter().any(|i| i == key),
                        "README.md block at line {}: `{key}` is not an input of action.yml ({inputs:?})",
                        b.line
                    );
                } else if indent <= w {
                    with_indent = None;
                }
            }
            let mut s = t;
            while let Some(p) = s.find("steps.gpuprobe.outputs.") {
                let name: String = s[p + "steps.gpuprobe.outputs.".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .collect();
                assert!(
                    outputs.contains(&name),
                    "README.md block at line {}: `{name}` is not an output of action.yml ({outputs:?})",
                    b.line
                );
                used_outputs += 1;
                s = &s[p + 1..];
            }
        }
        assert!(used_outputs > 0, "the Action example uses no output");
    }
}

/// Debian packages that `apt-get install` lines of `script` name (continuation lines joined).
fn apt_packages(script: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(script)).unwrap();
    let joined = text.replace("\\\n", " ");
    let mut pkgs = Vec::new();
    for line in joined.lines() {
        let Some((_, rest)) = line.split_once("apt-get install") else {
            continue;
        };
        for w in rest.split_whitespace() {
            if w.starts_with('>') || w.starts_with('$') || w.starts_with('"') {
                break;
            }
            if !w.starts_with('-') {
                pkgs.push(w.to_string());
            }
        }
    }
    pkgs
}

/// `name==version` pins anywhere in `script`.
fn pypi_pins(script: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join(script)).unwrap();
    let mut pins = Vec::new();
    for w in text.split(|c: char| c.is_whitespace() || "\"'()".contains(c)) {
        if let Some((name, version)) = w.split_once("==") {
            let name = name.rsplit('=').next().unwrap_or(name);
            if !name.is_empty() && !version.is_empty() {
                pins.push((name.to_string(), version.to_string()));
            }
        }
    }
    pins
}

#[test]
fn the_readme_lists_everything_the_test_script_installs() {
    let text = readme();
    let apt = apt_packages("scripts/test.sh");
    assert!(
        apt.len() >= 5,
        "no apt-get install line found in scripts/test.sh: {apt:?}"
    );
    let mut pins = Vec::new();
    for script in ["scripts/install-toolchains.sh", "scripts/lint-workflows.sh"] {
        pins.extend(pypi_pins(script));
    }
    assert!(
        pins.len() >= 5,
        "no pinned PyPI packages found in the install scripts: {pins:?}"
    );
    let readme_words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "`,;()".contains(c))
        .collect();
    let mut missing = Vec::new();
    for p in &apt {
        if !readme_words.contains(&p.as_str()) {
            missing.push(format!("apt {p}"));
        }
    }
    for (name, version) in &pins {
        if !readme_words.contains(&name.as_str()) || !readme_words.contains(&version.as_str()) {
            missing.push(format!("PyPI {name}=={version}"));
        }
    }
    assert!(
        missing.is_empty(),
        "README.md (\"What `scripts/test.sh` installs\") does not name: {missing:?}"
    );
}

#[test]
fn the_markers_are_read_as_intended() {
    // The parser above can fail: an unmarked shell block is refused, `# exit N` is read.
    let r = std::panic::catch_unwind(|| blocks("text\n```sh\ngpuprobe detect\n```\n"));
    assert!(r.is_err());
    assert_eq!(
        split_line("gpuprobe x --y   # exit 1: refused"),
        ("gpuprobe x --y".to_string(), 1)
    );
    assert_eq!(
        split_line("gpuprobe quirks list"),
        ("gpuprobe quirks list".to_string(), 0)
    );
    assert_eq!(
        words("gpuprobe cmake-flags --from r.json --format preset > P.json"),
        [
            "gpuprobe",
            "cmake-flags",
            "--from",
            "r.json",
            "--format",
            "preset"
        ]
    );
}
