//! Does the toolkit that builds llama.cpp suit the driver that will run it? CUDA: the toolkit's
//! version against the CUDA version the driver supports (measured with `cuDriverGetVersion`).
//! The rules and the driver branches are in `profiles/cuda-drivers.toml`.
//!
//! ROCm: the kernel driver / user-space pairing is not checked. The in-tree amdgpu driver has no
//! ROCm release number, and the DKMS module's version does not map to one in a way gpuprobe has a
//! source for; the DKMS version is shown as a fact where the kernel exposes it.

use std::sync::OnceLock;

use serde::Deserialize;

use crate::report::{Backend, CheckLevel, Report};
use crate::version::Version;

#[derive(Debug, Deserialize)]
struct Table {
    cuda: Vec<Branch>,
}

#[derive(Debug, Deserialize)]
struct Branch {
    major: u64,
    min_driver: String,
}

const TABLE: &str = include_str!("../../profiles/cuda-drivers.toml");

fn min_driver(major: u64) -> Option<&'static str> {
    static T: OnceLock<Vec<Branch>> = OnceLock::new();
    T.get_or_init(|| {
        toml::from_str::<Table>(TABLE)
            .map(|t| t.cuda)
            .unwrap_or_default()
    })
    .iter()
    .find(|b| b.major == major)
    .map(|b| b.min_driver.as_str())
}

/// The toolkit release notes' rows of `profiles/cuda-drivers.toml`.
#[derive(Deserialize)]
struct ReleaseTable {
    toolkit_driver: Vec<ReleaseRow>,
}

#[derive(Deserialize)]
struct ReleaseRow {
    cuda: Version,
    linux: Version,
    windows: Version,
}

/// The oldest driver that fully supports builds made with CUDA `cuda` (PTX JIT included), from
/// the toolkit release notes' table: the row of the newest listed release at or below `cuda`'s
/// major.minor, as (that release, Linux driver, Windows driver). None below the table's first row
/// or for another major version than the row's (a CUDA 12 build is not held to a 11.x row).
pub fn oldest_full_driver(cuda: &Version) -> Option<(Version, Version, Version)> {
    let rows = toml::from_str::<ReleaseTable>(TABLE)
        .map(|t| t.toolkit_driver)
        .unwrap_or_default();
    let want = cuda.major_minor();
    rows.into_iter()
        .filter(|r| r.cuda.major() == cuda.major() && r.cuda.major_minor() <= want)
        .max_by(|a, b| a.cuda.cmp(&b.cuda))
        .map(|r| (r.cuda, r.linux, r.windows))
}

/// The oldest driver branch for CUDA major version `major` (`580` for 13), from the table.
pub fn min_driver_of(major: u64) -> Option<&'static str> {
    min_driver(major)
}

/// A toolkit that does not suit the driver: how bad, what happens, what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub level: CheckLevel,
    pub message: String,
    pub fix: String,
}

/// The CUDA version the measured driver supports (`13.0`), from a report.
pub fn driver_cuda(report: &Report) -> Option<Version> {
    report
        .backends
        .iter()
        .find(|b| b.backend == Backend::Cuda)?
        .runtime_version
        .as_deref()?
        .parse()
        .ok()
}

/// The kernel module version (`580.95.05`) from a report, for messages.
pub fn driver_module(report: &Report) -> Option<String> {
    report
        .backends
        .iter()
        .find(|b| b.backend == Backend::Cuda)?
        .driver_version
        .clone()
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
}

/// `what` builds with CUDA `toolkit`; the driver supports CUDA `driver`.
pub fn cuda_vs_driver(
    what: &str,
    toolkit: &Version,
    driver: &Version,
    module: Option<&str>,
) -> Option<Mismatch> {
    let tk = toolkit.parts();
    let dr = driver.parts();
    let (tmaj, tmin) = (tk.first().copied()?, tk.get(1).copied().unwrap_or(0));
    let (dmaj, dmin) = (dr.first().copied()?, dr.get(1).copied().unwrap_or(0));
    let drv = module
        .map(|m| format!("driver {m}, which supports CUDA {dmaj}.{dmin}"))
        .unwrap_or_else(|| format!("the driver supports CUDA {dmaj}.{dmin}"));
    let branch = min_driver(tmaj)
        .map(|b| format!(" (CUDA {tmaj}.x needs driver branch {b} or newer)"))
        .unwrap_or_default();
    if tmaj > dmaj {
        return Some(Mismatch {
            level: CheckLevel::Error,
            message: format!(
                "{what} CUDA {toolkit}, but {drv}: a llama.cpp built with it does not start here (\"CUDA driver version is insufficient for CUDA runtime version\")"
            ),
            fix: format!(
                "upgrade the NVIDIA driver{branch}, or build with a CUDA {dmaj}.x toolkit no newer than {dmaj}.{dmin} (--cuda {dmaj}.{dmin})"
            ),
        });
    }
    if tmaj == dmaj && tmin > dmin {
        return Some(Mismatch {
            level: CheckLevel::Warning,
            message: format!(
                "{what} CUDA {toolkit}, newer than the CUDA {dmaj}.{dmin} of this driver ({}): it runs only through CUDA minor-version compatibility, where GPU code compiled for this GPU's own architecture loads but PTX the driver must compile does not (\"the provided PTX was compiled with an unsupported toolchain\")",
                module.unwrap_or("version unknown")
            ),
            fix: format!(
                "upgrade the NVIDIA driver to one that supports CUDA {tmaj}.{tmin}, or build with CUDA {dmaj}.{dmin}; otherwise make sure the build carries real code for this GPU's architecture (CMAKE_CUDA_ARCHITECTURES with its number, not only PTX)"
            ),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn the_driver_floor_is_the_release_row_at_or_below_the_toolkit() {
        let row = |c: &str| {
            oldest_full_driver(&v(c)).map(|(r, l, w)| (r.to_string(), l.to_string(), w.to_string()))
        };
        let s = |a: &str, b: &str, c: &str| Some((a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(row("12.8"), s("12.8", "570.26", "570.65"));
        assert_eq!(row("12.8.1"), s("12.8", "570.26", "570.65"));
        assert_eq!(row("12.7"), s("12.6", "560.28.03", "560.76"));
        // Past the table's newest row only a lower bound is known.
        assert_eq!(row("13.4"), s("13.0", "580.65.06", "580.88"));
        // Never a row of another major version, nor one below the table.
        assert_eq!(row("13.0"), s("13.0", "580.65.06", "580.88"));
        assert_eq!(row("11.5"), None);
    }

    #[test]
    fn newer_major_is_an_error_with_the_driver_branch() {
        let m = cuda_vs_driver(
            "nvcc builds with",
            &v("13.0"),
            &v("12.4"),
            Some("550.54.14"),
        )
        .unwrap();
        assert_eq!(m.level, CheckLevel::Error);
        assert!(
            m.message
                .contains("driver 550.54.14, which supports CUDA 12.4"),
            "{}",
            m.message
        );
        assert!(m.fix.contains("branch 580 or newer"), "{}", m.fix);
        assert!(m.fix.contains("--cuda 12.4"), "{}", m.fix);
    }

    #[test]
    fn newer_minor_is_a_warning_about_ptx() {
        let m = cuda_vs_driver("x", &v("12.8"), &v("12.4"), None).unwrap();
        assert_eq!(m.level, CheckLevel::Warning);
        assert!(m.message.contains("minor-version compatibility"));
    }

    #[test]
    fn same_or_older_toolkit_is_fine() {
        assert!(cuda_vs_driver("x", &v("13.0"), &v("13.0"), None).is_none());
        assert!(cuda_vs_driver("x", &v("12.8.1"), &v("13.0"), None).is_none());
        assert!(cuda_vs_driver("x", &v("12"), &v("12.4"), None).is_none());
    }

    #[test]
    fn the_driver_table_parses() {
        assert_eq!(min_driver(13), Some("580"));
        assert_eq!(min_driver(12), Some("525"));
    }
}
