//! The quirk database: known per-architecture / per-version problems and what to do about them.
//!
//! Records live in `profiles/quirks.toml` (and user files merged over it). Matching is three-valued:
//! a condition on something unknown (a runtime version not given, a device count not known in
//! targets-only mode) is *unknown*, not false. The resolver denies VMM when a deny record *could*
//! match, but only sets flags or env when a record *does* match; a record that could match turns
//! into a warning that says what would make it apply.

pub mod ids;
mod matching;
pub mod record;

pub use matching::{Condition, Context, Evaluation, Field, SmokeCondition, Tri};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::evidence::Level;
use crate::platform::Os;
use crate::report::Vendor;
use crate::targets::TargetTable;
use crate::version::{Version, VersionRange};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuirkFile {
    #[serde(default)]
    pub quirk: Vec<Quirk>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    Low,
    LowMedium,
    Medium,
    MediumHigh,
    High,
}

impl Severity {
    /// The spelling used in the TOML files.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl Confidence {
    /// The spelling used in the TOML files.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::LowMedium => "low-medium",
            Confidence::Medium => "medium",
            Confidence::MediumHigh => "medium-high",
            Confidence::High => "high",
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Quirk {
    pub id: String,
    pub title: String,
    pub summary: String,
    pub severity: Severity,
    pub confidence: Confidence,
    /// Recorded for explanation only: never turned into a flag, deny or warning.
    #[serde(default)]
    pub contested: bool,
    #[serde(rename = "match", default)]
    pub when: Match,
    #[serde(default)]
    pub effect: Effect,
    #[serde(default)]
    pub sources: Vec<String>,
    /// For records written by `gpuprobe quirks record`: where and when it was measured. Such a
    /// record may have no source URL yet (it is the evidence to send upstream), and its range is
    /// the runtime it was measured with (a later runtime is measured again by the probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_on: Option<String>,
    /// The first fixed versions and the source of the fix; absent: no fix known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_in: Option<FixedIn>,
    /// The architectures and OSes the sources report the problem on. A record whose `match`
    /// names more than this must say so in `extrapolated` (`tests/knowledge.rs` checks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<Seen>,
    /// What of the record's scope is inferred rather than reported (the same mechanism on a
    /// neighbouring architecture, say). Such a record may not deny VMM outright nor refuse, and
    /// its confidence is at most `medium`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extrapolated: Option<String>,
}

/// Where the sources report a problem: architectures (target names or family tokens) and OSes.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Seen {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<Os>,
}

/// Conditions, all of which must hold. An absent condition always holds.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<Vendor>,
    /// Target names or family tokens (`gfx120X`); empty means any architecture.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<Os>,
    /// ROCm (AMD) or CUDA toolkit/runtime versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<VersionRange>,
    /// Driver versions (NVIDIA driver such as `595.84`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<VersionRange>,
    /// llama.cpp build numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llama_builds: Option<VersionRange>,
    /// Linux kernel versions (`uname -r`, numbers only: `6.18.3-arch1` is 6.18.3). Known only
    /// from a measured report; a record with it never matches on another OS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<VersionRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apu: Option<bool>,
    /// More than one GPU of this vendor will be used together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_gpu: Option<bool>,
    /// An integrated GPU is visible next to a discrete one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub igpu_with_dgpu: Option<bool>,
    /// The GPUs of this vendor used together are of more than one architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_archs: Option<bool>,
    /// The build has VMM compiled in (`true`) or uses the legacy pool (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_build: Option<bool>,
    /// The plan recommends `GGML_CUDA_ENABLE_UNIFIED_MEMORY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uma: Option<bool>,
    /// A peer pair without peer access, or whose verified copy failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_problem: Option<bool>,
    /// The measured smoke outcome: `pass`, `fail`, `hang`, `crash`, `reserve-fail`...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smoke: Vec<SmokeCondition>,
    /// Environment variables that are set (any value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_set: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VmmEffect {
    /// Keep the legacy pool (HIP: `GGML_HIP_NO_VMM=ON`, CUDA: `GGML_CUDA_NO_VMM=ON`); no
    /// measurement lifts it.
    Deny,
    /// Keep the legacy pool unless the smoke test passed for this architecture, runtime series
    /// and OS (on this machine, or on record).
    DenyUnlessSmokePass,
    /// Keep the legacy pool unless a VMM build of llama.cpp passed a real workload for this
    /// architecture, runtime series and OS (`check-build --exercise`).
    DenyUnlessWorkloadPass,
    /// Keep the legacy pool unless a VMM build of llama.cpp ran a whole model in every
    /// configuration, agreeing with the CPU, for this architecture, runtime series and OS
    /// (`check-build --exercise inference`): for failures that operator tests cannot reach.
    DenyUnlessInferencePass,
}

impl VmmEffect {
    /// The evidence that lifts the deny; `None` when nothing does.
    pub fn lifted_by(self) -> Option<Level> {
        match self {
            VmmEffect::Deny => None,
            VmmEffect::DenyUnlessSmokePass => Some(Level::Smoke),
            VmmEffect::DenyUnlessWorkloadPass => Some(Level::Workload),
            VmmEffect::DenyUnlessInferencePass => Some(Level::Inference),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VmmEffect::Deny => "deny",
            VmmEffect::DenyUnlessSmokePass => "deny-unless-smoke-pass",
            VmmEffect::DenyUnlessWorkloadPass => "deny-unless-workload-pass",
            VmmEffect::DenyUnlessInferencePass => "deny-unless-inference-pass",
        }
    }
}

/// The first fixed version of a problem, per version axis, and where the fix is documented. A
/// record's range on an axis ends just below its fixed version (exclusive), and a range may have
/// an upper bound only this way: a problem seen up to some version is open-ended until a fix is
/// known.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FixedIn {
    /// First ROCm (AMD) / CUDA (NVIDIA) version without the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Version>,
    /// First driver version without the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<Version>,
    /// First llama.cpp build without the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llama_build: Option<u64>,
    /// First Linux kernel without the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Version>,
    /// https URLs where the fix is documented (the fix itself, or a report that it is fixed).
    #[serde(default)]
    pub sources: Vec<String>,
    /// What the fix is, in a few words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl FixedIn {
    /// `ROCm 7.14`, `llama.cpp build 8863`: each fixed version named, for people.
    pub fn describe(&self, vendor: Option<Vendor>) -> String {
        let kit = vendor.map_or("runtime", Vendor::toolkit);
        let mut parts = Vec::new();
        if let Some(v) = &self.runtime {
            parts.push(format!("{kit} {v}"));
        }
        if let Some(v) = &self.driver {
            parts.push(format!("driver {v}"));
        }
        if let Some(b) = self.llama_build {
            parts.push(format!("llama.cpp build {b}"));
        }
        if let Some(v) = &self.kernel {
            parts.push(format!("Linux {v}"));
        }
        parts.join(", ")
    }
}

/// The severity policy for a record's `warn` text: a warning when the user must act for the
/// build to be right; a note when it informs (what the plan did, advice for run time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WarnLevel {
    #[default]
    Warning,
    Note,
}

impl WarnLevel {
    fn is_default(&self) -> bool {
        *self == WarnLevel::Warning
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm: Option<VmmEffect>,
    /// CMake cache values to set (`GGML_CUDA_NO_PEER_COPY = "ON"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Runtime environment to recommend (never exported by the build fragment).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// When the env advice applies (a workload condition the tool cannot see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_when: Option<String>,
    /// What to tell the user when the record matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warn: Option<String>,
    /// How `warn` is shown: a warning (the user must act) or a note (it informs).
    #[serde(default, skip_serializing_if = "WarnLevel::is_default")]
    pub level: WarnLevel,
    /// Runtime environment that must not be recommended in a plan this record matches (another
    /// record's advice that this one shows to be harmful); the record's `warn` says what instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withdraw_env: Vec<String>,
    /// The plan cannot work: refuse with this reason (exit 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuse: Option<String>,
    /// GitHub runner image to use for this OS in generated workflows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
}

impl QuirkFile {
    /// Checks what serde cannot: unique ids, URLs, known flag names, family tokens.
    pub fn validate(&self, text: &str, origin: &str) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for q in &self.quirk {
            let at = |message: String, fix: &str| Error::Input {
                input: origin.to_string(),
                line: crate::toml_file::line_of_id(text, &q.id),
                message,
                fix: fix.to_string(),
            };
            if !seen.insert(q.id.clone()) {
                return Err(at(
                    format!("quirk id `{}` appears twice", q.id),
                    "give each record its own id",
                ));
            }
            if q.sources.is_empty() && q.measured_on.is_none() {
                return Err(at(
                    format!("quirk `{}`: field `sources` is empty", q.id),
                    "add at least one URL where the problem is documented (or `measured_on` for a record measured locally)",
                ));
            }
            if let Some(bad) = q.sources.iter().find(|s| !s.starts_with("https://")) {
                return Err(at(
                    format!(
                        "quirk `{}`: field `sources`: `{bad}` is not an https URL",
                        q.id
                    ),
                    "write each source as a full https:// URL",
                ));
            }
            for name in q.effect.set.keys().chain(q.effect.env.keys()) {
                if name == "GGML_USE_VMM" {
                    return Err(at(
                        format!(
                            "quirk `{}`: `GGML_USE_VMM` is not a CMake option or env var",
                            q.id
                        ),
                        "use GGML_HIP_NO_VMM / GGML_CUDA_NO_VMM (field `effect.vmm`)",
                    ));
                }
            }
            if let Some((field, why)) = unsafe_field(q) {
                return Err(at(
                    format!(
                        "quirk `{}`: field `{field}`: {why}",
                        crate::neutral::inline(&q.id)
                    ),
                    "names are letters, digits and _; CMake values plain words; text one line without control characters",
                ));
            }
            if q.effect.env.get("GGML_CUDA_P2P").is_some_and(|v| v == "0") {
                return Err(at(
                    format!(
                        "quirk `{}`: GGML_CUDA_P2P=0 enables P2P (the variable is checked for presence)",
                        q.id
                    ),
                    "leave GGML_CUDA_P2P unset, or use GGML_CUDA_NO_PEER_COPY=ON",
                ));
            }
            check_fix_bound(q).map_err(|(message, fix)| at(message, fix))?;
            check_extrapolated(q).map_err(|(message, fix)| at(message, fix))?;
            if q.contested
                && (q.effect.vmm.is_some() || !q.effect.set.is_empty() || q.effect.refuse.is_some())
            {
                return Err(at(
                    format!("quirk `{}` is marked contested but has an effect", q.id),
                    "contested records are for explanation only: remove `effect`, or `contested`",
                ));
            }
        }
        Ok(())
    }
}

impl QuirkFile {
    /// Holds every record's architectures to the target table, as `--targets` is held: a name
    /// the table lacks (`gfx110`) or of the other vendor than `match.vendor` would make the
    /// record never match, without a word. A record measured here (`measured_on`, written by
    /// `quirks record`) may name a well-formed architecture newer than the table.
    pub fn check_targets(&self, text: &str, origin: &str, targets: &TargetTable) -> Result<()> {
        for q in &self.quirk {
            let at = |message: String, fix: String| Error::Input {
                input: origin.to_string(),
                line: crate::toml_file::line_of_id(text, &q.id),
                message: format!("quirk `{}`: {message}", crate::neutral::inline(&q.id)),
                fix,
            };
            let fields = q.when.archs.iter().map(|a| ("match.archs", a)).chain(
                q.seen
                    .iter()
                    .flat_map(|s| &s.archs)
                    .map(|a| ("seen.archs", a)),
            );
            for (field, arch) in fields {
                let vendors = vendors_of(targets, arch);
                if vendors.is_empty() {
                    let canonical = crate::targets::normalise(arch);
                    let measured_new = q.measured_on.is_some()
                        && crate::targets::vendor_of_name(&canonical).is_some()
                        && canonical == *arch;
                    if measured_new {
                        continue;
                    }
                    let fix = if !vendors_of(targets, &canonical).is_empty() {
                        format!("write it as `{canonical}`, as the target table names it")
                    } else {
                        let near = targets.nearest(&canonical);
                        let list = "`gpuprobe quirks targets` lists the names; a GPU the table lacks goes into profiles/targets.toml first";
                        if near.is_empty() {
                            list.to_string()
                        } else {
                            format!("did you mean {}? ({list})", near.join(", "))
                        }
                    };
                    return Err(at(
                        format!(
                            "field `{field}`: unknown GPU target `{}` (the record would never match it)",
                            crate::neutral::inline(arch)
                        ),
                        fix,
                    ));
                }
                if field == "match.archs"
                    && let Some(v) = q.when.vendor
                    && !vendors.contains(&v)
                {
                    return Err(at(
                        format!(
                            "`match.vendor = \"{}\"` with `{}` in `match.archs`, an {} target: the record can never match",
                            vendor_word(v),
                            crate::neutral::inline(arch),
                            vendors
                                .iter()
                                .map(|v| vendor_word(*v))
                                .collect::<Vec<_>>()
                                .join("/")
                        ),
                        format!(
                            "remove `{}` from match.archs, or set match.vendor to the vendor of the GPUs the record is for",
                            crate::neutral::inline(arch)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The vendors of a target name or family token as the table has them; empty when unknown.
fn vendors_of(targets: &TargetTable, arch: &str) -> Vec<Vendor> {
    let mut out: Vec<Vendor> = Vec::new();
    let names: Vec<&str> = match targets
        .family
        .iter()
        .find(|f| f.token.eq_ignore_ascii_case(arch))
    {
        Some(f) => f.members.iter().map(String::as_str).collect(),
        None => vec![arch],
    };
    for n in names {
        if let Some(t) = targets
            .target
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(n))
            && !out.contains(&t.vendor)
        {
            out.push(t.vendor);
        }
    }
    out
}

fn vendor_word(v: Vendor) -> &'static str {
    match v {
        Vendor::Amd => "amd",
        Vendor::Nvidia => "nvidia",
    }
}

impl Quirk {
    /// Does the record do anything when it matches (deny, warn, flags, env, refuse)?
    pub fn has_effect(&self) -> bool {
        let e = &self.effect;
        e.vmm.is_some()
            || e.warn.is_some()
            || !e.set.is_empty()
            || !e.env.is_empty()
            || e.refuse.is_some()
            || !e.withdraw_env.is_empty()
    }

    /// The record's version ranges that are written with an upper bound (`runtime`, `driver`,
    /// `llama_builds`), as (field, range).
    pub fn bounded_ranges(&self) -> Vec<(&'static str, &VersionRange)> {
        [
            ("runtime", self.when.runtime.as_ref()),
            ("driver", self.when.driver.as_ref()),
            ("llama_builds", self.when.llama_builds.as_ref()),
            ("kernel", self.when.kernel.as_ref()),
        ]
        .into_iter()
        .filter_map(|(n, r)| r.filter(|r| r.max.is_some()).map(|r| (n, r)))
        .collect()
    }
}

/// The fix-bound rule: a record that acts may end its range only at a recorded fix, written as
/// `fixed_in` with the fix's source; never at the last version someone saw broken. Records
/// measured locally (`measured_on`) are scoped to the runtime they were measured with instead.
fn check_fix_bound(q: &Quirk) -> std::result::Result<(), (String, &'static str)> {
    if let Some(f) = &q.fixed_in {
        if f.runtime.is_none()
            && f.driver.is_none()
            && f.llama_build.is_none()
            && f.kernel.is_none()
        {
            return Err((
                format!("quirk `{}`: `fixed_in` names no fixed version", q.id),
                "give fixed_in.runtime, fixed_in.driver, fixed_in.llama_build or fixed_in.kernel",
            ));
        }
        if f.sources.is_empty() {
            return Err((
                format!("quirk `{}`: `fixed_in` has no `sources`", q.id),
                "add the URL of the fix (or of a report that it is fixed) to fixed_in.sources",
            ));
        }
        if let Some(bad) = f.sources.iter().find(|s| !s.starts_with("https://")) {
            return Err((
                format!(
                    "quirk `{}`: field `fixed_in.sources`: `{bad}` is not an https URL",
                    q.id
                ),
                "write each source as a full https:// URL",
            ));
        }
        let below_min = |r: Option<&VersionRange>, v: &Version| {
            r.and_then(|r| r.min.as_ref()).is_some_and(|min| v <= min)
        };
        if f.runtime
            .as_ref()
            .is_some_and(|v| below_min(q.when.runtime.as_ref(), v))
            || f.driver
                .as_ref()
                .is_some_and(|v| below_min(q.when.driver.as_ref(), v))
            || f.llama_build
                .is_some_and(|b| below_min(q.when.llama_builds.as_ref(), &Version::from_number(b)))
            || f.kernel
                .as_ref()
                .is_some_and(|v| below_min(q.when.kernel.as_ref(), v))
        {
            return Err((
                format!(
                    "quirk `{}`: a `fixed_in` version is not above the start of its range",
                    q.id
                ),
                "the fixed version is the first one without the problem: it comes after the range's minimum",
            ));
        }
    }
    if q.contested || q.measured_on.is_some() || !q.has_effect() {
        return Ok(());
    }
    if let Some((field, range)) = q.bounded_ranges().into_iter().next() {
        return Err((
            format!(
                "quirk `{}`: `match.{field} = \"{range}\"` ends at a version without a recorded fix",
                q.id
            ),
            "a range ends at the first fixed version: write it open-ended (\"min:\") and, if a fix is known, give it as fixed_in with its sources",
        ));
    }
    Ok(())
}

/// A record whose scope is partly inferred (`extrapolated`) may warn and may keep VMM off until
/// evidence lifts it, but may not deny outright, refuse, or claim more than medium confidence:
/// a deny is for what was seen.
fn check_extrapolated(q: &Quirk) -> std::result::Result<(), (String, &'static str)> {
    let Some(text) = &q.extrapolated else {
        return Ok(());
    };
    if text.trim().is_empty() {
        return Err((
            format!("quirk `{}`: `extrapolated` is empty", q.id),
            "say what of the scope is inferred, or remove the field",
        ));
    }
    if q.effect.vmm == Some(VmmEffect::Deny) || q.effect.refuse.is_some() {
        return Err((
            format!(
                "quirk `{}` is extrapolated but denies VMM outright or refuses the plan",
                q.id
            ),
            "an inferred scope may warn or use deny-unless-smoke-pass / deny-unless-workload-pass / deny-unless-inference-pass; split the seen part into its own record for a deny",
        ));
    }
    if q.confidence > Confidence::Medium {
        return Err((
            format!(
                "quirk `{}` is extrapolated but has confidence `{}`",
                q.id,
                q.confidence.as_str()
            ),
            "an inferred scope has confidence medium or lower",
        ));
    }
    Ok(())
}

/// The first field of `q` that could not be carried safely into a build script, a workflow or a
/// terminal, with why: flag and variable names that are not identifiers, CMake values that are not
/// plain words, text with control characters.
fn unsafe_field(q: &Quirk) -> Option<(String, String)> {
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let control = |s: &str| s.chars().any(crate::neutral::is_hostile);
    for (name, value) in &q.effect.set {
        if !ident(name) {
            return Some((
                format!("effect.set.{}", crate::neutral::inline(name)),
                "not a CMake variable name".into(),
            ));
        }
        if name.starts_with("CMAKE_") {
            return Some((
                format!("effect.set.{name}"),
                "CMake's own variables (compilers, launchers, toolchain files) are never set by a quirk; only llama.cpp options are".into(),
            ));
        }
        // One value is one CMake list item: llama.cpp expands some options unquoted into
        // compiler flag lists (`list(APPEND CUDA_FLAGS -compress-mode=${GGML_CUDA_COMPRESSION_MODE})`),
        // where a `;` would add a flag of the quirk's choosing (`-ccbin=PROGRAM`), and a value
        // that starts with `-` would be one.
        if value.contains(';') || value.starts_with('-') {
            return Some((
                format!("effect.set.{name}"),
                format!(
                    "`{}` is not one plain value: a `;` separates CMake list items and a leading `-` reads as a flag, so it could add compiler flags of its own",
                    crate::neutral::inline(value)
                ),
            ));
        }
        if !crate::neutral::is_plain_word(&format!("-D{name}={value}")) {
            return Some((
                format!("effect.set.{name}"),
                format!(
                    "`{}` holds a space, quote, `$` or other character a CMake argument cannot carry through a build script",
                    crate::neutral::inline(value)
                ),
            ));
        }
    }
    for (name, value) in &q.effect.env {
        if !ident(name) {
            return Some((
                format!("effect.env.{}", crate::neutral::inline(name)),
                "not an environment variable name".into(),
            ));
        }
        if control(value) {
            return Some((
                format!("effect.env.{name}"),
                "holds a control character".into(),
            ));
        }
    }
    if let Some(name) = q.effect.withdraw_env.iter().find(|n| !ident(n)) {
        return Some((
            format!("effect.withdraw_env ({})", crate::neutral::inline(name)),
            "not an environment variable name".into(),
        ));
    }
    if let Some(r) = &q.effect.runner
        && !r
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Some((
            "effect.runner".into(),
            "not a runner label (letters, digits, . _ -)".into(),
        ));
    }
    // Prose may span lines (TOML's multi-line strings); nothing else may.
    if q.summary
        .chars()
        .any(|c| c != '\n' && c != '\t' && crate::neutral::is_hostile(c))
    {
        return Some((
            "summary".into(),
            "holds a control character (an escape, carriage return...)".into(),
        ));
    }
    let texts = [
        ("id", Some(&q.id)),
        ("title", Some(&q.title)),
        ("effect.env_when", q.effect.env_when.as_ref()),
        ("effect.warn", q.effect.warn.as_ref()),
        ("effect.refuse", q.effect.refuse.as_ref()),
        ("measured_on", q.measured_on.as_ref()),
        ("extrapolated", q.extrapolated.as_ref()),
    ];
    for (field, text) in texts {
        if text.is_some_and(|t| control(t)) {
            return Some((
                field.into(),
                "holds a control character (a newline, escape...)".into(),
            ));
        }
    }
    q.when
        .archs
        .iter()
        .chain(&q.when.env_set)
        .chain(q.seen.iter().flat_map(|s| &s.archs))
        .chain(&q.sources)
        .chain(q.fixed_in.iter().flat_map(|f| &f.sources))
        .find(|t| control(t))
        .map(|_| ("match/sources".into(), "holds a control character".into()))
}
