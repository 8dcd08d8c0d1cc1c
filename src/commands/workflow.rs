//! `gpuprobe workflow`: builds the release workflow ([`crate::workflow`]) and prints it, writes
//! it atomically (`--output`) or compares it with a file (`--check`, exit 1 and a unified diff on
//! drift).

use std::path::Path;

use anyhow::Result;

use super::print;
use crate::cli::{BackendChoice, WorkflowArgs};
use crate::emit::workflow as wf;
use crate::error::{Error, exit};
use crate::profiles::Knowledge;
use crate::workflow::{Options, build};

pub fn run(a: &WorkflowArgs) -> Result<i32> {
    let k = Knowledge::load()?;
    if !k.user_quirk_files.is_empty() {
        let files: Vec<String> = k
            .user_quirk_files
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: user quirk files are part of this plan ({}); a CI job that runs `--check` needs the same files",
            files.join(", ")
        ));
    }
    let options = Options {
        targets: a.targets.clone(),
        os: a.os.clone(),
        from: a.from.clone(),
        backend: a.backend.and_then(BackendChoice::backend),
        rocm: a.rocm.clone(),
        cuda: a.cuda.clone(),
        llama_ref: a.llama_ref.clone(),
        llama_build: a.llama_build,
    };
    let built = build(&k, &options, &mut |n| super::note(n))?;
    for w in &built.warnings {
        crate::neutral::eprintln(&format!("gpuprobe: warning: {w}"));
    }
    if !built.refusals.is_empty() {
        for r in &built.refusals {
            crate::neutral::eprintln(&format!("gpuprobe: refused: {r}"));
        }
        return Ok(exit::PROBLEM);
    }
    let text = wf::render(&built.workflow)?;
    if let Some(path) = &a.check {
        return check(path, &text);
    }
    if let Some(path) = &a.output {
        // A fresh repository has no .github/workflows yet: make it, as workflow generators do,
        // and say so (a mistyped directory shows up here rather than as a silent new tree).
        let created = crate::files::create_parent_dirs(path, "--output")?;
        if let Some(dir) = created.first() {
            crate::neutral::eprintln(&format!(
                "gpuprobe: created directory {} (it did not exist)",
                dir.display()
            ));
        }
        if let Err(e) = crate::files::write_atomic(path, text.as_bytes(), "--output") {
            crate::files::remove_dirs(&created);
            return Err(e.into());
        }
        crate::neutral::eprintln(&format!("gpuprobe: wrote {}", path.display()));
        return Ok(exit::OK);
    }
    print(&text)?;
    Ok(exit::OK)
}

/// `--check FILE`: 0 when FILE is what would be generated, 1 with a unified diff on stdout when not.
fn check(path: &Path, text: &str) -> Result<i32> {
    let (current, missing) = match crate::files::read_bytes(path, crate::files::MAX_INPUT_BYTES) {
        Ok(b) => (String::from_utf8_lossy(&b).replace("\r\n", "\n"), false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(e) => {
            return Err(Error::input(
                format!("--check {}", path.display()),
                format!("cannot read: {e}"),
                "give the path of the workflow file to compare",
            )
            .into());
        }
    };
    if !missing && current == text {
        crate::neutral::eprintln(&format!("gpuprobe: {} is up to date", path.display()));
        return Ok(exit::OK);
    }
    let name = path.display().to_string();
    print(&diff::unified(
        &current,
        text,
        &name,
        &format!("{name} (generated)"),
        3,
    ))?;
    if missing {
        crate::neutral::eprintln(&format!(
            "gpuprobe: {name} does not exist; write it with the same arguments and --output {name}"
        ));
    } else {
        crate::neutral::eprintln(&format!(
            "gpuprobe: {name} is out of date; regenerate it with the same arguments and --output {name}"
        ));
    }
    Ok(exit::PROBLEM)
}

/// A line diff in unified format, as `diff -u` writes it.
mod diff {
    pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str, context: usize) -> String {
        // Compared line by line, as the lines are read: a missing final newline is no change.
        let ended = |s: &str| {
            if s.is_empty() || s.ends_with('\n') {
                s.to_string()
            } else {
                format!("{s}\n")
            }
        };
        let (old, new) = (ended(old), ended(new));
        let hunks = match wholesale(&old, &new, context) {
            Some(h) => h,
            None => similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(context)
                .to_string(),
        };
        format!("--- {old_name}\n+++ {new_name}\n{hunks}")
    }

    /// Above this many (old × new) differing lines a minimal diff costs too much (its work grows
    /// with the product; a file under `--check` may come from a pull request): the differing
    /// middle is shown as one hunk that removes it and adds the generated lines instead.
    const MINIMAL_DIFF_WORK: usize = 4_000_000;

    /// One hunk replacing everything between the common first and last lines, in time linear
    /// in the input; `None` when the middle is small enough for a minimal diff.
    fn wholesale(old: &str, new: &str, context: usize) -> Option<String> {
        let a: Vec<&str> = old.split_inclusive('\n').collect();
        let b: Vec<&str> = new.split_inclusive('\n').collect();
        let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let suffix = a[prefix..]
            .iter()
            .rev()
            .zip(b[prefix..].iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        let (a_mid, b_mid) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
        if a_mid.len().saturating_mul(b_mid.len()) <= MINIMAL_DIFF_WORK {
            return None;
        }
        let before = prefix.min(context);
        let after = suffix.min(context);
        let range = |start: usize, len: usize| {
            // `diff -u` numbers an empty range by the line before it.
            if len == 0 {
                format!("{start},0")
            } else {
                format!("{},{len}", start + 1)
            }
        };
        let first = prefix - before;
        let mut out = format!(
            "@@ -{} +{} @@\n",
            range(first, before + a_mid.len() + after),
            range(first, before + b_mid.len() + after)
        );
        for l in &a[first..prefix] {
            out.push(' ');
            out.push_str(l);
        }
        for l in a_mid {
            out.push('-');
            out.push_str(l);
        }
        for l in b_mid {
            out.push('+');
            out.push_str(l);
        }
        for l in &a[a.len() - suffix..a.len() - suffix + after] {
            out.push(' ');
            out.push_str(l);
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn shows_a_changed_line_with_context() {
            let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
            let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
            let d = super::unified(old, new, "x", "y", 3);
            assert_eq!(
                d,
                "--- x\n+++ y\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
            );
        }

        #[test]
        fn a_missing_final_newline_is_no_change() {
            let d = super::unified("a\nb", "a\nB\n", "x", "y", 3);
            assert_eq!(d, "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n");
            assert_eq!(super::unified("a", "a\n", "x", "y", 3), "--- x\n+++ y\n");
        }

        #[test]
        fn diffs_against_an_empty_file() {
            let d = super::unified("", "a\nb\n", "x", "y", 3);
            assert_eq!(d, "--- x\n+++ y\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        }

        #[test]
        fn a_huge_difference_is_one_hunk_that_patch_accepts() {
            let old: String = (0..5000).map(|i| format!("old {i}\n")).collect();
            let new: String = (0..1000).map(|i| format!("new {i}\n")).collect();
            let (old, new) = (format!("a\nb\n{old}z\n"), format!("a\nb\n{new}z\n"));
            let d = super::unified(&old, &new, "x", "y", 3);
            assert!(
                d.starts_with("--- x\n+++ y\n@@ -1,5003 +1,1003 @@\n a\n b\n-old 0\n"),
                "{}",
                &d[..80]
            );
            assert!(d.ends_with("+new 999\n z\n"));
        }

        #[test]
        fn separates_distant_changes_into_hunks() {
            let old: String = (0..30).map(|i| format!("{i}\n")).collect();
            let new: String = (0..30)
                .map(|i| match i {
                    3 => "three\n".to_string(),
                    25 => "twenty-five\n".to_string(),
                    _ => format!("{i}\n"),
                })
                .collect();
            let d = super::unified(&old, &new, "x", "y", 3);
            assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        }
    }
}
