//! Three-valued matching of quirk records against what is known about one target or device.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{FixedIn, Match, Quirk};
use crate::platform::Os;
use crate::report::{Smoke, SmokeOutcome, Vendor};
use crate::targets::TargetTable;
use crate::version::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tri {
    Yes,
    No,
    Unknown,
}

impl Tri {
    fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::No, _) | (_, Tri::No) => Tri::No,
            (Tri::Unknown, _) | (_, Tri::Unknown) => Tri::Unknown,
            _ => Tri::Yes,
        }
    }
    fn of(b: bool) -> Tri {
        if b { Tri::Yes } else { Tri::No }
    }
    /// Could the record apply? (Yes or Unknown.)
    pub fn possible(self) -> bool {
        self != Tri::No
    }
}

/// A smoke outcome as quirk records name it (`when.smoke`): the report's outcomes, with a fail
/// at the reserve stage (`reserve-fail`) told apart from other fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmokeCondition {
    Pass,
    Fail,
    ReserveFail,
    Hang,
    Crash,
    BadOutput,
    NotRun,
    Partial,
}

impl SmokeCondition {
    /// A device's smoke test, as a condition.
    pub fn of(s: &Smoke) -> Self {
        match s.outcome {
            SmokeOutcome::Fail if s.reserve_failed() => SmokeCondition::ReserveFail,
            SmokeOutcome::Fail => SmokeCondition::Fail,
            SmokeOutcome::Pass => SmokeCondition::Pass,
            SmokeOutcome::Hang => SmokeCondition::Hang,
            SmokeOutcome::Crash => SmokeCondition::Crash,
            SmokeOutcome::BadOutput => SmokeCondition::BadOutput,
            SmokeOutcome::NotRun => SmokeCondition::NotRun,
            SmokeOutcome::Partial => SmokeCondition::Partial,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SmokeCondition::Pass => "pass",
            SmokeCondition::Fail => "fail",
            SmokeCondition::ReserveFail => "reserve-fail",
            SmokeCondition::Hang => "hang",
            SmokeCondition::Crash => "crash",
            SmokeCondition::BadOutput => "bad-output",
            SmokeCondition::NotRun => "not-run",
            SmokeCondition::Partial => "partial",
        }
    }
}

/// What is known about one target (declared) or device (probed). `None` means unknown.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub targets: &'a TargetTable,
    pub vendor: Vendor,
    pub arch: &'a str,
    pub os: Option<Os>,
    pub runtime: Option<&'a Version>,
    pub driver: Option<&'a Version>,
    pub llama_build: Option<u64>,
    /// The Linux kernel (from a measured report; unknown for declared targets).
    pub kernel: Option<&'a Version>,
    pub apu: Option<bool>,
    pub multi_gpu: Option<bool>,
    pub igpu_with_dgpu: Option<bool>,
    pub mixed_archs: Option<bool>,
    pub vmm_build: Option<bool>,
    pub uma: Option<bool>,
    pub peer_problem: Option<bool>,
    pub smoke: Option<SmokeCondition>,
    pub env_set: &'a [String],
}

/// What one condition of a record is about; its `Display` is the name `--explain` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Vendor,
    Arch,
    Os,
    Runtime,
    Driver,
    LlamaBuild,
    Kernel,
    Apu,
    MultiGpu,
    IgpuWithDgpu,
    MixedArchs,
    VmmBuild,
    Uma,
    PeerProblem,
    Smoke,
    Env,
}

impl Field {
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Vendor => "vendor",
            Field::Arch => "arch",
            Field::Os => "os",
            Field::Runtime => "runtime",
            Field::Driver => "driver",
            Field::LlamaBuild => "llama.cpp build",
            Field::Kernel => "linux kernel",
            Field::Apu => "apu",
            Field::MultiGpu => "multi-gpu",
            Field::IgpuWithDgpu => "igpu next to dgpu",
            Field::MixedArchs => "gpus of several architectures",
            Field::VmmBuild => "vmm build",
            Field::Uma => "unified memory",
            Field::PeerProblem => "peer problem",
            Field::Smoke => "smoke",
            Field::Env => "env",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one condition of a record went: `arch: yes (gfx1100 in [gfx110X])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub field: Field,
    pub verdict: Tri,
    /// What was compared, for people.
    pub detail: String,
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.verdict {
            Tri::Yes => "yes",
            Tri::No => "no",
            Tri::Unknown => "unknown",
        };
        write!(f, "{}: {mark} ({})", self.field, self.detail)
    }
}

/// A record's verdict and the conditions behind it, in the record's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    pub verdict: Tri,
    pub conditions: Vec<Condition>,
}

impl Evaluation {
    /// The conditions whose facts are not known.
    pub fn unknowns(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| c.verdict == Tri::Unknown)
    }

    /// Every condition, `; `-separated (for `--explain`).
    pub fn explain(&self) -> String {
        self.conditions
            .iter()
            .map(Condition::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Quirk {
    /// The verdict and how each condition went. A version at or past the record's `fixed_in`
    /// version does not match.
    pub fn evaluate(&self, ctx: &Context<'_>) -> Evaluation {
        self.when.evaluate_fixed(ctx, self.fixed_in.as_ref())
    }
}

impl Match {
    pub fn evaluate(&self, ctx: &Context<'_>) -> Evaluation {
        self.evaluate_fixed(ctx, None)
    }

    fn evaluate_fixed(&self, ctx: &Context<'_>, fix: Option<&FixedIn>) -> Evaluation {
        let mut conditions = self.place_conditions(ctx);
        conditions.extend(self.version_conditions(ctx, fix));
        conditions.extend(self.state_conditions(ctx));
        let verdict = conditions.iter().fold(Tri::Yes, |v, c| v.and(c.verdict));
        Evaluation {
            verdict,
            conditions,
        }
    }

    /// Vendor, architecture, OS.
    fn place_conditions(&self, ctx: &Context<'_>) -> Vec<Condition> {
        let mut conditions = Vec::new();
        let mut check = recorder(&mut conditions);
        if let Some(v) = self.vendor {
            check(
                Field::Vendor,
                Tri::of(v == ctx.vendor),
                format!("{:?} vs {:?}", v, ctx.vendor).to_lowercase(),
            );
        }
        if !self.archs.is_empty() {
            let hit = self
                .archs
                .iter()
                .any(|a| arch_matches(ctx.targets, a, ctx.arch));
            check(
                Field::Arch,
                Tri::of(hit),
                format!("{} in [{}]", ctx.arch, self.archs.join(", ")),
            );
        }
        if !self.os.is_empty() {
            let t = match ctx.os {
                Some(os) => Tri::of(self.os.contains(&os)),
                None => Tri::Unknown,
            };
            let list: Vec<&str> = self.os.iter().map(|o| o.as_str()).collect();
            check(
                Field::Os,
                t,
                format!(
                    "{} in [{}]",
                    ctx.os.map_or("unknown", |o| o.as_str()),
                    list.join(", ")
                ),
            );
        }
        drop(check);
        conditions
    }

    /// Runtime, driver and llama.cpp build: in the range and below the fixed version.
    fn version_conditions(&self, ctx: &Context<'_>, fix: Option<&FixedIn>) -> Vec<Condition> {
        let mut conditions = Vec::new();
        let mut check = recorder(&mut conditions);
        let build = ctx.llama_build.map(Version::from_number);
        let fixed_build = fix.and_then(|f| f.llama_build).map(Version::from_number);
        for (field, r, have, fixed) in [
            (
                Field::Runtime,
                self.runtime.as_ref(),
                ctx.runtime,
                fix.and_then(|f| f.runtime.as_ref()),
            ),
            (
                Field::Driver,
                self.driver.as_ref(),
                ctx.driver,
                fix.and_then(|f| f.driver.as_ref()),
            ),
            (
                Field::LlamaBuild,
                self.llama_builds.as_ref(),
                build.as_ref(),
                fixed_build.as_ref(),
            ),
        ] {
            if r.is_none() && fixed.is_none() {
                continue;
            }
            let t = match have {
                None => Tri::Unknown,
                Some(v) => Tri::of(r.is_none_or(|r| r.contains(v)) && fixed.is_none_or(|f| v < f)),
            };
            let shown = have.map_or_else(|| "unknown".to_string(), |v| v.to_string());
            let range = r.map_or_else(|| ":".to_string(), |r| r.to_string());
            let detail = match fixed {
                Some(f) => format!("{shown} in \"{range}\", fixed in {f}"),
                None => format!("{shown} in \"{range}\""),
            };
            check(field, t, detail);
        }
        if self.kernel.is_some() || fix.is_some_and(|f| f.kernel.is_some()) {
            let fixed = fix.and_then(|f| f.kernel.as_ref());
            let range = self.kernel.as_ref();
            // A kernel condition is about Linux: on another OS it does not hold.
            let t = match (ctx.os, ctx.kernel) {
                (Some(os), _) if os != Os::Linux => Tri::No,
                (_, None) => Tri::Unknown,
                (_, Some(v)) => {
                    Tri::of(range.is_none_or(|r| r.contains(v)) && fixed.is_none_or(|f| v < f))
                }
            };
            let shown = ctx
                .kernel
                .map_or_else(|| "unknown".to_string(), |v| v.to_string());
            let range = range.map_or_else(|| ":".to_string(), |r| r.to_string());
            let detail = match fixed {
                Some(f) => format!("{shown} in \"{range}\", fixed in {f}"),
                None => format!("{shown} in \"{range}\""),
            };
            check(Field::Kernel, t, detail);
        }
        drop(check);
        conditions
    }

    /// The machine's and the build's states: APU, multi-GPU, pool, smoke outcome, environment.
    fn state_conditions(&self, ctx: &Context<'_>) -> Vec<Condition> {
        let mut conditions = Vec::new();
        let mut check = recorder(&mut conditions);
        let flags = [
            (Field::Apu, self.apu, ctx.apu),
            (Field::MultiGpu, self.multi_gpu, ctx.multi_gpu),
            (Field::IgpuWithDgpu, self.igpu_with_dgpu, ctx.igpu_with_dgpu),
            (Field::MixedArchs, self.mixed_archs, ctx.mixed_archs),
            (Field::VmmBuild, self.vmm_build, ctx.vmm_build),
            (Field::Uma, self.uma, ctx.uma),
            (Field::PeerProblem, self.peer_problem, ctx.peer_problem),
        ];
        for (field, want, have) in flags {
            if let Some(want) = want {
                let t = have.map_or(Tri::Unknown, |h| Tri::of(h == want));
                let have = have.map_or("unknown".to_string(), |h| h.to_string());
                check(field, t, format!("want {want}, have {have}"));
            }
        }
        if !self.smoke.is_empty() {
            let t = ctx
                .smoke
                .map_or(Tri::Unknown, |s| Tri::of(self.smoke.contains(&s)));
            let wanted: Vec<&str> = self.smoke.iter().map(|s| s.as_str()).collect();
            check(
                Field::Smoke,
                t,
                format!(
                    "{} in [{}]",
                    ctx.smoke.map_or("not measured", SmokeCondition::as_str),
                    wanted.join(", ")
                ),
            );
        }
        if !self.env_set.is_empty() {
            let hit = self.env_set.iter().any(|v| ctx.env_set.contains(v));
            check(
                Field::Env,
                Tri::of(hit),
                format!("any of [{}] set", self.env_set.join(", ")),
            );
        }
        drop(check);
        conditions
    }
}

/// `pattern` is a target name or a family token from the targets table.
pub fn arch_matches(targets: &TargetTable, pattern: &str, arch: &str) -> bool {
    if pattern.eq_ignore_ascii_case(arch) {
        return true;
    }
    targets
        .family
        .iter()
        .find(|f| f.token.eq_ignore_ascii_case(pattern))
        .is_some_and(|f| f.members.iter().any(|m| m == arch))
}

/// A closure that records each judged condition, in order, into `conditions`.
fn recorder(conditions: &mut Vec<Condition>) -> impl FnMut(Field, Tri, String) + '_ {
    move |field, verdict, detail| {
        conditions.push(Condition {
            field,
            verdict,
            detail,
        })
    }
}
