//! A Kubernetes Node Feature Discovery (NFD) local feature file: what gpuprobe measured on this
//! node, as node labels a scheduler can select on.
//!
//! NFD's `local` source reads every file in `/etc/kubernetes/node-feature-discovery/features.d/`:
//! one `<namespace>/<name>[=<value>]` per line, `#` comments, a `# +expiry-time=<RFC 3339>`
//! directive after which the lines below it are ignored, files over 64 kB ignored whole, dot
//! files ignored (so a write through a dot-named temporary file and a rename is atomic for it).
//! Labels outside `feature.node.kubernetes.io` and its sub-namespaces may be denied by the NFD
//! master, so gpuprobe's live in a sub-namespace of it. Kubernetes' label syntax: a name of at
//! most 63 characters and a value of at most 63, each empty (values only) or alphanumeric at
//! both ends with `-`, `_`, `.` inside.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::plan::Plan;
use crate::report::{Report, SmokeOutcome};

/// The label namespace (read back by `crate::node_labels`, which owns it).
pub use crate::node_labels::PREFIX;

/// NFD ignores a feature file larger than this.
pub const MAX_FILE_BYTES: usize = 64 * 1024;

/// The longest label name (after the prefix) and value Kubernetes accepts.
pub const MAX_SEGMENT: usize = 63;

/// Whether `s` is a valid label name segment (the part after `prefix/`).
pub fn name_ok(s: &str) -> bool {
    !s.is_empty() && segment_ok(s)
}

/// Whether `s` is a valid label value (empty is valid).
pub fn value_ok(s: &str) -> bool {
    s.is_empty() || segment_ok(s)
}

fn segment_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= MAX_SEGMENT
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `s` made into a valid label value: characters outside the label alphabet become `-`, the ends
/// are trimmed to alphanumerics, and a value longer than 63 keeps its start and gets a short
/// hash of the whole, so two long values never collapse into one label.
pub fn value_of(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.len() <= MAX_SEGMENT {
        return trimmed.to_string();
    }
    use sha2::Digest;
    let hash = sha2::Sha256::digest(s.as_bytes());
    let tag: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
    let head = trimmed[..MAX_SEGMENT - tag.len() - 1]
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{head}-{tag}")
}

/// How bad a smoke outcome is, for the one value a label can hold when several devices of one
/// architecture were measured: the worst wins, and a pass only if every device passed.
fn severity(o: SmokeOutcome) -> u8 {
    match o {
        SmokeOutcome::Pass => 0,
        SmokeOutcome::Partial => 1,
        SmokeOutcome::NotRun => 2,
        SmokeOutcome::BadOutput => 3,
        SmokeOutcome::Fail => 4,
        SmokeOutcome::Crash => 5,
        SmokeOutcome::Hang => 6,
    }
}

/// The labels for this node, by name (without the prefix): GPUs and their architectures, the
/// runtimes, the VMM smoke outcome per architecture and, from the plan for this node, whether a
/// VMM build is advised and the build group gpuprobe would use. Every name and value is valid
/// label syntax; a label that cannot be (an architecture name too long for a label name) is
/// returned apart, as `name=value`, for the caller to name.
pub fn labels(report: &Report, plan: Option<&Plan>) -> (BTreeMap<String, String>, Vec<String>) {
    let mut l = BTreeMap::new();
    l.insert(
        "gpuprobe-version".into(),
        value_of(&report.gpuprobe_version),
    );
    l.insert("gpus".into(), report.devices.len().to_string());
    let mut smoke: BTreeMap<String, SmokeOutcome> = BTreeMap::new();
    for d in &report.devices {
        // The target, without HIP's feature suffix (`gfx90a:sramecc+:xnack-`): what a scheduler
        // selects on and what llama.cpp builds for.
        let arch = value_of(d.arch.split(':').next().unwrap_or(&d.arch));
        if arch.is_empty() {
            continue;
        }
        l.insert(format!("arch.{arch}"), "true".into());
        let seen = smoke.entry(arch).or_insert(d.smoke.outcome);
        if severity(d.smoke.outcome) > severity(*seen) {
            *seen = d.smoke.outcome;
        }
    }
    for (arch, outcome) in smoke {
        l.insert(format!("vmm-smoke.{arch}"), outcome.as_str().into());
    }
    for b in &report.backends {
        let name = b.backend.as_str();
        if let Some(v) = b
            .driver_version
            .as_deref()
            .map(value_of)
            .filter(|v| !v.is_empty())
        {
            l.insert(format!("{name}-driver"), v);
        }
        if let Some(v) = b
            .runtime_version
            .as_deref()
            .map(value_of)
            .filter(|v| !v.is_empty())
        {
            l.insert(format!("{name}-runtime"), v);
        }
    }
    if let Some(p) = plan.filter(|p| !p.refused()) {
        l.insert("backend".into(), p.backend.as_str().into());
        l.insert("llama-build".into(), p.llama.effective_build.to_string());
        // One node is one process: the build it needs is every group of its plan. Usually one;
        // a node whose GPUs need different flags gets one label per group.
        l.insert("build-groups".into(), p.groups.len().to_string());
        if let [g] = p.groups.as_slice() {
            l.insert("build-group".into(), value_of(&g.name));
            l.insert("vmm-build".into(), g.vmm.to_string());
        } else {
            for (i, g) in p.groups.iter().enumerate() {
                l.insert(format!("build-group.{i}"), value_of(&g.name));
                l.insert(format!("vmm-build.{i}"), g.vmm.to_string());
            }
        }
    }
    let (kept, left_out): (BTreeMap<_, _>, BTreeMap<_, _>) = l
        .into_iter()
        .partition(|(k, v)| name_ok(k) && k.len() + PREFIX.len() < 253 && value_ok(v));
    let left_out = left_out
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    (kept, left_out)
}

/// The release asset `gpuprobe prebuilt` picks for the node (and the companion to unpack next to
/// it), at `build`. A name that is not label syntax is left out rather than mangled: a mangled
/// asset name would not download.
pub fn add_prebuilt(
    labels: &mut BTreeMap<String, String>,
    build: u64,
    asset: &str,
    companion: Option<&str>,
) {
    if !value_ok(asset) || companion.is_some_and(|c| !value_ok(c)) {
        return;
    }
    labels.insert("prebuilt".into(), asset.to_string());
    labels.insert("prebuilt-build".into(), build.to_string());
    if let Some(c) = companion {
        labels.insert("prebuilt-companion".into(), c.to_string());
    }
}

/// The whole feature file: a header that says what wrote it, the expiry directive (NFD drops
/// the labels once it passes, so a node that stops re-probing loses stale measurements), and
/// one line per label.
pub fn feature_file(
    labels: &BTreeMap<String, String>,
    written: SystemTime,
    ttl: Duration,
) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "# Written by gpuprobe detect --format nfd at {} (NFD local feature file).\n",
        rfc3339(written)
    ));
    o.push_str(&format!("# +expiry-time={}\n", rfc3339(written + ttl)));
    for (k, v) in labels {
        o.push_str(&format!("{PREFIX}/{k}={v}\n"));
    }
    o
}

/// `t` as RFC 3339 in UTC, to the second (`2026-12-01T20:27:14Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// days-to-civil arithmetic, in 400-year eras).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day in a year divisible by 400) and a time of day.
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723)),
            "2000-02-29T01:02:03Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_990_034)),
            "2026-11-29T22:07:14Z"
        );
    }

    #[test]
    fn values_are_made_valid_and_long_ones_stay_distinct() {
        assert_eq!(value_of("sm_90"), "sm_90");
        assert_eq!(value_of("gfx90a:sramecc+:xnack-"), "gfx90a-sramecc--xnack");
        assert_eq!(value_of("  580.159.04 "), "580.159.04");
        assert_eq!(value_of("::"), "");
        let a = value_of(&"x".repeat(100));
        let b = value_of(&format!("{}y", "x".repeat(99)));
        assert!(value_ok(&a) && value_ok(&b) && a != b, "{a} {b}");
        assert!(a.len() <= MAX_SEGMENT);
    }
}
