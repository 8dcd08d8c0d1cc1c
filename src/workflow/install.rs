//! The toolkit install of a job: for a backend, OS and version, the method the workflow uses
//! (container image, TheRock wheels, NVIDIA's installer), chosen from `profiles/toolkits.toml`,
//! or why there is none.

use crate::emit::workflow::{EnvVar, Install, InstallKind};
use crate::error::{Error, Result};
use crate::platform::Os;
use crate::report::Backend;
use crate::toolkits::ToolkitTable;
use crate::version::ToolVersion;

/// Picks the toolkit install for a backend, OS and version from `profiles/toolkits.toml`, or
/// says why there is none.
///
/// - ROCm in a `[[rocm.container]]` range (the apt-packaged releases, up to 7.2.x), Linux: AMD's
///   rocm/dev image plus the rocBLAS/hipBLAS headers from its apt repository. Windows: refused,
///   see below.
/// - ROCm in a `[[rocm.wheels]]` range (7.13 and later, nightlies `aN`, release candidates
///   `rcN`), both OSes: TheRock's multi-arch Python wheels with `rocm-sdk init`; each matrix
///   entry adds the `device-gfx*` extras of its targets.
/// - CUDA, Linux: NVIDIA's devel image on the oldest Ubuntu of its `[[cuda.linux]]` record;
///   Windows: NVIDIA's network installer with the `[[cuda.windows]]` sub-packages of that major.
pub fn install(
    tk: &ToolkitTable,
    backend: Backend,
    os: Os,
    version: &ToolVersion,
) -> Result<Install> {
    match backend {
        Backend::Hip => rocm_install(tk, os, version),
        Backend::Cuda => cuda_install(tk, os, version),
    }
}

fn rocm_install(tk: &ToolkitTable, os: Os, v: &ToolVersion) -> Result<Install> {
    let mm = v.major_minor();
    let container = tk.rocm.container_for(mm);
    let wheels = tk.rocm.wheels_for(mm);
    if v.pre().is_some() && wheels.is_none() {
        return Err(Error::input(
            "--rocm",
            format!(
                "`{}`: generated workflows install ROCm nightlies and release candidates from TheRock's multi-arch wheel indexes, which start at 7.13",
                v.text()
            ),
            "use a released ROCm (e.g. 7.2.1) or a 7.13+ nightly such as 7.14.0a20260608",
        ));
    }
    if let (Some(c), None) = (container, v.pre()) {
        if os == Os::Windows {
            return Err(Error::input(
                "--rocm",
                format!(
                    "ROCm {} on Windows: AMD's HIP SDK installer is versioned by quarter (e.g. 26.Q1), not by ROCm version, so gpuprobe cannot pick it",
                    v.text()
                ),
                "build Windows with TheRock ROCm 7.13 or later (e.g. --rocm 7.14.0), as llama.cpp's windows-rocm job does, or generate Linux only (--os linux)",
            ));
        }
        let image = c.image.replace("{version}", v.text());
        return Ok(Install {
            kind: InstallKind::RocmContainer,
            version: v.text().to_string(),
            env: container_env(c.apt.join(" "), c.runtime_dirs.join(";")),
            comment: vec![
                format!(
                    "ROCm {}: AMD's {image} image (ROCm installed from AMD's apt repository at that",
                    v.text()
                ),
                format!(
                    "version); {} from the same repository. The image is pinned by tag; pin it by",
                    c.apt.join(", ")
                ),
                "digest (image@sha256:...) to freeze it.".into(),
            ],
            container: Some(image),
            needs: tk.rocm.needs.get(os).clone(),
        });
    }
    let Some(w) = wheels else {
        return Err(Error::input(
            "--rocm",
            format!(
                "ROCm {}: no install for this version in gpuprobe's toolkit table (the 7.9-7.12 technology previews were published per GPU family only)",
                v.text()
            ),
            "use ROCm 7.2.x (apt packages) or 7.13 and later (TheRock multi-arch wheels)",
        ));
    };
    let (index, channel) = match v.pre() {
        Some(("a", _)) => (w.nightly_index.as_deref(), "nightly"),
        Some(_) => (w.rc_index.as_deref(), "release-candidate"),
        None => (Some(w.release_index.as_str()), "release"),
    };
    let Some(index) = index else {
        return Err(Error::input(
            "--rocm",
            format!(
                "ROCm {}: gpuprobe's toolkit table has no {channel} index for {}.{}",
                v.text(),
                mm.0,
                mm.1
            ),
            "use a released version of that series",
        ));
    };
    Ok(Install {
        kind: InstallKind::RocmWheels,
        version: v.text().to_string(),
        env: vec![
            EnvVar {
                name: "ROCM_VERSION",
                value: v.text().to_string(),
            },
            EnvVar {
                name: "ROCM_INDEX_URL",
                value: index.into(),
            },
        ],
        comment: vec![
            format!(
                "ROCm {} ({channel}): TheRock's multi-arch Python wheels rocm[libraries,devel] plus the",
                v.text()
            ),
            format!("device-gfx* extras of each entry's targets, from {index}."),
        ],
        container: None,
        needs: tk.rocm.needs.get(os).clone(),
    })
}

fn cuda_install(tk: &ToolkitTable, os: Os, v: &ToolVersion) -> Result<Install> {
    if v.pre().is_some() {
        return Err(Error::input(
            "--cuda",
            format!("`{}`: CUDA versions have no pre-release suffix", v.text()),
            "give a CUDA release such as 12.8 or 13.0.2",
        ));
    }
    let mm = v.major_minor();
    let (major, minor) = mm;
    let full = v.full();
    let needs = tk
        .cuda
        .driver_for(mm)
        .map(|d| d.needs.clone())
        .unwrap_or_else(|| format!("an NVIDIA driver that supports CUDA {major}.{minor}"));
    let missing = |what: &str| {
        Error::input(
            "--cuda",
            format!("CUDA {full}: gpuprobe's toolkit table has no {what} for this version"),
            "give a CUDA version from 11.0 on, e.g. 12.8 or 13.0",
        )
    };
    match os {
        Os::Windows => {
            let w = tk
                .cuda
                .windows_for(mm)
                .ok_or_else(|| missing("Windows installer record"))?;
            let url = format!(
                "https://developer.download.nvidia.com/compute/cuda/{full}/network_installers/cuda_{full}_windows_network.exe"
            );
            let subpackages = w.subpackages.join(" ");
            Ok(Install {
                kind: InstallKind::CudaInstaller,
                version: full.clone(),
                env: vec![
                    EnvVar {
                        name: "CUDA_VERSION",
                        value: full.clone(),
                    },
                    EnvVar {
                        name: "CUDA_MAJOR_MINOR",
                        value: format!("{major}.{minor}"),
                    },
                    EnvVar {
                        name: "CUDA_INSTALLER_URL",
                        value: url,
                    },
                    EnvVar {
                        name: "CUDA_SUBPACKAGES",
                        value: subpackages.clone(),
                    },
                    EnvVar {
                        name: "CUDA_RUNTIME_SUBDIRS",
                        value: w.runtime_dirs.join(" "),
                    },
                ],
                comment: vec![format!(
                    "CUDA {full}: NVIDIA's network installer, silent, with the CUDA {major}.x sub-packages a llama.cpp build needs ({subpackages})."
                )],
                container: None,
                needs,
            })
        }
        Os::Linux | Os::Wsl => {
            let l = tk
                .cuda
                .linux_for(mm)
                .ok_or_else(|| missing("Linux image"))?;
            let image = l.image.replace("{version}", &full);
            Ok(Install {
                kind: InstallKind::CudaContainer,
                version: full.clone(),
                env: container_env(String::new(), l.runtime_dirs.join(";")),
                comment: vec![format!(
                    "CUDA {full}: NVIDIA's {image} image, the oldest Ubuntu it is published for. The image is pinned by tag; pin it by digest (image@sha256:...) to freeze it."
                )],
                container: Some(image),
                needs,
            })
        }
    }
}

/// A container job's environment: apt without prompts, the extra packages the job installs
/// (space-separated), and where the toolkit's runtime libraries live (`;`-separated).
fn container_env(apt: String, runtime_dirs: String) -> Vec<EnvVar> {
    vec![
        EnvVar {
            name: "DEBIAN_FRONTEND",
            value: "noninteractive".into(),
        },
        EnvVar {
            name: "GPUPROBE_APT",
            value: apt,
        },
        EnvVar {
            name: "GPUPROBE_RUNTIME_DIRS",
            value: runtime_dirs,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ToolVersion {
        ToolVersion::parse("--x", s).unwrap()
    }

    fn install(backend: Backend, os: Os, v: &ToolVersion) -> Result<Install> {
        super::install(&ToolkitTable::bundled().unwrap(), backend, os, v)
    }

    #[test]
    fn parses_tool_versions_strictly() {
        assert_eq!(v("7.14.0a20260608").pre(), Some(("a", 20260608)));
        assert_eq!(v("7.14.0rc1").pre(), Some(("rc", 1)));
        assert_eq!(v("12.8").full(), "12.8.0");
        for bad in [
            "7", "7.2.1.4", "v7.2", "7.2-1", "7.2.1b3", "12.8;rm", "$(x)", "7..2", "7.2.1a",
        ] {
            assert!(
                ToolVersion::parse("--x", bad).is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[test]
    fn picks_rocm_install_by_version() {
        assert_eq!(
            install(Backend::Hip, Os::Linux, &v("7.2.1"))
                .unwrap()
                .container
                .as_deref(),
            Some("rocm/dev-ubuntu-22.04:7.2.1")
        );
        let w = install(Backend::Hip, Os::Windows, &v("7.14.0")).unwrap();
        assert_eq!(w.kind, InstallKind::RocmWheels);
        assert!(
            w.env
                .iter()
                .any(|e| e.value == "https://repo.amd.com/rocm/whl-multi-arch/")
        );
        let n = install(Backend::Hip, Os::Linux, &v("7.14.0a20260608")).unwrap();
        assert!(n.env.iter().any(|e| e.value.contains("nightlies")));
        let ten = install(Backend::Hip, Os::Linux, &v("10.0.0")).unwrap();
        assert!(ten.env.iter().any(|e| e.value.contains("whl-next")));
        assert!(install(Backend::Hip, Os::Windows, &v("6.4.1")).is_err());
        assert!(install(Backend::Hip, Os::Linux, &v("7.10.0")).is_err());
        assert!(install(Backend::Hip, Os::Linux, &v("7.0.0rc1")).is_err());
    }

    #[test]
    fn picks_cuda_install_by_os() {
        assert_eq!(
            install(Backend::Cuda, Os::Linux, &v("12.8"))
                .unwrap()
                .container
                .as_deref(),
            Some("nvidia/cuda:12.8.0-devel-ubuntu22.04")
        );
        assert_eq!(
            install(Backend::Cuda, Os::Linux, &v("12.4.1"))
                .unwrap()
                .container
                .as_deref(),
            Some("nvidia/cuda:12.4.1-devel-ubuntu22.04")
        );
        let w = install(Backend::Cuda, Os::Windows, &v("13.0")).unwrap();
        assert!(w.env.iter().any(|e| e.value == "https://developer.download.nvidia.com/compute/cuda/13.0.0/network_installers/cuda_13.0.0_windows_network.exe"));
        let subpackages = |w: &Install| {
            w.env
                .iter()
                .find(|e| e.name == "CUDA_SUBPACKAGES")
                .map(|e| e.value.clone())
                .unwrap()
        };
        assert!(
            subpackages(&w).contains("nvvm"),
            "13.x splits nvvm out of nvcc"
        );
        let w12 = install(Backend::Cuda, Os::Windows, &v("12.8")).unwrap();
        assert!(!subpackages(&w12).contains("nvvm"));
        assert_eq!(w12.needs, "an NVIDIA driver 525 or newer");
    }
}
