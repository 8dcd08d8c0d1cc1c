//! The open world: a line that reads as a failure and that no log signature explains is named
//! as an "unrecognised failure", never dropped. Not recognising a failure is no evidence that the
//! build is fine, so such a line keeps the verdict from being "no problems".
//!
//! The rules are data (`[open_world]` in `profiles/log-signatures.toml`): which lines read as
//! failures, of which component, what to do next for each, and which look-alikes are benign.

use std::collections::BTreeSet;

use regex::Regex;
use serde::Deserialize;

use super::corpus::{At, Corpus, Quote};
use super::finding::{Finding, Level};
use super::pattern::compile;

/// Longest run of unrecognised lines quoted per component and input; the rest are counted.
const MAX_QUOTED: usize = 3;

/// `[open_world]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    #[serde(default)]
    pub benign: Vec<String>,
    #[serde(default)]
    pub aftermath: usize,
    #[serde(default)]
    pub preamble: usize,
    #[serde(default)]
    pub component: Vec<ComponentSpec>,
}

/// One `[[open_world.component]]` row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSpec {
    pub id: String,
    pub name: String,
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    #[serde(default)]
    pub consequence: bool,
    pub next: String,
}

/// A component with its regexes compiled.
#[derive(Debug, Clone)]
pub struct Component {
    pub spec: ComponentSpec,
    patterns: Vec<Regex>,
}

/// The compiled rules.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    benign: Vec<Regex>,
    aftermath: usize,
    preamble: usize,
    pub components: Vec<Component>,
}

/// Why a rule could not be compiled: the field and the message.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    pub field: String,
    pub message: String,
}

impl Rules {
    pub fn load(spec: Spec) -> Result<Self, RuleError> {
        let all = |field: &str, list: &[String]| -> Result<Vec<Regex>, RuleError> {
            list.iter()
                .enumerate()
                .map(|(i, p)| {
                    compile(p).map_err(|e| RuleError {
                        field: format!("{field}[{i}]"),
                        message: format!("not a valid regex: {e}"),
                    })
                })
                .collect()
        };
        let benign = all("open_world.benign", &spec.benign)?;
        let mut seen = BTreeSet::new();
        let mut components = Vec::new();
        for c in spec.component {
            let field = format!("open_world.component `{}`", c.id);
            let id_ok = !c.id.is_empty()
                && c.id
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
            if !id_ok || !seen.insert(c.id.clone()) {
                return Err(RuleError {
                    field,
                    message: "ids must be unique lowercase letters, digits and dashes".into(),
                });
            }
            if c.patterns.is_empty() || c.next.trim().is_empty() {
                return Err(RuleError {
                    field,
                    message: "needs at least one `match` regex and a `next` step".into(),
                });
            }
            let patterns = all(&format!("{field} match"), &c.patterns)?;
            components.push(Component { spec: c, patterns });
        }
        Ok(Rules {
            benign,
            aftermath: spec.aftermath.min(200),
            preamble: spec.preamble.min(20),
            components,
        })
    }

    /// The component a line's failure comes from, when the line reads as a failure.
    pub fn component_of(&self, line: &str) -> Option<&Component> {
        if self.benign.iter().any(|b| b.is_match(line)) {
            return None;
        }
        self.components
            .iter()
            .find(|c| c.patterns.iter().any(|p| p.is_match(line)))
    }

    /// One warning per component and input for the failure-looking lines that are neither
    /// `claimed` (a signature's hit or its quoted lines) nor, for a `consequence` component, in
    /// the aftermath of a recognised failure (`recognised`: the hit lines of non-fact rows).
    pub fn findings(
        &self,
        corpus: &Corpus,
        claimed: &BTreeSet<At>,
        recognised: &[At],
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        for (ii, src) in corpus.sources.iter().enumerate() {
            // (component index, line indices) in first-seen order.
            let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
            for (li, line) in src.lines.iter().enumerate() {
                let at = At {
                    input: ii,
                    line: li,
                };
                // A saved file's header or a pasted report's heading, not log output.
                if super::pattern::is_comment(line) || claimed.contains(&at) {
                    continue;
                }
                let Some(ci) = self
                    .components
                    .iter()
                    .position(|c| c.patterns.iter().any(|p| p.is_match(line)))
                else {
                    continue;
                };
                if self.benign.iter().any(|b| b.is_match(line)) {
                    continue;
                }
                if self.components[ci].spec.consequence
                    && self.in_aftermath(&src.lines, at, recognised)
                {
                    continue;
                }
                match groups.iter_mut().find(|(c, _)| *c == ci) {
                    Some((_, v)) => v.push(li),
                    None => groups.push((ci, vec![li])),
                }
            }
            for (ci, lines) in groups {
                out.push(self.finding(corpus, ii, &self.components[ci], &lines));
            }
        }
        out
    }

    /// Within `aftermath` lines after a recognised failure, or `preamble` lines before it (the
    /// op that failed and the abort's own line, which llama.cpp prints around its error line).
    /// The preamble counts printed lines: a wrapper that writes a blank line after each of
    /// llama.cpp's (a container's log, llama.cpp#21832) does not push the abort line out of it.
    fn in_aftermath(&self, lines: &[String], at: At, recognised: &[At]) -> bool {
        recognised.iter().any(|r| {
            r.input == at.input
                && ((r.line < at.line && at.line - r.line <= self.aftermath)
                    || (at.line < r.line
                        && lines.get(at.line + 1..=r.line).is_some_and(|between| {
                            between.iter().filter(|l| !l.trim().is_empty()).count() <= self.preamble
                        })))
        })
    }

    fn finding(&self, corpus: &Corpus, input: usize, c: &Component, lines: &[usize]) -> Finding {
        let src = corpus.sources.get(input).map_or(&[][..], |s| &s.lines[..]);
        let quotes: Vec<Quote> = lines
            .iter()
            .take(MAX_QUOTED)
            .flat_map(|&line| wrapped(src, line))
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .filter_map(|line| corpus.quote(At { input, line }))
            .collect();
        let label = corpus
            .sources
            .get(input)
            .map(|s| s.label.as_str())
            .unwrap_or("input");
        let first = lines.first().map_or(0, |l| l + 1);
        let more = match lines.len() {
            1 => String::new(),
            n => format!(" ({} such lines in all, the first quoted)", n),
        };
        let text = lines
            .first()
            .and_then(|&l| corpus.quote(At { input, line: l }))
            .map(|q| q.text)
            .unwrap_or_default();
        Finding::new(
            &format!("unrecognised-{}", c.spec.id),
            Level::Warning,
            format!(
                "unrecognised failure from {} ({}:{first})",
                c.spec.name,
                super::text::neutralise(label)
            ),
            format!(
                "Line {first} reads as a failure of {}, and no signature gpuprobe has explains it{more}: `{text}`. Not recognising a failure is no evidence that the build is fine.",
                c.spec.name
            ),
        )
        .fix(c.spec.next.clone())
        .evidence(quotes)
    }
}

/// A failure line with the lines a terminal or a report wrapped it across: the location
/// printed alone on the line before (`file.cpp:2225:` then `GGML_ASSERT(...) failed`,
/// llama.cpp#28525), and the rest of a condition cut inside its parentheses
/// (`GGML_ASSERT(S` then ` > 0) failed`, ik_llama.cpp#1910).
fn wrapped(lines: &[String], at: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let location_only = |l: &str| {
        let l = l.trim_end();
        l.ends_with(':')
            && l.trim_end_matches(':')
                .rsplit(':')
                .next()
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if at > 0 && lines.get(at - 1).is_some_and(|l| location_only(l)) {
        out.push(at - 1);
    }
    out.push(at);
    let open = |l: &str| l.matches('(').count() > l.matches(')').count();
    if lines.get(at).is_some_and(|l| open(l))
        && lines
            .get(at + 1)
            .is_some_and(|n| n.starts_with(char::is_whitespace) && !n.trim().is_empty())
    {
        out.push(at + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        let text = "[open_world]\naftermath = 3\nbenign = ['Performing Test .* - Failed']\n[[open_world.component]]\nid = \"a\"\nname = \"A\"\nmatch = ['A error']\nnext = \"n\"\n[[open_world.component]]\nid = \"crash\"\nname = \"C\"\nmatch = ['aborted']\nconsequence = true\nnext = \"n\"\n";
        #[derive(Deserialize)]
        struct F {
            open_world: Spec,
        }
        let f: F = toml::from_str(text).expect("toml");
        Rules::load(f.open_world).expect("load")
    }

    #[test]
    fn unclaimed_failures_are_named_case_insensitively_and_benign_ones_are_not() {
        let r = rules();
        let c = Corpus::single(
            "log",
            "ok\na ERROR here\n-- Performing Test X - Failed\n# a error in a header\n",
        );
        let f = r.findings(&c, &BTreeSet::new(), &[]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "unrecognised-a");
        assert_eq!(f[0].level, Level::Warning);
        assert_eq!(f[0].evidence[0].line, 2);
        assert!(f[0].title.contains("log:2"), "{}", f[0].title);
    }

    #[test]
    fn a_wrapped_failure_is_quoted_whole() {
        let lines: Vec<String> = [
            "x",
            "src/llama-context.cpp:2225:",
            "A error (n >= 1",
            "  ) failed",
            "y",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        assert_eq!(wrapped(&lines, 2), vec![1, 2, 3]);
        assert_eq!(wrapped(&lines, 0), vec![0]);
        let f = rules().findings(
            &Corpus::single("log", &lines.join("\n")),
            &BTreeSet::new(),
            &[],
        );
        let quoted: Vec<usize> = f[0].evidence.iter().map(|q| q.line).collect();
        assert_eq!(quoted, vec![2, 3, 4]);
        assert!(f[0].title.contains("log:3"), "{}", f[0].title);
    }

    #[test]
    fn blank_lines_do_not_push_an_abort_out_of_the_preamble() {
        let mut r = rules();
        r.preamble = 2;
        let c = Corpus::single("log", "Aborted\n\nx\n\nA error\n");
        let f = r.findings(&c, &BTreeSet::new(), &[At { input: 0, line: 4 }]);
        assert!(f.iter().all(|f| f.id != "unrecognised-crash"), "{f:?}");
    }

    #[test]
    fn claimed_lines_and_aftermath_are_explained() {
        let r = rules();
        let c = Corpus::single(
            "log",
            "A error 1\nx\nAborted\nA error 2\nx\nx\nx\nAborted\n",
        );
        let claimed: BTreeSet<At> = [At { input: 0, line: 0 }].into();
        let f = r.findings(&c, &claimed, &[At { input: 0, line: 0 }]);
        // line 3 (A error 2) is not a consequence component; line 8 is past the aftermath.
        let ids: Vec<(&str, usize)> = f
            .iter()
            .map(|f| (f.id.as_str(), f.evidence[0].line))
            .collect();
        assert_eq!(ids, vec![("unrecognised-a", 4), ("unrecognised-crash", 8)]);
    }

    #[test]
    fn a_bad_regex_names_its_field() {
        let spec = Spec {
            benign: vec!["(".into()],
            ..Spec::default()
        };
        let e = Rules::load(spec).unwrap_err();
        assert_eq!(e.field, "open_world.benign[0]");
    }
}
