//! The release-asset table (`profiles/release-assets.toml`): which assets each llama.cpp build
//! era published, what each was built with, and ggml's default CUDA architecture list per build.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::version::Version;

const BUNDLED: &str = include_str!("../../profiles/release-assets.toml");
const ORIGIN: &str = "profiles/release-assets.toml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AssetOs {
    Linux,
    Windows,
    Macos,
}

impl AssetOs {
    pub fn as_str(self) -> &'static str {
        match self {
            AssetOs::Linux => "linux",
            AssetOs::Windows => "windows",
            AssetOs::Macos => "macos",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Cpu {
    X64,
    Arm64,
}

impl Cpu {
    pub fn as_str(self) -> &'static str {
        match self {
            Cpu::X64 => "x64",
            Cpu::Arm64 => "arm64",
        }
    }

    /// The CPU gpuprobe itself was built for; None on others (then `--cpu` is needed).
    pub fn here() -> Option<Cpu> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Cpu::X64),
            "aarch64" => Some(Cpu::Arm64),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AssetBackend {
    Cuda,
    Hip,
    Vulkan,
    Sycl,
    Metal,
    Cpu,
}

impl AssetBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            AssetBackend::Cuda => "cuda",
            AssetBackend::Hip => "hip",
            AssetBackend::Vulkan => "vulkan",
            AssetBackend::Sycl => "sycl",
            AssetBackend::Metal => "metal",
            AssetBackend::Cpu => "cpu",
        }
    }
}

/// The memory pool compiled into an asset's GPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// The VMM pool (`GGML_CUDA_NO_VMM` / `GGML_HIP_NO_VMM` off).
    Vmm,
    /// The legacy pool (`GGML_*_NO_VMM` on).
    Legacy,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Asset {
    pub name: String,
    pub os: AssetOs,
    pub cpu: Cpu,
    pub backend: AssetBackend,
    pub cuda: Option<Version>,
    pub cuda_archs: Option<String>,
    pub rocm: Option<String>,
    pub hip_sdk: Option<String>,
    #[serde(default)]
    pub gpu_targets: Vec<String>,
    pub pool: Option<Pool>,
    pub companion: Option<String>,
    #[serde(default)]
    pub bundles: Vec<String>,
    pub from: Option<u64>,
    pub until: Option<u64>,
}

impl Asset {
    /// The file name on the release page of build `build`.
    pub fn file_name(&self, build: u64) -> String {
        self.name.replace("{tag}", &format!("b{build}"))
    }

    pub fn companion_name(&self, build: u64) -> Option<String> {
        self.companion
            .as_ref()
            .map(|c| c.replace("{tag}", &format!("b{build}")))
    }

    fn published_at(&self, build: u64) -> bool {
        self.from.is_none_or(|f| build >= f) && self.until.is_none_or(|u| build < u)
    }
}

/// The download address of `file` on the release page of build `build`.
pub fn url(build: u64, file: &str) -> String {
    format!("https://github.com/ggml-org/llama.cpp/releases/download/b{build}/{file}")
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Era {
    pub id: String,
    pub from: u64,
    pub until: Option<u64>,
    pub samples: Vec<u64>,
    pub sources: Vec<String>,
    pub boundary: String,
    #[serde(rename = "asset")]
    pub assets: Vec<Asset>,
}

impl Era {
    /// The assets published at `build` (an asset added or dropped inside the era counts only
    /// where it was published).
    pub fn assets_at(&self, build: u64) -> impl Iterator<Item = &Asset> {
        self.assets.iter().filter(move |a| a.published_at(build))
    }

    /// The newest build whose workflow was read for this era.
    pub fn last_sample(&self) -> u64 {
        self.samples.iter().copied().max().unwrap_or(self.from)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchList {
    pub min_cuda: Version,
    pub max_cuda: Option<Version>,
    pub list: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaDefault {
    pub from: u64,
    pub archs: Vec<ArchList>,
    pub samples: Vec<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub arch: Vec<String>,
    #[serde(rename = "as")]
    pub runs_as: String,
    pub value: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetTable {
    pub cuda_default: Vec<CudaDefault>,
    #[serde(rename = "override")]
    pub overrides: Vec<Override>,
    #[serde(rename = "era")]
    pub eras: Vec<Era>,
}

/// The era a build falls in, and whether it lies past the era's last sample (then its assets
/// are inferred from that sample).
#[derive(Debug, Clone, Copy)]
pub struct EraAt<'a> {
    pub era: &'a Era,
    pub inferred_from: Option<u64>,
}

impl AssetTable {
    /// The table compiled into gpuprobe, checked.
    pub fn bundled() -> Result<AssetTable> {
        let t: AssetTable = crate::toml_file::parse_toml(BUNDLED, ORIGIN)?;
        t.validate()?;
        Ok(t)
    }

    fn validate(&self) -> Result<()> {
        let bad = |message: String| Error::Input {
            input: ORIGIN.into(),
            line: None,
            message,
            fix: "correct the table (its header documents every field)".into(),
        };
        for pair in self.eras.windows(2) {
            if pair[0].until != Some(pair[1].from) {
                return Err(bad(format!(
                    "era `{}` must end where `{}` begins ({})",
                    pair[0].id, pair[1].id, pair[1].from
                )));
            }
        }
        if self.eras.last().is_some_and(|e| e.until.is_some()) {
            return Err(bad("the last era must be open-ended".into()));
        }
        for e in &self.eras {
            if e.samples.is_empty() || e.sources.is_empty() {
                return Err(bad(format!("era `{}` names no sample or source", e.id)));
            }
            for a in &e.assets {
                if !a.name.contains("{tag}") {
                    return Err(bad(format!("asset `{}` has no {{tag}}", a.name)));
                }
                let ok = match a.backend {
                    AssetBackend::Cuda => a.cuda.is_some() && a.pool.is_some(),
                    AssetBackend::Hip => !a.gpu_targets.is_empty() && a.pool.is_some(),
                    _ => true,
                };
                if !ok {
                    return Err(bad(format!(
                        "asset `{}`: a CUDA asset needs cuda and pool, a HIP asset gpu_targets and pool",
                        a.name
                    )));
                }
            }
        }
        if self.cuda_default.windows(2).any(|w| w[0].from >= w[1].from) {
            return Err(bad("cuda_default rows must be in build order".into()));
        }
        Ok(())
    }

    /// The oldest build the table knows.
    pub fn first_build(&self) -> u64 {
        self.eras.first().map_or(0, |e| e.from)
    }

    /// The newest build whose workflow was read.
    pub fn newest_sample(&self) -> u64 {
        self.eras.iter().map(Era::last_sample).max().unwrap_or(0)
    }

    pub fn era_at(&self, build: u64) -> Option<EraAt<'_>> {
        let era = self
            .eras
            .iter()
            .find(|e| build >= e.from && e.until.is_none_or(|u| build < u))?;
        let last = era.last_sample();
        Some(EraAt {
            era,
            inferred_from: (build > last).then_some(last),
        })
    }

    /// The CUDA architectures an asset was compiled for at `build`: the workflow's own list, else
    /// ggml's default for that build and CUDA version.
    pub fn cuda_archs(&self, asset: &Asset, build: u64) -> Vec<String> {
        let list = match &asset.cuda_archs {
            Some(l) => Some(l.clone()),
            None => asset.cuda.as_ref().and_then(|cuda| {
                let row = self.cuda_default.iter().rev().find(|d| d.from <= build)?;
                row.archs
                    .iter()
                    .find(|a| &a.min_cuda <= cuda && a.max_cuda.as_ref().is_none_or(|m| cuda < m))
                    .map(|a| a.list.clone())
            }),
        };
        list.map(|l| {
            l.split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
    }

    /// The override that lets ROCm run code built for another target on `arch`, if any.
    pub fn override_for(&self, arch: &str) -> Option<&Override> {
        self.overrides
            .iter()
            .find(|o| o.arch.iter().any(|a| a == arch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_table_loads_and_covers_b4000_to_b11434() {
        let t = AssetTable::bundled().unwrap();
        assert!(t.first_build() <= 4000);
        assert!(t.newest_sample() >= 11434);
        for b in [
            4000, 4447, 5000, 5763, 8475, 9361, 10356, 10798, 11104, 11434,
        ] {
            let at = t.era_at(b).unwrap();
            assert!(at.era.assets_at(b).count() > 3, "b{b}");
        }
        assert!(t.era_at(t.first_build() - 1).is_none());
    }

    #[test]
    fn cuda_lists_follow_build_and_toolkit() {
        let t = AssetTable::bundled().unwrap();
        let at = t.era_at(11434).unwrap();
        let cu13 = at
            .era
            .assets_at(11434)
            .find(|a| a.name.contains("ubuntu-cuda-13.4-x64"))
            .unwrap();
        let l = t.cuda_archs(cu13, 11434);
        assert!(l.contains(&"90-virtual".to_string()) && !l.iter().any(|a| a.starts_with("61")));
        let old = t.era_at(4094).unwrap();
        let cu12 = old
            .era
            .assets_at(4094)
            .find(|a| a.name.contains("cu12.2.0"))
            .unwrap();
        assert_eq!(t.cuda_archs(cu12, 4094), ["52", "61", "70", "75"]);
    }
}
