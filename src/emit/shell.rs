//! The default format: a commented POSIX-sh fragment that configures and builds llama.cpp.
//!
//! It is safe to append to a script: everything runs in a subshell (so `set -e` and `set --`
//! stay inside), and a failure ends the outer script with the same status.

use super::sh_quote;
use crate::plan::{Note, Plan};

pub fn render(plan: &Plan) -> String {
    let mut o = String::new();
    let multi = plan.groups.len() > 1;
    o.push_str(&format!(
        "# ---- gpuprobe {}: llama.cpp {} build ({} group{}) ----\n",
        plan.gpuprobe_version,
        plan.backend.name(),
        plan.groups.len(),
        if multi { "s" } else { "" }
    ));
    o.push_str(&format!(
        "# plan: {} mode; llama.cpp build {} ({}); {} {} ({}); os {}\n",
        match plan.mode {
            crate::plan::Mode::Probe => "probe",
            crate::plan::Mode::Report => "saved-report",
            crate::plan::Mode::Targets => "targets-only",
            crate::plan::Mode::Machine => "declared-machine",
        },
        plan.llama.effective_build,
        plan.llama.source,
        plan.toolkit.name,
        plan.toolkit.version.as_deref().unwrap_or("version unknown"),
        plan.toolkit.source,
        plan.os.as_str(),
    ));
    o.push_str("# Source: ${LLAMA_CPP_DIR:-.}; build dir: ${LLAMA_BUILD_DIR:-build}");
    if multi {
        o.push_str("-<group>");
    }
    o.push_str("; optional ${LLAMA_BUILD_TARGETS} (e.g. \"llama-cli llama-server\"),\n");
    o.push_str("# ${LLAMA_BUILD_JOBS} and ${LLAMA_CMAKE_ARGS} (extra configure arguments, e.g. -DLLAMA_BUILD_TESTS=ON).\n");
    notes(&mut o, "refused", &plan.refusals);
    notes(&mut o, "warning", &plan.warnings);
    notes(&mut o, "may apply", &plan.notes);
    for g in &plan.groups {
        o.push('\n');
        o.push_str(&format!("# group {}: {}\n", g.name, g.targets.join(", ")));
        o.push_str("(\n  set -e\n");
        o.push_str("  src=\"${LLAMA_CPP_DIR:-.}\"\n");
        if multi {
            o.push_str(&format!(
                "  out=\"${{LLAMA_BUILD_DIR:-build}}-{}\"\n",
                g.name
            ));
        } else {
            o.push_str("  out=\"${LLAMA_BUILD_DIR:-build}\"\n");
        }
        if plan.backend == crate::report::Backend::Hip {
            o.push_str("  # llama.cpp's docs: build HIP with ROCm's clang as the HIP compiler\n");
            o.push_str(
                "  if [ -z \"${HIPCXX:-}\" ] && command -v hipconfig >/dev/null 2>&1; then\n",
            );
            o.push_str("    HIPCXX=\"$(hipconfig -l)/clang\"; export HIPCXX\n  fi\n");
        }
        o.push_str("  set --\n");
        for f in &g.flags {
            o.push_str(&format!("  # {}\n", one_line(&f.reason, &f.quirks)));
            o.push_str(&format!(
                "  set -- \"$@\" {}\n",
                sh_quote(&format!("-D{}={}", f.name, f.value))
            ));
        }
        o.push_str("  # shellcheck disable=SC2086\n");
        o.push_str("  cmake -S \"$src\" -B \"$out\" \"$@\" ${LLAMA_CMAKE_ARGS:-}\n");
        o.push_str(
            "  jobs=\"${LLAMA_BUILD_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)}\"\n",
        );
        o.push_str("  if [ -n \"${LLAMA_BUILD_TARGETS:-}\" ]; then\n");
        o.push_str("    # shellcheck disable=SC2086\n");
        o.push_str("    cmake --build \"$out\" --config Release -j \"$jobs\" --target $LLAMA_BUILD_TARGETS\n");
        o.push_str("  else\n    cmake --build \"$out\" --config Release -j \"$jobs\"\n  fi\n");
        o.push_str(") || exit $?\n");
        if !g.env.is_empty() {
            o.push_str(&format!("# Runtime environment for group {} (set where llama.cpp runs; not exported here):\n", g.name));
            for e in &g.env {
                let when = e
                    .when
                    .as_ref()
                    .map(|w| format!(" only for {w}:"))
                    .unwrap_or_default();
                o.push_str(&format!(
                    "#  {when} export {}={}\n",
                    e.name,
                    sh_quote(&e.value)
                ));
                o.push_str(&format!(
                    "#    because {}\n",
                    one_line(&e.reason, &e.quirks)
                ));
            }
        }
    }
    o
}

fn notes(o: &mut String, label: &str, notes: &[Note]) {
    for n in notes {
        let targets = if n.targets.is_empty() {
            String::new()
        } else {
            format!(" [{}]", n.targets.join(", "))
        };
        o.push_str(&format!(
            "# {label}{targets}: {}\n",
            n.message.replace('\n', " ")
        ));
    }
}

fn one_line(reason: &str, quirks: &[String]) -> String {
    let mut s = reason.replace('\n', " ");
    let missing: Vec<&String> = quirks.iter().filter(|q| !s.contains(q.as_str())).collect();
    if !missing.is_empty() {
        s.push_str(&format!(
            " ({})",
            missing
                .iter()
                .map(|q| q.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    s
}
