//! The last step before rendering: every finding names the quirks it lists, and the decisive
//! finding comes first.

use super::finding::{Finding, Level};
use crate::profiles::Knowledge;

/// The decisive finding first: confirmed problems (errors, then warnings), then the failures no
/// signature explains, then notes; within each, the order the stages found them in.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by_key(|f| {
        let unrecognised = f.id.starts_with("unrecognised-");
        (std::cmp::Reverse(f.level), unrecognised, may_apply(f))
    });
}

/// A note that a quirk may apply (its conditions only, some unknown): folded in the human report.
pub fn may_apply(f: &Finding) -> bool {
    f.level == Level::Note && f.id.starts_with("quirk-") && f.title.contains(" may apply: ")
}

/// Each finding names the quirk ids it lists (in its title, reason or fix).
pub fn name_quirks(findings: &mut [Finding], k: &Knowledge) {
    let known: Vec<String> = k.quirks.iter().map(|q| q.id.clone()).collect();
    for f in findings {
        let text = format!(
            "{} {} {}",
            f.title,
            f.reason,
            f.fix.as_deref().unwrap_or("")
        );
        let named = crate::plan::named_quirks(&text, &known);
        let unnamed: Vec<String> = f
            .quirks
            .iter()
            .filter(|q| !named.contains(q))
            .cloned()
            .collect();
        if !unnamed.is_empty() {
            f.reason.push_str(&format!(" (see {})", unnamed.join(", ")));
        }
    }
}
