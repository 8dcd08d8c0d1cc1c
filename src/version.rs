//! Versions (`7.2.1`, `13.0`, `7.14.0a20260609`, build numbers) and `"min:max"` ranges.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A dotted version with an optional pre-release tag (`a`, `b`, `rc`, `dev`) as used by ROCm
/// nightlies (`7.14.0a20260609`). A version without a tag sorts after every tagged one of the
/// same numbers, as in PEP 440.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    parts: Vec<u64>,
    pre: Option<(String, u64)>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{input}` is not a version: {why} (expected something like 7.2.1, 13.0 or 7.14.0a20260609)"
)]
pub struct VersionError {
    pub input: String,
    pub why: &'static str,
}

impl Version {
    pub fn from_number(n: u64) -> Self {
        Version {
            parts: vec![n],
            pre: None,
            text: n.to_string(),
        }
    }

    pub fn parts(&self) -> &[u64] {
        &self.parts
    }

    pub fn major(&self) -> u64 {
        self.parts.first().copied().unwrap_or(0)
    }

    fn cmp_prefix(&self, other: &Version, len: usize) -> Ordering {
        for i in 0..len {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl Version {
    /// The release numbers of a Linux kernel as `uname -r` prints it (`6.18.3-arch1-1`,
    /// `7.0.0-28-generic`, `6.8.0-45-generic`): the leading dotted numbers, at most three.
    /// `None` when the text does not start with `major.minor`.
    pub fn of_kernel(release: &str) -> Option<Version> {
        let head: String = release
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .take(32)
            .collect();
        let nums: Vec<&str> = head.split('.').filter(|p| !p.is_empty()).take(3).collect();
        if nums.len() < 2 {
            return None;
        }
        nums.join(".").parse().ok()
    }

    /// The pre-release tag and its number (`a`, 20260608 for `7.14.0a20260608`).
    pub fn pre(&self) -> Option<(&str, u64)> {
        self.pre.as_ref().map(|(t, n)| (t.as_str(), *n))
    }

    /// The first two numbers (a missing one counts as 0).
    pub fn major_minor(&self) -> (u64, u64) {
        (self.major(), self.parts.get(1).copied().unwrap_or(0))
    }
}

/// A toolkit version as written for an install (`7.2.1`, `7.14.0a20260608`, `7.14.0rc1`, `12.8`):
/// a [`Version`] whose text was checked to be plain enough for image tags, URLs and pip
/// requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolVersion(Version);

impl ToolVersion {
    /// Strict: 2 or 3 dot-separated numbers, then optionally `aN` or `rcN`; nothing else is
    /// accepted. `flag` names the input in the error.
    pub fn parse(flag: &str, s: &str) -> Result<Self, crate::Error> {
        let bad = |why: &str| {
            crate::Error::input(
                flag,
                format!("`{s}` is not a toolkit version: {why}"),
                "write it as MAJOR.MINOR[.PATCH], e.g. 7.2.1, 12.8 or 13.0.2; a ROCm nightly or release candidate as 7.14.0a20260608 or 7.14.0rc1",
            )
        };
        toolkit_shape(s).map_err(bad)?;
        // The shape admits only what Version reads the same way, with numbers that fit.
        s.parse()
            .map(ToolVersion)
            .map_err(|e: VersionError| bad(e.why))
    }

    pub fn text(&self) -> &str {
        &self.0.text
    }

    pub fn version(&self) -> &Version {
        &self.0
    }

    /// `a` (TheRock nightly) or `rc` (release candidate) and its number.
    pub fn pre(&self) -> Option<(&str, u64)> {
        self.0.pre()
    }

    pub fn major_minor(&self) -> (u64, u64) {
        self.0.major_minor()
    }

    /// `12.8` → `12.8.0`; a three-part version stays as it is.
    pub fn full(&self) -> String {
        match self.0.parts.as_slice() {
            [a, b] => format!("{a}.{b}.0"),
            _ => self.0.text.clone(),
        }
    }
}

impl fmt::Display for ToolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// The text rules of [`ToolVersion`]: `MAJOR.MINOR[.PATCH]` of at most six digits each, then
/// optionally `a` or `rc` and at most twelve digits.
fn toolkit_shape(s: &str) -> Result<(), &'static str> {
    let body = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => {
            let (body, tail) = s.split_at(i);
            let Some(num) = tail.strip_prefix("rc").or_else(|| tail.strip_prefix('a')) else {
                return Err("the only suffixes are aN (nightly) and rcN (release candidate)");
            };
            if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) || num.len() > 12 {
                return Err("the suffix needs a number, e.g. a20260608 or rc1");
            }
            body
        }
        None => s,
    };
    let parts: Vec<&str> = body.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err("it needs two or three dot-separated numbers");
    }
    if parts
        .iter()
        .any(|p| p.is_empty() || p.len() > 6 || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("each part must be a number");
    }
    Ok(())
}

impl FromStr for Version {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let input = s.trim();
        let err = |why| VersionError {
            input: s.to_string(),
            why,
        };
        if input.is_empty() {
            return Err(err("it is empty"));
        }
        let body = input.strip_prefix('v').unwrap_or(input);
        let mut parts = Vec::new();
        let mut pre = None;
        for (i, piece) in body.split('.').enumerate() {
            let digits_end = piece
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(piece.len());
            let (num, rest) = piece.split_at(digits_end);
            if num.is_empty() {
                return Err(err("each dot-separated part must start with a number"));
            }
            let n = num
                .parse::<u64>()
                .map_err(|_| err("a number is too large"))?;
            parts.push(n);
            if !rest.is_empty() {
                let tag_end = rest
                    .find(|c: char| c.is_ascii_digit())
                    .unwrap_or(rest.len());
                let (tag, tail) = rest.split_at(tag_end);
                let tag = tag.trim_start_matches(['-', '_', '~']);
                if !matches!(tag, "a" | "b" | "rc" | "dev" | "alpha" | "beta") {
                    return Err(err("unknown pre-release tag (allowed: a, b, rc, dev)"));
                }
                let pn = if tail.is_empty() {
                    0
                } else {
                    tail.parse::<u64>()
                        .map_err(|_| err("bad pre-release number"))?
                };
                if pre.is_some() || i + 1 != body.split('.').count() {
                    return Err(err("a pre-release tag may only end the version"));
                }
                pre = Some((tag.to_string(), pn));
            }
        }
        Ok(Version {
            parts,
            pre,
            text: input.to_string(),
        })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.parts.len().max(other.parts.len());
        self.cmp_prefix(other, len)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some((ta, na)), Some((tb, nb))) => {
                    pre_rank(ta).cmp(&pre_rank(tb)).then(na.cmp(nb))
                }
            })
    }
}

fn pre_rank(tag: &str) -> u8 {
    match tag {
        "dev" => 0,
        "a" | "alpha" => 1,
        "b" | "beta" => 2,
        _ => 3,
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An inclusive `"min:max"` range with either side open (archspec style). The upper bound is a
/// prefix bound: `"7.0:7.2"` contains `7.2.4` and `7.2.26015`, as a person reading it expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    pub min: Option<Version>,
    pub max: Option<Version>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error(
        "`{0}` is not a range: write \"min:max\" with either side open, e.g. \"7.0:7.2\", \"8863:\" or \":10114\""
    )]
    NoColon(String),
    #[error(transparent)]
    Version(#[from] VersionError),
    #[error("range `{0}` is empty: its minimum is above its maximum")]
    Empty(String),
}

impl VersionRange {
    pub fn any() -> Self {
        VersionRange {
            min: None,
            max: None,
        }
    }

    pub fn contains(&self, v: &Version) -> bool {
        if let Some(min) = &self.min
            && v < min
        {
            return false;
        }
        if let Some(max) = &self.max {
            let len = max.parts.len();
            match v.cmp_prefix(max, len) {
                Ordering::Greater => return false,
                Ordering::Equal => {
                    // Same numbers up to max's length: a tagged max (7.14.0a1) still bounds tags.
                    if max.pre.is_some() && v.parts.len() <= len && v > max {
                        return false;
                    }
                }
                Ordering::Less => {}
            }
        }
        true
    }

    pub fn contains_number(&self, n: u64) -> bool {
        self.contains(&Version::from_number(n))
    }

    /// For people: `any`, `7.0 and later`, `12 and earlier`, `12.8 to 12.9` (the upper bound
    /// includes every version it prefixes, as `12` includes 12.9.1).
    pub fn describe(&self) -> String {
        match (&self.min, &self.max) {
            (None, None) => "any".into(),
            (Some(min), None) => format!("{min} and later"),
            (None, Some(max)) => format!("{max} and earlier"),
            (Some(min), Some(max)) if min == max => format!("{min} only"),
            (Some(min), Some(max)) => format!("{min} to {max}"),
        }
    }
}

impl FromStr for VersionRange {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (lo, hi) = s
            .split_once(':')
            .ok_or_else(|| RangeError::NoColon(s.to_string()))?;
        let side = |t: &str| -> Result<Option<Version>, VersionError> {
            let t = t.trim();
            if t.is_empty() {
                Ok(None)
            } else {
                t.parse().map(Some)
            }
        };
        let r = VersionRange {
            min: side(lo)?,
            max: side(hi)?,
        };
        if let (Some(a), Some(b)) = (&r.min, &r.max)
            && a.cmp_prefix(b, b.parts.len()) == Ordering::Greater
        {
            return Err(RangeError::Empty(s.to_string()));
        }
        Ok(r)
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(m) = &self.min {
            write!(f, "{m}")?;
        }
        f.write_str(":")?;
        if let Some(m) = &self.max {
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

impl Serialize for VersionRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for VersionRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_described_for_people() {
        let d = |r: &str| r.parse::<VersionRange>().unwrap().describe();
        assert_eq!(d(":"), "any");
        assert_eq!(d("7.0:"), "7.0 and later");
        assert_eq!(d(":12"), "12 and earlier");
        assert_eq!(d("12.8:12.9"), "12.8 to 12.9");
        assert_eq!(d("8863:8863"), "8863 only");
    }

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }
    fn r(s: &str) -> VersionRange {
        s.parse().unwrap()
    }

    #[test]
    fn orders_numbers_and_prereleases() {
        assert!(v("7.2.4") > v("7.2"));
        assert!(v("7.10") > v("7.9.9"));
        assert!(v("7.14.0a20260609") < v("7.14.0"));
        assert!(v("7.14.0a20260609") < v("7.14.0a20260610"));
        assert!(v("7.14.0rc1") > v("7.14.0a20260610"));
        assert_eq!(v("13.0").cmp(&v("13.0.0")), Ordering::Equal);
    }

    #[test]
    fn upper_bound_is_a_prefix_bound() {
        assert!(r("7.0:7.2").contains(&v("7.2.4")));
        assert!(r("7.0:7.2").contains(&v("7.2.26015")));
        assert!(!r("7.0:7.2").contains(&v("7.3")));
        assert!(!r("7.0:7.2").contains(&v("6.4.3")));
        assert!(r("8863:").contains_number(11434));
        assert!(!r(":10114").contains_number(10115));
        assert!(r(":").contains(&v("1.0")));
        assert!(r("7.14.0a20260609:").contains(&v("7.14.0a20260610")));
        assert!(!r("7.14.0a20260609:").contains(&v("7.14.0a20260608")));
    }

    #[test]
    fn tool_versions_are_versions_with_a_strict_text() {
        let t = ToolVersion::parse("--rocm", "7.14.0a20260608").unwrap();
        assert_eq!(t.version(), &v("7.14.0a20260608"));
        assert_eq!(t.major_minor(), (7, 14));
        let why = |s: &str| ToolVersion::parse("--rocm", s).unwrap_err().to_string();
        assert!(
            why("7.2.1b3").contains("the only suffixes are aN"),
            "{}",
            why("7.2.1b3")
        );
        assert!(why("7.2.1a").contains("the suffix needs a number"));
        assert!(why("7").contains("two or three dot-separated numbers"));
        assert!(why("7..2").contains("each part must be a number"));
        assert!(why("v7.2").contains("the only suffixes"));
    }

    #[test]
    fn rejects_malformed_input_with_a_fix() {
        let e = "7.2".parse::<VersionRange>().unwrap_err().to_string();
        assert!(e.contains("min:max"), "{e}");
        assert!("x.1".parse::<Version>().is_err());
        assert!(matches!(
            "9:3".parse::<VersionRange>(),
            Err(RangeError::Empty(_))
        ));
    }
}
