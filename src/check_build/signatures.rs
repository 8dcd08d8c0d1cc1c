//! Log signatures: the failures people hit, as data (`profiles/log-signatures.toml`), and the
//! scan that finds them in a [`Corpus`]. What a hit means for a build (which quirk it is a symptom
//! of, how sure, what to do) is decided by the judge from the row and the facts around it.

use std::collections::BTreeSet;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cmake_unused::{self, UnusedVariable};
use super::corpus::{At, Corpus, Quote};
use super::finding::{Finding, Level};
use super::kernel::{self, AmdFault, FaultKind};
use super::legacy_advice::{self, LegacyAdvice};
use super::open_world;
use super::pattern::compile;
use crate::error::{Error, Result};
use crate::quirks::Quirk;
use crate::report::Vendor;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureFile {
    #[serde(default)]
    signature: Vec<Spec>,
    #[serde(default)]
    open_world: open_world::Spec,
    #[serde(default)]
    unused_variable: Vec<UnusedVariable>,
    #[serde(default)]
    cmake_unused: Option<cmake_unused::Heading>,
    #[serde(default)]
    line_vendor: LineVendor,
    #[serde(default)]
    legacy_pool: Option<legacy_advice::Spec>,
}

/// `[line_vendor]`: what only one vendor's builds print, so that a line a signature matches for
/// every vendor still names whose GPU it is.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineVendor {
    /// Text only HIP builds print, matched as written.
    #[serde(default)]
    pub amd: Vec<String>,
}

impl LineVendor {
    pub fn named_by(&self, line: &str) -> Option<Vendor> {
        self.amd
            .iter()
            .any(|m| line.contains(m.as_str()))
            .then_some(Vendor::Amd)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogKind {
    Llama,
    Kernel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Fact,
    Oom,
    Fault,
    VmmFailure,
    Hang,
    Crash,
    BuildError,
    LoadError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Decoder {
    AmdgpuFault,
}

/// What a finding asks the user to do (see the comments in the profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FixKind {
    Rebuild,
    NoVmm,
    LegacyPool,
    Quirk,
    Record,
    #[default]
    Advice,
}

/// Facts a hit proves about the build.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Implies {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_build: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_build: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_build: Option<u64>,
}

/// A quirk a signature is a symptom of, and the extra conditions for saying so.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Explain {
    pub quirk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_build: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// Confirmed only with a `context` hit before this one.
    #[serde(default)]
    pub context: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<FixKind>,
}

fn default_within() -> usize {
    4
}
fn level_error() -> Level {
    Level::Error
}
fn level_warning() -> Level {
    Level::Warning
}

/// One row as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub id: String,
    pub title: String,
    pub log: LogKind,
    pub class: Class,
    #[serde(default)]
    pub vendor: Option<Vendor>,
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    #[serde(default)]
    pub near: Vec<String>,
    #[serde(default = "default_within")]
    pub within: usize,
    #[serde(default)]
    pub quote: usize,
    #[serde(default)]
    pub context: Vec<String>,
    #[serde(default)]
    pub implies: Implies,
    #[serde(default)]
    pub decode: Option<Decoder>,
    #[serde(default = "level_error")]
    pub confirmed: Level,
    #[serde(default = "level_warning")]
    pub unconfirmed: Level,
    #[serde(default = "level_warning")]
    pub unexplained: Level,
    #[serde(default)]
    pub fix: FixKind,
    #[serde(default)]
    pub advice: Option<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub explains: Vec<Explain>,
    /// Rows whose failure this line follows from: where one of them was hit at most
    /// `CONSEQUENCE_WINDOW` lines before, in the same input, this line is quoted under that
    /// finding instead of standing as its own (ggml's error for the op a math library failed
    /// in would otherwise ask for a rebuild the library's failure says does not help).
    #[serde(default)]
    pub consequence_of: Vec<String>,
}

/// How far (in lines) a `consequence_of` line may follow the failure it comes from.
pub const CONSEQUENCE_WINDOW: usize = 40;

/// A row with its regexes compiled.
#[derive(Debug, Clone)]
pub struct Signature {
    pub spec: Spec,
    patterns: Vec<Regex>,
    near: Vec<Regex>,
}

/// Every row, in file order (the order in which rows claim lines).
#[derive(Debug, Clone)]
pub struct SignatureTable {
    pub rows: Vec<Signature>,
    /// What a failure-looking line that no row claims is named as.
    pub open_world: open_world::Rules,
    /// CMake's list of unused variables, and what they were meant to do.
    pub unused_variables: cmake_unused::Table,
    /// Which vendor a line names.
    pub line_vendor: LineVendor,
    /// What to tell a user whose legacy pool ran out of memory (`fix = "legacy-pool"`): present
    /// whenever a row asks for that fix.
    pub legacy_pool: Option<LegacyAdvice>,
}

/// One place a signature was found.
#[derive(Debug, Clone)]
pub struct Hit {
    /// Index of the row in the table.
    pub row: usize,
    pub at: At,
    /// The hit line, then the `near` / `quote` lines.
    pub quotes: Vec<Quote>,
    /// `fact` rows named in `context` that were seen earlier in the same input.
    pub context: Vec<Quote>,
    /// `current device: N` under a ggml-cuda error line.
    pub device: Option<u32>,
    /// The decoded block, for `decode = "amdgpu-fault"`.
    pub fault: Option<AmdFault>,
}

impl SignatureTable {
    /// The bundled table (`profiles/log-signatures.toml`), checked against `quirks`.
    pub fn bundled(quirks: &[Quirk]) -> Result<Self> {
        Self::load(
            crate::profiles::BUNDLED_SIGNATURES,
            "profiles/log-signatures.toml",
            quirks,
        )
    }

    /// Parses and validates `text` (named `origin` in errors); quirk ids must exist in `quirks`.
    pub fn load(text: &str, origin: &str, quirks: &[Quirk]) -> Result<Self> {
        let file: SignatureFile = crate::toml_file::parse_toml(text, origin)?;
        let mut rows: Vec<Signature> = Vec::new();
        let mut seen = BTreeSet::new();
        for spec in file.signature {
            let at = |message: String, fix: &str| Error::Input {
                input: origin.to_string(),
                line: crate::toml_file::line_of_id(text, &spec.id),
                message: format!("signature `{}`: {message}", spec.id),
                fix: fix.to_string(),
            };
            check_shape(&spec, &mut seen, &at)?;
            let compile_all = |field: &str, list: &[String]| -> Result<Vec<Regex>> {
                list.iter()
                    .enumerate()
                    .map(|(i, p)| {
                        compile(p).map_err(|e| {
                            at(
                                format!("field `{field}`[{i}] is not a valid regex: {e}"),
                                "fix the regex (Rust regex syntax; write it in single quotes so backslashes stay literal)",
                            )
                        })
                    })
                    .collect()
            };
            let patterns = compile_all("match", &spec.patterns)?;
            let near = compile_all("near", &spec.near)?;
            check_sources(&spec, &at)?;
            check_explains(&spec, quirks, &at)?;
            rows.push(Signature {
                spec,
                patterns,
                near,
            });
        }
        // Consequences name rows that exist and stand on their own.
        for r in &rows {
            for c in &r.spec.consequence_of {
                if !rows
                    .iter()
                    .any(|o| &o.spec.id == c && o.spec.consequence_of.is_empty())
                {
                    return Err(Error::Input {
                        input: origin.to_string(),
                        line: crate::toml_file::line_of_id(text, &r.spec.id),
                        message: format!(
                            "signature `{}`: `consequence_of` names `{c}`, which is no row without a `consequence_of` of its own",
                            r.spec.id
                        ),
                        fix: "name the id of the row whose failure this line follows from".into(),
                    });
                }
            }
        }
        // Context names must be fact rows that exist.
        for r in &rows {
            for c in &r.spec.context {
                if !rows
                    .iter()
                    .any(|o| &o.spec.id == c && o.spec.class == Class::Fact)
                {
                    return Err(Error::Input {
                        input: origin.to_string(),
                        line: crate::toml_file::line_of_id(text, &r.spec.id),
                        message: format!(
                            "signature `{}`: `context` names `{c}`, which is not a `fact` row",
                            r.spec.id
                        ),
                        fix: "name the id of a row with class = \"fact\"".into(),
                    });
                }
            }
        }
        let open_world = open_world::Rules::load(file.open_world).map_err(|e| Error::Input {
            input: origin.to_string(),
            line: None,
            message: format!("field `{}`: {}", e.field, e.message),
            fix: "fix the open-world rule (Rust regex syntax, in single quotes)".into(),
        })?;
        if let Some(u) = file
            .unused_variable
            .iter()
            .find(|u| u.sources.is_empty() || u.sources.iter().any(|s| !s.starts_with("https://")))
        {
            return Err(Error::Input {
                input: origin.to_string(),
                line: None,
                message: format!(
                    "unused_variable `{}`: `sources` must be https URLs, at least one",
                    u.name
                ),
                fix: "cite where the option's history is documented".into(),
            });
        }
        let heading = cmake_heading(file.cmake_unused, origin)?;
        let legacy_pool = match file.legacy_pool {
            Some(spec) => Some(LegacyAdvice::load(spec, quirks, origin)?),
            None => match rows.iter().find(|r| {
                r.spec.fix == FixKind::LegacyPool
                    || r.spec
                        .explains
                        .iter()
                        .any(|e| e.fix == Some(FixKind::LegacyPool))
            }) {
                Some(r) => {
                    return Err(Error::Input {
                        input: origin.to_string(),
                        line: crate::toml_file::line_of_id(text, &r.spec.id),
                        message: format!(
                            "signature `{}` asks for the legacy-pool fix and there is no `[legacy_pool]` table to render it",
                            r.spec.id
                        ),
                        fix: "add the `[legacy_pool]` table (see the header of profiles/log-signatures.toml)".into(),
                    });
                }
                None => None,
            },
        };
        Ok(SignatureTable {
            rows,
            open_world,
            unused_variables: cmake_unused::Table::new(heading, file.unused_variable),
            line_vendor: file.line_vendor,
            legacy_pool,
        })
    }

    /// Failure-looking lines that no row claims (see [`open_world`]): a hit claims its line and
    /// the lines it quotes; a failure row's hit is a recognised failure, whose aftermath is its own.
    /// `explained`: lines a finding of the judge already quotes (a backend that failed to start):
    /// claimed, but not a recognised failure whose aftermath is its own, since a quirk's finding
    /// quotes device lines too and a crash after them is still unexplained.
    pub fn unrecognised(&self, corpus: &Corpus, hits: &[Hit], explained: &[At]) -> Vec<Finding> {
        let mut claimed: BTreeSet<At> = explained.iter().copied().collect();
        let mut recognised = Vec::new();
        for h in hits {
            for n in 0..h.quotes.len().max(1) {
                claimed.insert(At {
                    input: h.at.input,
                    line: h.at.line + n,
                });
            }
            if self.rows[h.row].spec.class != Class::Fact {
                recognised.push(h.at);
            }
        }
        self.open_world.findings(corpus, &claimed, &recognised)
    }

    pub fn get(&self, id: &str) -> Option<&Signature> {
        self.rows.iter().find(|r| r.spec.id == id)
    }

    /// Every hit in every input. Within an input, a line is claimed by the first non-fact row
    /// (in file order) whose `match` and `near` hold; fact rows never claim. Only rows of the
    /// given kinds are tried.
    pub fn scan(&self, corpus: &Corpus, kinds: &[LogKind]) -> Vec<Hit> {
        let mut hits = Vec::new();
        for (ii, src) in corpus.sources.iter().enumerate() {
            // (row, line) of fact hits so far in this input.
            let mut facts: Vec<(usize, usize)> = Vec::new();
            for (li, line) in src.lines.iter().enumerate() {
                // A saved file's header or a pasted report's heading, not log output.
                if super::pattern::is_comment(line) {
                    continue;
                }
                for (ri, row) in self.rows.iter().enumerate() {
                    if !kinds.contains(&row.spec.log)
                        || !row.patterns.iter().any(|p| p.is_match(line))
                    {
                        continue;
                    }
                    let Some(last) = row.near_end(&src.lines, li) else {
                        continue;
                    };
                    let at = At {
                        input: ii,
                        line: li,
                    };
                    let quotes: Vec<Quote> = (li..=last)
                        .filter_map(|n| corpus.quote(At { input: ii, line: n }))
                        .collect();
                    let context: Vec<Quote> = facts
                        .iter()
                        .filter(|(fr, _)| row.spec.context.contains(&self.rows[*fr].spec.id))
                        .filter_map(|(_, fl)| {
                            corpus.quote(At {
                                input: ii,
                                line: *fl,
                            })
                        })
                        .collect();
                    let device = src.lines[li..=last].iter().find_map(|l| current_device(l));
                    let fault = row.spec.decode.map(|Decoder::AmdgpuFault| {
                        kernel::decode_block(&src.lines, li, &row.patterns)
                    });
                    hits.push(Hit {
                        row: ri,
                        at,
                        quotes,
                        context,
                        device,
                        fault,
                    });
                    if row.spec.class == Class::Fact {
                        facts.push((ri, li));
                    } else {
                        break;
                    }
                }
            }
        }
        self.fold_consequences(hits)
    }

    /// Hits of `consequence_of` rows that follow a hit of a row they name (same input, within
    /// `CONSEQUENCE_WINDOW` lines) become quotes of that hit.
    fn fold_consequences(&self, hits: Vec<Hit>) -> Vec<Hit> {
        let mut out: Vec<Hit> = Vec::with_capacity(hits.len());
        for h in hits {
            let names = &self.rows[h.row].spec.consequence_of;
            // Hits come in input and line order: look back only as far as the window reaches,
            // so a log of many such lines stays linear.
            let cause = if names.is_empty() {
                None
            } else {
                out.iter_mut()
                    .rev()
                    .take_while(|c| {
                        c.at.input == h.at.input
                            && h.at.line.saturating_sub(c.at.line) <= CONSEQUENCE_WINDOW
                    })
                    .find(|c| names.contains(&self.rows[c.row].spec.id))
            };
            match cause {
                Some(c) => {
                    for q in h.quotes {
                        if !c
                            .quotes
                            .iter()
                            .any(|o| o.line == q.line && o.input == q.input)
                        {
                            c.quotes.push(q);
                        }
                    }
                }
                None => out.push(h),
            }
        }
        out
    }
}

/// Builds the error for a row: its message, and the fix.
type RowError<'a> = dyn Fn(String, &str) -> Error + 'a;

/// A row's id (new in `seen`), patterns and window.
/// The heading of CMake's unused-variable list, checked: present, and where CMake prints it.
fn cmake_heading(h: Option<cmake_unused::Heading>, origin: &str) -> Result<Option<String>> {
    match h {
        Some(h)
            if h.heading.trim().is_empty()
                || h.sources.iter().any(|s| !s.starts_with("https://"))
                || h.sources.is_empty() =>
        {
            Err(Error::Input {
                input: origin.to_string(),
                line: None,
                message: "`[cmake_unused]` needs a `heading` (the line CMake prints above the names) and `sources` (https URLs)".into(),
                fix: "give the heading as CMake prints it, and where that is printed".into(),
            })
        }
        h => Ok(h.map(|h| h.heading)),
    }
}

fn check_shape(spec: &Spec, seen: &mut BTreeSet<String>, at: &RowError<'_>) -> Result<()> {
    if spec.id.is_empty()
        || !spec
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(at(
            "field `id` must be lowercase letters, digits and dashes".into(),
            "rename the row, e.g. `legacy-pool-oom`",
        ));
    }
    if !seen.insert(spec.id.clone()) {
        return Err(at("id appears twice".into(), "give each row its own id"));
    }
    if spec.patterns.is_empty() {
        return Err(at(
            "field `match` is empty".into(),
            "give at least one regex that matches the line",
        ));
    }
    if spec.within == 0 || spec.within > 50 || spec.quote > 50 {
        return Err(at(
            "fields `within` and `quote` must be between 1 and 50 (`quote` may be 0)".into(),
            "look at most 50 lines ahead",
        ));
    }
    Ok(())
}

/// A row's sources: full https URLs, at least one unless it is a fact row.
fn check_sources(spec: &Spec, at: &RowError<'_>) -> Result<()> {
    if let Some(bad) = spec.sources.iter().find(|s| !s.starts_with("https://")) {
        return Err(at(
            format!("field `sources`: `{bad}` is not an https URL"),
            "write each source as a full https:// URL",
        ));
    }
    if spec.class != Class::Fact && spec.sources.is_empty() {
        return Err(at(
            "field `sources` is empty".into(),
            "add at least one URL where the failure is reported",
        ));
    }
    Ok(())
}

/// The quirks a row explains exist, and what each explanation needs is in the row.
fn check_explains(spec: &Spec, quirks: &[Quirk], at: &RowError<'_>) -> Result<()> {
    for e in &spec.explains {
        if !quirks.iter().any(|q| q.id == e.quirk) {
            return Err(at(
                format!(
                    "explains quirk `{}`, which profiles/quirks.toml does not have",
                    e.quirk
                ),
                "name an existing quirk id (`gpuprobe quirks list`)",
            ));
        }
        if e.fault.is_some() && spec.decode != Some(Decoder::AmdgpuFault) {
            return Err(at(
                format!(
                    "explains `{}` with `fault`, but the row has no `decode = \"amdgpu-fault\"`",
                    e.quirk
                ),
                "add the decoder or drop `fault`",
            ));
        }
        if e.context && spec.context.is_empty() {
            return Err(at(
                format!(
                    "explains `{}` with `context = true`, but the row names no `context`",
                    e.quirk
                ),
                "name the fact rows whose hits confirm it in `context`",
            ));
        }
    }
    if spec.class == Class::Fact && (!spec.explains.is_empty() || !spec.context.is_empty()) {
        return Err(at(
            "a `fact` row produces no finding, so it cannot explain quirks or have context".into(),
            "move `explains` / `context` to the row that reports the failure",
        ));
    }
    Ok(())
}

impl Signature {
    /// The last line to quote for a hit at `li`, or None when a `near` regex is not found.
    fn near_end(&self, lines: &[String], li: usize) -> Option<usize> {
        let window_end = (li + self.spec.within).min(lines.len().saturating_sub(1));
        let mut last = li;
        for re in &self.near {
            let found = (li + 1..=window_end).find(|n| re.is_match(&lines[*n]))?;
            last = last.max(found);
        }
        if self.near.is_empty() {
            last = (li + self.spec.quote).min(lines.len().saturating_sub(1));
        }
        Some(last)
    }
}

/// `current device: 1, in function alloc at ...` (and the 2023 form `current device: 1`).
fn current_device(line: &str) -> Option<u32> {
    let rest = &line[line.find("current device: ")? + "current device: ".len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quirks() -> Vec<Quirk> {
        crate::profiles::Knowledge::bundled()
            .expect("bundled")
            .quirks
    }

    #[test]
    fn bundled_table_loads() {
        let t = SignatureTable::load(crate::profiles::BUNDLED_SIGNATURES, "bundled", &quirks())
            .expect("bundled signatures load");
        assert!(t.get("legacy-pool-oom").is_some());
    }

    #[test]
    fn the_vendor_a_line_names_is_data() {
        let t = SignatureTable::bundled(&quirks()).expect("load");
        let named = |l: &str| t.line_vendor.named_by(l);
        assert_eq!(named("ROCm error: out of memory"), Some(Vendor::Amd));
        assert_eq!(named("HipVMM Failure: invalid argument"), Some(Vendor::Amd));
        // HIP builds printed `CUDA error` before the backend was named ROCm: it names nothing.
        assert_eq!(named("CUDA error: out of memory"), None);
        let none = SignatureTable::load("", "empty.toml", &quirks()).expect("load");
        assert_eq!(none.line_vendor.named_by("ROCm error: out of memory"), None);
    }

    #[test]
    fn a_legacy_pool_fix_without_its_advice_is_refused() {
        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['a']\nfix = \"legacy-pool\"\nsources = [\"https://example.org\"]\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .expect_err("no [legacy_pool]")
            .to_string();
        assert!(e.contains("[legacy_pool]"), "{e}");
        assert!(e.starts_with("sig.toml:2:"), "{e}");
    }

    #[test]
    fn a_cmake_heading_without_sources_is_refused() {
        let text = "[cmake_unused]\nheading = \"Manually-specified variables were not used\"\nsources = []\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .expect_err("no sources")
            .to_string();
        assert!(e.contains("[cmake_unused]"), "{e}");
    }

    #[test]
    fn bad_rows_are_errors_naming_the_line_and_field() {
        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['(unclosed']\nsources = [\"https://example.org\"]\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("sig.toml:2:"), "{e}");
        assert!(e.contains("`match`[0] is not a valid regex"), "{e}");

        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['a']\nsources = [\"https://example.org\"]\n[[signature.explains]]\nquirk = \"Q999\"\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .unwrap_err()
            .to_string();
        assert!(e.contains("Q999"), "{e}");

        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['a']\nsources = [\"https://example.org\"]\nseverity = \"high\"\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .unwrap_err()
            .to_string();
        assert!(e.contains("severity"), "{e}");

        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['a']\ncontext = [\"nope\"]\nsources = [\"https://example.org\"]\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a `fact` row"), "{e}");

        let text = "[[signature]]\nid = \"x\"\ntitle = \"t\"\nlog = \"llama\"\nclass = \"oom\"\nmatch = ['a']\nconsequence_of = [\"nope\"]\nsources = [\"https://example.org\"]\n";
        let e = SignatureTable::load(text, "sig.toml", &quirks())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`consequence_of` names `nope`"), "{e}");
    }

    #[test]
    fn first_row_claims_the_line_and_near_must_be_close() {
        let t = SignatureTable::load(crate::profiles::BUNDLED_SIGNATURES, "bundled", &quirks())
            .expect("load");
        let c = Corpus::single(
            "log",
            "ROCm error: out of memory\n  current device: 1, in function alloc at ggml-cuda.cu:430\n  ggml_cuda_device_malloc(&ptr, look_ahead_size, device)\n",
        );
        let hits = t.scan(&c, &[LogKind::Llama]);
        assert_eq!(hits.len(), 1);
        assert_eq!(t.rows[hits[0].row].spec.id, "legacy-pool-oom");
        assert_eq!(hits[0].quotes.len(), 3);
        assert_eq!(hits[0].device, Some(1));
        // The statement too far below the error line: only the general out-of-memory row.
        let c = Corpus::single(
            "log",
            "ROCm error: out of memory\na\nb\nc\nd\ne\n  ggml_cuda_device_malloc(&ptr, look_ahead_size, device)\n",
        );
        let hits = t.scan(&c, &[LogKind::Llama]);
        assert_eq!(hits.len(), 1);
        assert_eq!(t.rows[hits[0].row].spec.id, "cuda-oom");
        // Another error there: the catch-all row.
        let c = Corpus::single(
            "log",
            "ROCm error: invalid argument\na\nb\nc\nd\ne\n  ggml_cuda_device_malloc(&ptr, look_ahead_size, device)\n",
        );
        let hits = t.scan(&c, &[LogKind::Llama]);
        assert_eq!(hits.len(), 1);
        assert_eq!(t.rows[hits[0].row].spec.id, "ggml-cuda-error");
    }
}
