//! The default format: a commented POSIX-sh fragment that configures and builds llama.cpp.
//!
//! It is safe to append to a script: everything runs in a subshell (so `set -e` and `set --`
//! stay inside), and a failure ends the outer script with the same status.
//!
//! Text from outside (paths, versions, target names, reasons from quirk files and reports)
//! reaches the fragment only through [`Script::comment`] (one line, controls escaped) and
//! [`sh_word`] (a quoted word); every other line is gpuprobe's own.

use crate::neutral::{comment, sh_word};
use crate::plan::{Note, Plan};

/// The fragment being written: its own code lines, and comments made of outside text.
struct Script(String);

impl Script {
    /// A line of shell code that gpuprobe wrote (its interpolations are words from [`sh_word`]).
    fn code(&mut self, line: &str) {
        self.0.push_str(line);
        self.0.push('\n');
    }

    /// `indent# text` on exactly one line, whatever `text` holds.
    fn comment(&mut self, indent: &str, text: &str) {
        self.0.push_str(indent);
        self.0.push_str("# ");
        self.0.push_str(&comment(text));
        self.0.push('\n');
    }
}

pub fn render(plan: &Plan) -> String {
    let mut o = Script(String::new());
    let multi = plan.groups.len() > 1;
    o.comment(
        "",
        &format!(
            "---- gpuprobe {}: llama.cpp {} build ({} group{}) ----",
            plan.gpuprobe_version,
            plan.backend.name(),
            plan.groups.len(),
            if multi { "s" } else { "" }
        ),
    );
    o.comment(
        "",
        &format!(
            "plan: {} mode; {}; {}; os {}",
            match plan.mode {
                crate::plan::Mode::Probe => "probe",
                crate::plan::Mode::Report => "saved-report",
                crate::plan::Mode::Targets => "targets-only",
                crate::plan::Mode::Machine => "declared-machine",
            },
            plan.llama.describe(),
            plan.toolkit.describe(),
            plan.os.as_str(),
        ),
    );
    o.comment(
        "",
        &format!(
            "Source: ${{LLAMA_CPP_DIR:-.}}; build dir: ${{LLAMA_BUILD_DIR:-build}}{}; optional ${{LLAMA_BUILD_TARGETS}} (e.g. \"llama-cli llama-server\"),",
            if multi { "-<group>" } else { "" }
        ),
    );
    o.comment(
        "",
        "${LLAMA_BUILD_JOBS} and ${LLAMA_CMAKE_ARGS} (extra configure arguments, e.g. -DLLAMA_BUILD_TESTS=ON).",
    );
    notes(&mut o, "refused", &plan.refusals);
    notes(&mut o, "warning", &plan.warnings);
    notes(&mut o, "note", &plan.notes);
    for g in &plan.groups {
        o.code("");
        o.comment("", &format!("group {}: {}", g.name, g.targets.join(", ")));
        o.code("(\n  set -e");
        o.code("  src=\"${LLAMA_CPP_DIR:-.}\"");
        if multi {
            o.code(&format!(
                "  out=\"${{LLAMA_BUILD_DIR:-build}}\"{}",
                sh_word(&format!("-{}", g.name))
            ));
        } else {
            o.code("  out=\"${LLAMA_BUILD_DIR:-build}\"");
        }
        if plan.backend == crate::report::Backend::Hip {
            o.comment(
                "  ",
                "llama.cpp's docs: build HIP with ROCm's clang as the HIP compiler",
            );
            o.code("  if [ -z \"${HIPCXX:-}\" ] && command -v hipconfig >/dev/null 2>&1; then");
            o.code("    HIPCXX=\"$(hipconfig -l)/clang\"; export HIPCXX\n  fi");
        }
        o.code("  set --");
        for f in &g.flags {
            o.comment("  ", &one_line(&f.reason, &f.quirks));
            o.code(&format!(
                "  set -- \"$@\" {}",
                sh_word(&format!("-D{}={}", f.name, f.value))
            ));
        }
        o.code("  # shellcheck disable=SC2086");
        o.code("  cmake -S \"$src\" -B \"$out\" \"$@\" ${LLAMA_CMAKE_ARGS:-}");
        o.code(
            "  jobs=\"${LLAMA_BUILD_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)}\"",
        );
        o.code("  if [ -n \"${LLAMA_BUILD_TARGETS:-}\" ]; then");
        o.code("    # shellcheck disable=SC2086");
        o.code(
            "    cmake --build \"$out\" --config Release -j \"$jobs\" --target $LLAMA_BUILD_TARGETS",
        );
        o.code("  else\n    cmake --build \"$out\" --config Release -j \"$jobs\"\n  fi");
        o.code(") || exit $?");
        if !g.env.is_empty() {
            o.comment(
                "",
                &format!(
                    "Runtime environment for group {} (set where llama.cpp runs; not exported here):",
                    g.name
                ),
            );
            for e in &g.env {
                let when = e
                    .when
                    .as_ref()
                    .map(|w| format!(" when {w}:"))
                    .unwrap_or_default();
                o.comment(
                    "",
                    &format!(" {when} export {}={}", e.name, sh_word(&e.value)),
                );
                o.comment(
                    "",
                    &format!("   because {}", one_line(&e.reason, &e.quirks)),
                );
            }
        }
    }
    o.0
}

fn notes(o: &mut Script, label: &str, notes: &[Note]) {
    for n in notes {
        let targets = if n.targets.is_empty() {
            String::new()
        } else {
            format!(" [{}]", n.targets.join(", "))
        };
        o.comment("", &format!("{label}{targets}: {}", n.message));
    }
}

/// The reason, with the quirk ids it does not already name.
fn one_line(reason: &str, quirks: &[String]) -> String {
    let mut s = reason.to_string();
    let missing: Vec<&str> = quirks
        .iter()
        .filter(|q| !reason.contains(q.as_str()))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        s.push_str(&format!(" ({})", missing.join(", ")));
    }
    s
}
