//! Can the NVIDIA driver run an asset built with CUDA X.Y? From the CUDA version the driver
//! supports (measured, or looked up from `--driver` in `profiles/cuda-drivers.toml`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::table::AssetOs;
use crate::version::Version;

const TABLE: &str = include_str!("../../profiles/cuda-drivers.toml");

#[derive(Debug, Deserialize)]
struct Table {
    toolkit_driver: Vec<Row>,
}

#[derive(Debug, Deserialize)]
struct Row {
    cuda: Version,
    linux: Version,
    windows: Version,
}

/// What is known of the NVIDIA driver.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Driver {
    /// The CUDA version it fully supports (`13.0`).
    #[schemars(with = "Option<String>")]
    pub cuda: Option<Version>,
    /// True when `cuda` is a lower bound only (a driver newer than the table's newest row).
    pub at_least: bool,
    /// The driver's own version (`580.95.05`), for messages.
    pub module: Option<String>,
    /// `measured`, `--driver`, or `unknown`.
    pub source: String,
}

impl Driver {
    pub fn unknown() -> Driver {
        Driver {
            cuda: None,
            at_least: false,
            module: None,
            source: "unknown".into(),
        }
    }

    /// From `--driver VER` on `os`: the newest CUDA release whose minimum driver it meets.
    pub fn from_version(v: &Version, text: &str, os: AssetOs) -> Driver {
        let rows = toml::from_str::<Table>(TABLE)
            .map(|t| t.toolkit_driver)
            .unwrap_or_default();
        let newest = rows.iter().map(|r| r.cuda.clone()).max();
        let met = rows
            .iter()
            .filter(|r| {
                let min = match os {
                    AssetOs::Windows => &r.windows,
                    _ => &r.linux,
                };
                v >= min
            })
            .map(|r| r.cuda.clone())
            .max();
        Driver {
            at_least: met.is_some() && met == newest,
            cuda: met,
            module: Some(text.to_string()),
            source: "--driver".into(),
        }
    }
}

/// The driver against an asset's CUDA version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Support {
    /// The driver supports this CUDA version or a newer one: machine code and PTX JIT both work.
    Full,
    /// Same major version, older minor: CUDA minor-version compatibility runs machine code but
    /// cannot JIT the asset's PTX.
    MachineCodeOnly,
    /// Older major version: the runtime refuses to start.
    TooOld,
    /// Not known (no driver measured or given), or only a lower bound below the asset's version.
    Unknown,
}

pub fn support(driver: &Driver, asset_cuda: &Version) -> Support {
    let Some(d) = &driver.cuda else {
        return Support::Unknown;
    };
    let (dm, dn) = d.major_minor();
    let (am, an) = asset_cuda.major_minor();
    if dm > am || (dm == am && dn >= an) {
        Support::Full
    } else if dm < am {
        if driver.at_least {
            Support::Unknown
        } else {
            Support::TooOld
        }
    } else if driver.at_least {
        Support::Unknown
    } else {
        Support::MachineCodeOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn a_driver_version_maps_to_the_cuda_it_supports() {
        let d = Driver::from_version(&v("550.54.14"), "550.54.14", AssetOs::Linux);
        assert_eq!(d.cuda, Some(v("12.4")));
        assert!(!d.at_least);
        let d = Driver::from_version(&v("551.00"), "551.00", AssetOs::Windows);
        assert_eq!(d.cuda, Some(v("12.3")));
        let d = Driver::from_version(&v("590.10"), "590.10", AssetOs::Linux);
        assert_eq!(d.cuda, Some(v("13.0")));
        assert!(d.at_least);
        let d = Driver::from_version(&v("470.1"), "470.1", AssetOs::Linux);
        assert_eq!(d.cuda, None);
    }

    #[test]
    fn minor_version_compatibility_runs_machine_code_only() {
        let d = Driver {
            cuda: Some(v("13.0")),
            at_least: false,
            module: None,
            source: "measured".into(),
        };
        assert_eq!(support(&d, &v("12.8")), Support::Full);
        assert_eq!(support(&d, &v("13.4")), Support::MachineCodeOnly);
        let old = Driver {
            cuda: Some(v("12.4")),
            ..d.clone()
        };
        assert_eq!(support(&old, &v("13.1")), Support::TooOld);
        assert_eq!(support(&Driver::unknown(), &v("12.4")), Support::Unknown);
    }
}
