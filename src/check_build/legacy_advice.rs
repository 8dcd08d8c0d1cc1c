//! What check-build tells someone whose legacy memory pool ran out of memory, by what their
//! build has of llama.cpp's two legacy-pool fixes. The sentences are data (`[legacy_pool]` in
//! `profiles/log-signatures.toml`); the two builds are not written there but read from the quirks
//! that record them (`fixed_in.llama_build` of the quirks named), with their sources.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::quirks::Quirk;

/// `[legacy_pool]` as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The quirk whose fix is the pool's flush-and-retry (its `fixed_in` build is `{flush}`).
    pub flush_quirk: String,
    /// The quirk whose fix reserves flash attention's conversion space (`{reserve}`).
    pub reserve_quirk: String,
    pub always: String,
    pub this_build: String,
    pub build_from_log: String,
    pub before_flush: String,
    pub before_reserve: String,
    pub build_unknown: String,
    pub keeps_legacy: String,
    pub reason_before_reserve: String,
    pub reason_has_reserve: String,
    pub reason_build_unknown: String,
}

/// The fix's builds and changes, resolved from the quirks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fixed {
    build: u64,
    /// `#N` of the change's pull request, from the quirk's `fixed_in.sources`.
    change: u64,
}

/// `[legacy_pool]` with its builds resolved.
#[derive(Debug, Clone)]
pub struct LegacyAdvice {
    spec: Spec,
    flush: Fixed,
    reserve: Fixed,
}

/// What the input says of the build: its number, or bounds a log line proves.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildSeen {
    pub number: Option<u64>,
    pub at_least: Option<u64>,
    pub at_most: Option<u64>,
}

impl LegacyAdvice {
    /// Resolves the quirks and checks every sentence renders (no unknown placeholder).
    pub fn load(spec: Spec, quirks: &[Quirk], origin: &str) -> Result<Self> {
        let bad = |message: String| {
            Error::Input {
            input: origin.to_string(),
            line: None,
            message: format!("[legacy_pool]: {message}"),
            fix: "name quirks of profiles/quirks.toml whose `fixed_in` has a llama_build and a pull request among its sources, and use only the placeholders {flush}, {reserve}, {flush_change}, {reserve_change}, {build} and {this}".into(),
        }
        };
        let fixed = |id: &str| -> Result<Fixed> {
            let q = quirks
                .iter()
                .find(|q| q.id == id)
                .ok_or_else(|| bad(format!("no quirk `{id}`")))?;
            let f = q
                .fixed_in
                .as_ref()
                .ok_or_else(|| bad(format!("quirk `{id}` has no `fixed_in`")))?;
            let build = f
                .llama_build
                .ok_or_else(|| bad(format!("quirk `{id}`: `fixed_in` has no llama_build")))?;
            let change = f
                .sources
                .iter()
                .find_map(|s| {
                    s.split("/pull/")
                        .nth(1)?
                        .split(['/', '#'])
                        .next()?
                        .parse()
                        .ok()
                })
                .ok_or_else(|| {
                    bad(format!(
                        "quirk `{id}`: no pull request in `fixed_in.sources`"
                    ))
                })?;
            Ok(Fixed { build, change })
        };
        let advice = LegacyAdvice {
            flush: fixed(&spec.flush_quirk)?,
            reserve: fixed(&spec.reserve_quirk)?,
            spec,
        };
        let s = &advice.spec;
        for t in [
            &s.always,
            &s.this_build,
            &s.build_from_log,
            &s.before_flush,
            &s.before_reserve,
            &s.build_unknown,
            &s.keeps_legacy,
            &s.reason_before_reserve,
            &s.reason_has_reserve,
            &s.reason_build_unknown,
        ] {
            let out = advice.fill(t, 1, "");
            if out.contains('{') || out.contains('}') {
                return Err(bad(format!("unknown placeholder in `{t}`")));
            }
        }
        Ok(advice)
    }

    /// The first build with the flush-and-retry fix.
    pub fn flush_build(&self) -> u64 {
        self.flush.build
    }

    /// The first build that reserves the conversion space at start-up.
    pub fn reserve_build(&self) -> u64 {
        self.reserve.build
    }

    fn fill(&self, t: &str, build: u64, this: &str) -> String {
        t.replace("{flush}", &self.flush.build.to_string())
            .replace("{reserve}", &self.reserve.build.to_string())
            .replace("{flush_change}", &format!("#{}", self.flush.change))
            .replace("{reserve_change}", &format!("#{}", self.reserve.change))
            .replace("{build}", &build.to_string())
            .replace("{this}", this)
    }

    /// The advice, in order: what always helps, the newer build this one needs, and whether
    /// gpuprobe's own plan keeps the legacy pool (`plan_keeps_legacy`).
    pub fn advice(&self, seen: BuildSeen, plan_keeps_legacy: bool) -> Vec<String> {
        let s = &self.spec;
        let (flush, reserve) = (self.flush.build, self.reserve.build);
        let mut out = vec![self.fill(&s.always, 0, "")];
        let this = match seen.number {
            Some(n) => self.fill(&s.this_build, n, ""),
            None => self.fill(&s.build_from_log, 0, ""),
        };
        // The build, or what the log proves about it.
        let known = seen
            .number
            .or(seen.at_most.filter(|m| *m < flush))
            .or(seen.at_least);
        match known {
            Some(n) if n < flush => out.push(self.fill(&s.before_flush, n, &this)),
            Some(n) if n < reserve => out.push(self.fill(&s.before_reserve, n, &this)),
            Some(_) => {}
            None => out.push(self.fill(&s.build_unknown, 0, &this)),
        }
        if plan_keeps_legacy {
            out.push(self.fill(&s.keeps_legacy, 0, ""));
        }
        out
    }

    /// The sentence a legacy-pool quirk's reason ends with: what this build has of the
    /// reservation fix.
    pub fn reason(&self, build: Option<u64>) -> String {
        let s = &self.spec;
        match build {
            Some(b) if b < self.reserve.build => self.fill(&s.reason_before_reserve, b, ""),
            Some(b) => self.fill(&s.reason_has_reserve, b, ""),
            None => self.fill(&s.reason_build_unknown, 0, ""),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundled() -> LegacyAdvice {
        let k = crate::profiles::Knowledge::bundled().expect("bundled knowledge");
        crate::check_build::signatures::SignatureTable::bundled(&k.quirks)
            .expect("bundled signatures")
            .legacy_pool
            .expect("the bundled table has [legacy_pool]")
    }

    #[test]
    fn the_builds_come_from_the_quirks_that_record_them() {
        let k = crate::profiles::Knowledge::bundled().expect("bundled knowledge");
        let a = bundled();
        let fixed = |id: &str| {
            k.quirks
                .iter()
                .find(|q| q.id == id)
                .and_then(|q| q.fixed_in.as_ref()?.llama_build)
        };
        assert_eq!(Some(a.flush_build()), fixed("Q2-old-build"));
        assert_eq!(Some(a.reserve_build()), fixed("Q2-pre-9489"));
        assert!(a.flush_build() < a.reserve_build());
    }

    #[test]
    fn the_advice_follows_what_the_build_has() {
        let a = bundled();
        let (flush, reserve) = (a.flush_build(), a.reserve_build());
        let old = a.advice(
            BuildSeen {
                number: Some(flush - 1),
                ..Default::default()
            },
            false,
        );
        assert_eq!(old.len(), 2, "{old:?}");
        assert!(
            old[1].contains(&format!("build {flush} or later")),
            "{old:?}"
        );
        assert!(
            old[1].contains(&format!("this is build {}", flush - 1)),
            "{old:?}"
        );
        let mid = a.advice(
            BuildSeen {
                at_least: Some(flush),
                ..Default::default()
            },
            true,
        );
        assert!(
            mid[1].contains(&format!("build {reserve} or later")),
            "{mid:?}"
        );
        assert!(mid[2].contains("keeps the legacy pool"), "{mid:?}");
        let new = a.advice(
            BuildSeen {
                number: Some(reserve),
                ..Default::default()
            },
            false,
        );
        assert_eq!(new.len(), 1, "{new:?}");
        assert!(a.reason(None).contains(&format!("(build {reserve})")));
    }

    #[test]
    fn a_quirk_without_its_fixed_build_or_an_unknown_placeholder_is_refused() {
        let k = crate::profiles::Knowledge::bundled().expect("bundled knowledge");
        let spec = bundled().spec;
        let mut s = spec.clone();
        s.flush_quirk = "Q2".into();
        let e = LegacyAdvice::load(s, &k.quirks, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Q2"), "{e}");
        let mut s = spec;
        s.always = "use {newest}".into();
        let e = LegacyAdvice::load(s, &k.quirks, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("{newest}"), "{e}");
    }
}
