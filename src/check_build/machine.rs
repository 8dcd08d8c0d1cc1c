//! The machine a build is judged against: a probe of this machine or a saved report.

use crate::plan::Mode;
use crate::report::Report;

/// What is known about this machine.
#[derive(Debug, Clone)]
pub struct Machine<'a> {
    pub report: &'a Report,
    /// `probe` (measured now) or `report` (a saved `detect --json`).
    pub mode: Mode,
    /// How to name it in messages: `this machine's probe`, `report r.json`.
    pub label: String,
}

/// The machine from a report, for check-build's options.
pub fn machine_from(report: &Report, mode: Mode, label: impl Into<String>) -> Machine<'_> {
    Machine {
        report,
        mode,
        label: label.into(),
    }
}
