//! What every stage hands on: a finding (an id, a level, what was seen, why it matters, the fix)
//! and its level. The stages before ranking produce findings; ranking orders them; rendering
//! writes them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::corpus::Quote;
use super::plan_summary::PlanGroup;
use crate::quirks::Severity;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = crate::report::accept_info)]
pub enum Level {
    /// Good to know; not a problem (documents may say `info`, the name before 0.2).
    #[serde(alias = "info")]
    Note,
    /// A problem: the build works but has a known defect here, or is not what this machine should run.
    Warning,
    /// The build will fail, hang or crash here, or cannot use this machine's GPUs.
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }

    /// Quirk severity → finding level: critical is an error, high and medium are warnings.
    pub fn of(s: Severity) -> Level {
        match s {
            Severity::Critical => Level::Error,
            Severity::High | Severity::Medium => Level::Warning,
            Severity::Low | Severity::Info => Level::Note,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Finding {
    /// Stable identifier (`vmm-compiled-out`, `arch-missing`, `quirk-Q6`, ...).
    pub id: String,
    /// `info` (not a problem), `warning` or `error` (problems: exit 1).
    #[serde(rename = "severity")]
    pub level: Level,
    pub title: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The `-DNAME=VALUE` flags the fix asks for; each is in the plan's line for these devices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// The `NAME=VALUE` runtime variables the fix asks to export.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quirks: Vec<String>,
    /// The devices concerned (`CUDA0 NVIDIA H200`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The input lines it rests on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Quote>,
}

impl Finding {
    pub fn new(
        id: &str,
        level: Level,
        title: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Finding {
            id: id.into(),
            level,
            title: title.into(),
            reason: reason.into(),
            fix: None,
            flags: Vec::new(),
            env: Vec::new(),
            quirks: Vec::new(),
            devices: Vec::new(),
            evidence: Vec::new(),
        }
    }
    /// Records the flags the fix asks for, keeping only those in `g`'s line: a finding never asks
    /// for a flag that the plan it quotes does not have.
    pub fn asks(mut self, g: &PlanGroup, flags: impl IntoIterator<Item = String>) -> Self {
        for fl in flags {
            if g.cmake_args.contains(&fl) && !self.flags.contains(&fl) {
                self.flags.push(fl);
            }
        }
        self
    }
    pub fn evidence(mut self, quotes: impl IntoIterator<Item = Quote>) -> Self {
        // By place, in a set: a log with 100k device lines stays linear.
        let mut seen: std::collections::HashSet<(String, usize)> = self
            .evidence
            .iter()
            .map(|q| (q.input.clone(), q.line))
            .collect();
        for q in quotes {
            if seen.insert((q.input.clone(), q.line)) {
                self.evidence.push(q);
            }
        }
        self
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    pub fn quirks(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        for id in ids {
            if !self.quirks.contains(&id) {
                self.quirks.push(id);
            }
        }
        self
    }
    pub fn devices(mut self, d: impl IntoIterator<Item = String>) -> Self {
        self.devices.extend(d);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quirk_levels() {
        assert_eq!(Level::of(Severity::Critical), Level::Error);
        assert_eq!(Level::of(Severity::High), Level::Warning);
        assert_eq!(Level::of(Severity::Info), Level::Note);
    }
}
