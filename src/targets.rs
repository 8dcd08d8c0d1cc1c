//! GPU architecture metadata (`profiles/targets.toml`): names, family tokens, wave size, APU,
//! and which toolkit versions can build each target.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::report::Vendor;
use crate::version::{Version, VersionRange};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetTable {
    #[serde(default)]
    pub family: Vec<Family>,
    pub target: Vec<Target>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub token: String,
    pub members: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// `gfx1201`, `sm_90`.
    pub name: String,
    pub vendor: Vendor,
    #[serde(default)]
    pub generation: Option<String>,
    #[serde(default)]
    pub products: Option<String>,
    pub wave_size: u32,
    #[serde(default)]
    pub apu: bool,
    /// Toolkit versions (ROCm for AMD, CUDA for NVIDIA) whose compiler can build this target.
    pub toolkit: VersionRange,
    #[serde(default)]
    pub toolkit_note: Option<String>,
    /// Operating systems whose toolkit supports this target; None: all.
    #[serde(default)]
    pub os: Option<Vec<crate::platform::Os>>,
    #[serde(default)]
    pub os_note: Option<String>,
    /// Set when no ROCm release supports the target: why, and what to use instead.
    #[serde(default)]
    pub unsupported: Option<String>,
    /// AMD targets newer than the clang the tests list targets with: the https URL of LLVM's
    /// source that defines it (`tests/targets_llvm.rs` holds every other AMD name to clang's list).
    #[serde(default)]
    pub llvm: Option<String>,
}

impl Target {
    /// Whether `os`'s toolkit supports this target (WSL counts as Linux).
    pub fn supported_on(&self, os: crate::platform::Os) -> bool {
        use crate::platform::Os;
        let os = if os == Os::Wsl { Os::Linux } else { os };
        self.os.as_ref().is_none_or(|list| list.contains(&os))
    }

    /// The CMake spelling: `gfx1201` for HIP, `90` for `CMAKE_CUDA_ARCHITECTURES`.
    pub fn cmake_name(&self) -> &str {
        self.name.strip_prefix("sm_").unwrap_or(&self.name)
    }

    pub fn toolkit_name(&self) -> &'static str {
        self.vendor.toolkit()
    }

    /// The toolkit this target needs, for people (`CUDA 12.8 or newer`, `CUDA 12.x or older`,
    /// with the table's note); None when every version builds it.
    pub fn toolkit_requirement(&self) -> Option<String> {
        let kit = self.toolkit_name();
        let need = match (&self.toolkit.min, &self.toolkit.max) {
            (None, None) => return None,
            (Some(min), None) => format!("{kit} {min} or newer"),
            (None, Some(max)) => format!("{kit} {max}.x or older"),
            (Some(min), Some(max)) => format!("{kit} {min} to {max}.x"),
        };
        Some(match &self.toolkit_note {
            Some(n) => format!("{need}: {n}"),
            None => need,
        })
    }

    /// Why `version` cannot build this target, with the fix; None when it can.
    pub fn unbuildable_with(&self, version: &Version) -> Option<String> {
        if self.toolkit.contains(version) {
            return None;
        }
        let kit = self.toolkit_name();
        let need = match (&self.toolkit.min, &self.toolkit.max) {
            (Some(min), _) if version < min => format!("{kit} {min} or newer"),
            (_, Some(max)) => format!("{kit} {max} or older"),
            _ => format!("a {kit} in {}", self.toolkit),
        };
        let note = self
            .toolkit_note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        Some(format!(
            "{kit} {version} cannot build {}{note}; build it with {need}, or drop it from the targets",
            self.name
        ))
    }
}

impl TargetTable {
    pub fn get(&self, name: &str) -> Option<&Target> {
        self.target.iter().find(|t| t.name == name)
    }

    pub fn validate(&self, origin: &str) -> Result<()> {
        for t in &self.target {
            // A name of the other vendor's form would be emitted into the wrong CMake variable.
            let prefix = match t.vendor {
                Vendor::Amd => "gfx",
                Vendor::Nvidia => "sm_",
            };
            if !t.name.starts_with(prefix) {
                return Err(Error::input(
                    origin,
                    format!(
                        "target `{}` (vendor {:?}) is not written as that vendor's targets are",
                        t.name, t.vendor
                    ),
                    "AMD targets start with gfx (gfx1201, gfx11-generic), NVIDIA ones with sm_ (sm_90)",
                ));
            }
            if let Some(url) = &t.llvm
                && !(t.vendor == Vendor::Amd
                    && url.starts_with("https://github.com/llvm/llvm-project/"))
            {
                return Err(Error::input(
                    origin,
                    format!("target `{}`: field `llvm` is `{url}`", t.name),
                    "`llvm` is for AMD targets only: an https://github.com/llvm/llvm-project/ URL of the source that defines the target",
                ));
            }
        }
        for f in &self.family {
            for m in &f.members {
                if self.get(m).is_none() {
                    return Err(Error::input(
                        origin,
                        format!(
                            "family `{}` lists `{m}`, which has no [[target]] record",
                            f.token
                        ),
                        "add the target or remove it from the family",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Expands a comma-separated list of gfx names, family tokens and CUDA architectures
    /// (`sm_90`, `90`, `9.0`) into known target names, in order, without duplicates.
    pub fn expand(&self, list: &str) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |n: &str| {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        };
        let items: Vec<&str> = list
            .split([',', ';', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.is_empty() {
            return Err(Error::input(
                "--targets",
                "the target list is empty",
                "name GPU targets, e.g. --targets gfx1100,gfx120X or --targets sm_86,sm_90",
            ));
        }
        for item in items {
            // A target-feature suffix (`gfx90a:xnack-`) names a variant of the same target: only
            // the features LLVM defines for AMD GPUs are accepted, never dropped unread.
            if let Some((_, features)) = item.split_once(':')
                && !features
                    .split(':')
                    .all(|f| matches!(f, "xnack+" | "xnack-" | "sramecc+" | "sramecc-"))
            {
                return Err(Error::input(
                    "--targets",
                    format!(
                        "`{}` has a feature suffix that is not a target feature",
                        crate::neutral::inline(item)
                    ),
                    "the features after `:` are xnack+, xnack-, sramecc+ or sramecc- (e.g. gfx90a:xnack-); or give the plain name (gfx90a)",
                ));
            }
            let name = normalise(item);
            if let Some(f) = self
                .family
                .iter()
                .find(|f| f.token.eq_ignore_ascii_case(&name))
            {
                f.members.iter().for_each(|m| push(m));
            } else if let Some(t) = self.get(&name) {
                push(&t.name);
            } else {
                let near = self.nearest(&name);
                let fix = if near.is_empty() {
                    "use a gfx name (gfx1100), a family token (gfx110X) or a CUDA arch (sm_90); `gpuprobe quirks targets` lists them".to_string()
                } else {
                    format!("did you mean {}?", near.join(", "))
                };
                return Err(Error::input(
                    "--targets",
                    format!("unknown GPU target `{item}`"),
                    fix,
                ));
            }
        }
        Ok(out)
    }

    /// Up to three known names closest to `name` by edit distance.
    pub fn nearest(&self, name: &str) -> Vec<String> {
        let mut scored: Vec<(usize, String)> = self
            .family
            .iter()
            .map(|f| f.token.clone())
            .chain(self.target.iter().map(|t| t.name.clone()))
            .map(|n| {
                (
                    edit_distance(&n.to_ascii_lowercase(), &name.to_ascii_lowercase()),
                    n,
                )
            })
            .filter(|(d, _)| *d <= 3)
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, n)| n).collect()
    }
}

/// `90`, `9.0`, `sm90`, `SM_90`, `compute_90` → `sm_90`; `GFX1201`, `gfx1201:xnack-` → `gfx1201`.
pub fn normalise(item: &str) -> String {
    let lower = item.trim().to_ascii_lowercase();
    let lower = lower.split(':').next().unwrap_or("").to_string();
    if lower.starts_with("gfx") {
        // Keep the family token's capital X as written in the table.
        return match lower.strip_suffix('x') {
            Some(stem) if !stem.ends_with(|c: char| c.is_ascii_hexdigit()) || lower.len() == 7 => {
                format!("{stem}X")
            }
            _ => lower,
        };
    }
    let digits = lower
        .trim_start_matches("compute_")
        .trim_start_matches("sm_")
        .trim_start_matches("sm")
        .replace('.', "");
    let digits = digits
        .trim_end_matches("-real")
        .trim_end_matches("-virtual");
    let digits = digits.trim_end_matches(['a', 'f']);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return format!("sm_{digits}");
    }
    lower
}

/// The vendor of a canonical architecture name as [`normalise`] writes it (`gfx1201`, `gfx90a`:
/// AMD; `sm_90`, `sm_120`: NVIDIA); None for anything else, family tokens included. Names the
/// table does not know yet (a newer GPU) pass, as they do when a probe measures them.
pub fn vendor_of_name(name: &str) -> Option<Vendor> {
    if let Some(rest) = name.strip_prefix("gfx") {
        let ok = (3..=4).contains(&rest.len())
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        return ok.then_some(Vendor::Amd);
    }
    if let Some(rest) = name.strip_prefix("sm_") {
        let ok = (2..=3).contains(&rest.len())
            && !rest.starts_with('0')
            && rest.chars().all(|c| c.is_ascii_digit());
        return ok.then_some(Vendor::Nvidia);
    }
    None
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_spellings() {
        assert_eq!(normalise("90"), "sm_90");
        assert_eq!(normalise("9.0"), "sm_90");
        assert_eq!(normalise("SM_86"), "sm_86");
        assert_eq!(normalise("120a-real"), "sm_120");
        assert_eq!(normalise("gfx1201:sramecc+:xnack-"), "gfx1201");
        assert_eq!(normalise("GFX110x"), "gfx110X");
        assert_eq!(normalise("gfx90a"), "gfx90a");
    }

    #[test]
    fn architecture_names_have_a_vendor() {
        assert_eq!(vendor_of_name("gfx1201"), Some(Vendor::Amd));
        assert_eq!(vendor_of_name("gfx90a"), Some(Vendor::Amd));
        assert_eq!(vendor_of_name("sm_120"), Some(Vendor::Nvidia));
        for bad in [
            "sm_",
            "gfx",
            "gfx110X",
            "gfx1201; rm -rf ~",
            "sm_9",
            "sm_090",
            "",
            "unknown",
        ] {
            assert_eq!(vendor_of_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("gfx1201", "gfx1210"), 2);
        assert_eq!(edit_distance("sm_90", "sm_90"), 0);
    }
}
