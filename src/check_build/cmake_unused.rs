//! CMake's own word that an option did nothing: the names it lists under "Manually-specified
//! variables were not used by the project:". Each one that is not an option of the judged build
//! is a warning; where the table (`[[unused_variable]]` in `profiles/log-signatures.toml`) knows
//! what the name was meant to do, the warning names the option that does it and what the build
//! did instead.

use serde::Deserialize;

use super::corpus::{At, Corpus, Quote};
use super::finding::{Finding, Level};
use crate::llama::LlamaTarget;
use crate::llama::options::OptionTable;
use crate::report::Backend;

/// Longest list read under one header (CMake prints one name a line).
const MAX_NAMES: usize = 200;

/// `[cmake_unused]`: the line CMake prints above the names it did not use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heading {
    pub heading: String,
    pub sources: Vec<String>,
}

/// The heading to look for (lowercased: matched regardless of case) and the rows.
#[derive(Debug, Clone, Default)]
pub struct Table {
    heading: Option<String>,
    pub rows: Vec<UnusedVariable>,
}

impl Table {
    pub fn new(heading: Option<String>, rows: Vec<UnusedVariable>) -> Self {
        Table {
            heading: heading.map(|h| h.to_ascii_lowercase()),
            rows,
        }
    }
}

/// One `[[unused_variable]]` row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnusedVariable {
    pub name: String,
    /// What the user asked for, in words.
    pub meant: String,
    /// The option that does it, as NAME=VALUE (for every backend unless `hip` / `cuda` say).
    #[serde(default)]
    pub option: Option<String>,
    #[serde(default)]
    pub hip: Option<String>,
    #[serde(default)]
    pub cuda: Option<String>,
    /// What the build did instead.
    pub instead: String,
    pub sources: Vec<String>,
}

impl UnusedVariable {
    /// The option for the judged backend; both when the backend is not known.
    fn option_for(&self, backend: Option<Backend>) -> Option<String> {
        let own = match backend {
            Some(Backend::Hip) => self.hip.clone(),
            Some(Backend::Cuda) => self.cuda.clone(),
            _ => None,
        };
        let both = match (&self.hip, &self.cuda) {
            (Some(h), Some(c)) if backend.is_none() => Some(format!("{h} for HIP, {c} for CUDA")),
            _ => None,
        };
        own.or(both).or_else(|| self.option.clone())
    }
}

/// The names listed under each heading, with the line each is on.
fn listed(corpus: &Corpus, heading: &str) -> Vec<(String, At)> {
    let mut out = Vec::new();
    for (ii, src) in corpus.sources.iter().enumerate() {
        let mut li = 0;
        while li < src.lines.len() {
            if !src.lines[li].to_ascii_lowercase().contains(heading) {
                li += 1;
                continue;
            }
            li += 1;
            let mut names = 0;
            while li < src.lines.len() && names < MAX_NAMES {
                let line = src.lines[li].trim();
                // A blank line may separate the header from the list; the list ends at the first
                // line that is not one bare identifier.
                if line.is_empty() {
                    if names > 0 {
                        break;
                    }
                    li += 1;
                    continue;
                }
                if !line
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
                {
                    break;
                }
                out.push((
                    line.to_string(),
                    At {
                        input: ii,
                        line: li,
                    },
                ));
                names += 1;
                li += 1;
            }
        }
    }
    out
}

/// A warning for each listed name that the judged build does not declare.
pub fn findings(
    corpus: &Corpus,
    table: &Table,
    options: &OptionTable,
    llama: &LlamaTarget,
    backend: Option<Backend>,
    script_hint: &str,
) -> Vec<Finding> {
    let build = llama
        .build
        .map_or("this llama.cpp build".to_string(), |b| format!("build {b}"));
    let mut out: Vec<Finding> = Vec::new();
    let Some(heading) = table.heading.as_deref() else {
        return out;
    };
    for (name, at) in listed(corpus, heading) {
        if llama.declares(options, &name)
            || out.iter().any(|f| f.title.contains(&format!("`{name}`")))
        {
            continue;
        }
        let quote: Vec<Quote> = corpus.quote(at).into_iter().collect();
        let known = table
            .rows
            .iter()
            .find(|u| u.name.eq_ignore_ascii_case(&name));
        let reason = match known {
            Some(u) => {
                let option = u.option_for(backend).map_or(String::new(), |o| {
                    format!(" The option that does that is {o}.")
                });
                format!(
                    "CMake says it did not use -D{name}: {build} has no such option. It was meant to turn on {}.{option} Instead: {}. Sources: {}.",
                    u.meant,
                    u.instead,
                    u.sources.join(", ")
                )
            }
            None => format!(
                "CMake says it did not use -D{name}: {build} has no such option (profiles/llama-options.toml), so it changed nothing in the build. An option that was renamed or removed is the usual cause."
            ),
        };
        out.push(
            Finding::new(
                "cmake-unused-variable",
                Level::Warning,
                format!("CMake ignored `{name}`: not an option of {build}"),
                reason,
            )
            .fix(format!(
                "configure with the options of {build}, as the commented build script names them: {script_hint}"
            ))
            .evidence(quote),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_under_the_header_is_read_until_it_ends() {
        // CMake's format (cmake.cxx, RunCheckForUnusedVariables): a warning header, a blank line,
        // the names indented by four spaces, a blank line.
        let c = Corpus::single(
            "configure.log",
            "CMake Warning:\n  Manually-specified variables were not used by the project:\n\n    GGML_USE_VMM\n    LLAMA_CUBLAS\n\n\n-- Build files have been written to: /b\n",
        );
        let heading = "manually-specified variables were not used by the project";
        let names: Vec<(String, usize)> = listed(&c, heading)
            .into_iter()
            .map(|(n, a)| (n, a.line + 1))
            .collect();
        assert_eq!(
            names,
            vec![
                ("GGML_USE_VMM".to_string(), 4),
                ("LLAMA_CUBLAS".to_string(), 5)
            ]
        );
    }

    #[test]
    fn the_bundled_table_names_cmakes_heading() {
        let k = crate::profiles::Knowledge::bundled().expect("bundled");
        let t = super::super::signatures::SignatureTable::bundled(&k.quirks).expect("load");
        let heading = t.unused_variables.heading.as_deref().expect("a heading");
        // The line as CMake prints it, capitalised: matched regardless of case.
        let c = Corpus::single(
            "configure.log",
            "CMake Warning:\n  Manually-specified variables were not used by the project:\n\n    GGML_USE_VMM\n",
        );
        assert_eq!(listed(&c, heading).len(), 1);
        assert!(!t.unused_variables.rows.is_empty());
    }
}
