//! The text check-build judges: one or more inputs (saved logs, stdin, the output of each run of
//! a binary), each with a label, so that every finding can quote the lines it rests on as
//! `label:line: text`.

use schemars::JsonSchema;
use serde::Serialize;

use super::text::{MAX_QUOTE, clip, neutralise};

/// One input: a file, stdin, or one run of a program.
#[derive(Debug, Clone)]
pub struct Source {
    /// `server.log`, `-` (stdin), `llama-cli --version`.
    pub label: String,
    pub lines: Vec<String>,
}

/// All inputs, in the order given.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    pub sources: Vec<Source>,
    /// The first place of each distinct trimmed line (by hash), built on the first [`Corpus::find`]:
    /// quoting every device of a 100k-line log must not scan the log once per device.
    exact: std::sync::OnceLock<std::collections::HashMap<u64, At>>,
}

fn line_hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A line quoted as evidence: where it is and what it says (neutralised for a terminal).
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Quote {
    pub input: String,
    /// 1-based line number within that input.
    pub line: usize,
    pub text: String,
}

/// A line's position: input index and 0-based line index within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    pub input: usize,
    pub line: usize,
}

impl Corpus {
    pub fn single(label: impl Into<String>, text: &str) -> Self {
        let mut c = Corpus::default();
        c.push(label, text);
        c
    }

    pub fn push(&mut self, label: impl Into<String>, text: &str) {
        self.exact = std::sync::OnceLock::new();
        self.sources.push(Source {
            label: label.into(),
            lines: text
                .lines()
                .map(|l| l.trim_end_matches('\r').to_string())
                .collect(),
        });
    }

    /// Every input joined, for the fact extractor (which reads all of them as one build).
    pub fn joined(&self) -> String {
        let mut s = String::new();
        for src in &self.sources {
            for l in &src.lines {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    pub fn quote(&self, at: At) -> Option<Quote> {
        let src = self.sources.get(at.input)?;
        let text = src.lines.get(at.line)?;
        Some(Quote {
            input: src.label.clone(),
            line: at.line + 1,
            text: neutralise(&clip(text.trim_end(), MAX_QUOTE)),
        })
    }

    /// The first line that is `needle` (trimmed), else the first that ends with `needle` (the extractor keeps a fact's line from its message
    /// on, without a timestamp or prefix in front), else the first that contains it anywhere (for
    /// facts the extractor kept as text). Ending first: a line that only mentions the text, such
    /// as someone quoting it, is not the line that printed it.
    pub fn find(&self, needle: &str) -> Option<Quote> {
        let needle = needle.trim();
        if needle.is_empty() {
            return None;
        }
        // The line itself first: what the extractor kept is usually a whole line.
        let exact = self.exact.get_or_init(|| {
            let mut m = std::collections::HashMap::new();
            for (i, src) in self.sources.iter().enumerate() {
                for (n, l) in src.lines.iter().enumerate() {
                    m.entry(line_hash(l.trim()))
                        .or_insert(At { input: i, line: n });
                }
            }
            m
        });
        if let Some(&at) = exact.get(&line_hash(needle))
            && self
                .sources
                .get(at.input)
                .and_then(|s| s.lines.get(at.line))
                .is_some_and(|l| l.trim() == needle)
        {
            return self.quote(at);
        }
        let ends = |l: &String| l.trim_end().ends_with(needle);
        let has = |l: &String| l.contains(needle);
        for test in [&ends as &dyn Fn(&String) -> bool, &has] {
            for (i, src) in self.sources.iter().enumerate() {
                if let Some(n) = src.lines.iter().position(test) {
                    return self.quote(At { input: i, line: n });
                }
            }
        }
        None
    }

    /// Where a quote of this corpus was taken from.
    pub fn place_of(&self, q: &Quote) -> Option<At> {
        let line = q.line.checked_sub(1)?;
        (0..self.sources.len())
            .map(|input| At { input, line })
            .find(|&at| {
                self.quote(at)
                    .is_some_and(|o| o.input == q.input && o.line == q.line)
            })
    }

    pub fn is_empty(&self) -> bool {
        self.sources
            .iter()
            .all(|s| s.lines.iter().all(|l| l.trim().is_empty()))
    }
}

impl Quote {
    /// `label:line: text`, as the human report prints it.
    pub fn render(&self) -> String {
        format!("{}:{}: {}", neutralise(&self.input), self.line, self.text)
    }
}
