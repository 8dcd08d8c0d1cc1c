//! `gpuprobe prebuilt`: which official llama.cpp release asset runs on these GPUs, why, and why
//! the others do not. The assets come from `profiles/release-assets.toml` (read from llama.cpp's
//! release workflow, not from downloading them); coverage, driver and pool are judged here, the
//! pool advice and runtime notes come from the resolver (`advice`).

pub mod advice;
pub mod coverage;
pub mod driver;
pub mod render;
pub mod table;

use schemars::JsonSchema;
use serde::Serialize;

use coverage::How;
use driver::{Driver, Support};
use table::{Asset, AssetBackend, AssetOs, AssetTable, Cpu, Pool};

use crate::report::Vendor;

pub const SCHEMA: &str = "gpuprobe.prebuilt/v1";

/// One GPU to cover.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// `sm_90`, `gfx1103`, or `unknown`.
    pub arch: String,
    pub vendor: Option<Vendor>,
}

/// What to choose for.
#[derive(Debug, Clone)]
pub struct Query {
    pub gpus: Vec<Gpu>,
    pub os: AssetOs,
    pub cpu: Cpu,
    pub build: u64,
    pub driver: Driver,
}

/// gpuprobe's own advice for these GPUs with one asset's toolkit: the pool and runtime notes.
#[derive(Debug, Clone, Default)]
pub struct Advice {
    /// The pool gpuprobe would build with; None where it could not plan.
    pub pool: Option<Pool>,
    /// Why (the resolver's reason for the NO_VMM flag, or why there is no plan).
    pub reason: String,
    pub runtime_notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Download {
    pub name: String,
    pub url: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuCover {
    pub gpu: String,
    pub how: How,
    /// The compiled entry that covers it (`86-real`, `90-virtual`, `gfx1100`), or `vulkan`.
    pub code: String,
    /// The environment to set for an override (`HSA_OVERRIDE_GFX_VERSION=11.0.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DriverCheck {
    pub support: Support,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PoolCheck {
    /// The pool the asset was built with.
    pub asset: Pool,
    /// The pool gpuprobe advises for these GPUs; null where it could not plan.
    pub advised: Option<Pool>,
    pub agrees: Option<bool>,
    pub message: String,
}

/// An asset that runs on every GPU given.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Candidate {
    pub name: String,
    pub url: String,
    /// A second asset to unpack next to it (the CUDA runtime).
    pub companion: Option<Download>,
    pub backend: AssetBackend,
    pub cuda: Option<String>,
    pub rocm: Option<String>,
    pub hip_sdk: Option<String>,
    /// The weakest coverage among the GPUs: native, ptx-jit, override, vulkan.
    pub fit: How,
    pub coverage: Vec<GpuCover>,
    pub driver: Option<DriverCheck>,
    pub pool: Option<PoolCheck>,
    /// Runtime libraries the asset (or its companion) ships.
    pub bundles: Vec<String>,
    /// Runtime advice from gpuprobe's quirk database for these GPUs and this build.
    pub runtime_notes: Vec<String>,
    /// What makes this fit weaker than a native one.
    pub cautions: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Rejected {
    pub name: String,
    pub url: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EraInfo {
    pub id: String,
    pub from: u64,
    pub until: Option<u64>,
    /// Builds whose release workflow was read for this era.
    pub samples: Vec<u64>,
    pub sources: Vec<String>,
    pub boundary: String,
    /// Set when the build lies past the era's last sample: its assets are inferred from it.
    pub inferred_from: Option<u64>,
}

/// `gpuprobe prebuilt --format json` (gpuprobe.prebuilt/v1).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Outcome {
    pub schema: &'static str,
    pub gpuprobe_version: &'static str,
    pub llama_build: u64,
    pub os: AssetOs,
    pub cpu: Cpu,
    /// The GPUs chosen for, one entry per GPU.
    pub gpus: Vec<String>,
    pub driver: Driver,
    pub era: EraInfo,
    /// The asset to download; null when none fits.
    pub choice: Option<Candidate>,
    /// Other assets that fit, ranked below the choice.
    pub alternatives: Vec<Candidate>,
    pub rejected: Vec<Rejected>,
    /// Why none fits (set when `choice` is null).
    pub none_fits: Option<String>,
    /// The command that builds llama.cpp for these GPUs instead (set when `choice` is null).
    pub build_instead: Option<String>,
    /// What to run after unpacking the choice.
    pub next_step: Option<String>,
    /// Where the asset table comes from; the choice was not verified by downloading the asset.
    pub provenance: String,
}

/// The asset for `q` at `q.build`, or why there is none. `advise` gives gpuprobe's plan-derived
/// advice for a GPU asset (None: none to give).
pub fn choose(
    t: &AssetTable,
    q: &Query,
    advise: &mut dyn FnMut(&Asset) -> Option<Advice>,
) -> crate::Result<Outcome> {
    let at = t.era_at(q.build).ok_or_else(|| {
        crate::Error::input(
            "--llama-build",
            format!(
                "gpuprobe's release-asset table starts at build {}",
                t.first_build()
            ),
            format!("give a build from {} on", t.first_build()),
        )
    })?;
    let mut fits: Vec<(Key, Candidate)> = Vec::new();
    let mut rejected = Vec::new();
    for a in at
        .era
        .assets_at(q.build)
        .filter(|a| a.os == q.os && a.cpu == q.cpu)
    {
        let name = a.file_name(q.build);
        let url = table::url(q.build, &name);
        match judge(t, q, a, advise) {
            Ok((key, c)) => fits.push((key, c)),
            Err(reason) => rejected.push(Rejected { name, url, reason }),
        }
    }
    fits.sort_by(|(ka, _), (kb, _)| ka.cmp(kb));
    let mut ranked = fits.into_iter().map(|(_, c)| c);
    let choice = ranked.next();
    let alternatives: Vec<Candidate> = ranked.collect();
    let none_fits = choice.is_none().then(|| {
        if rejected.is_empty() {
            format!(
                "llama.cpp build {} published no asset for {} {}",
                q.build,
                q.os.as_str(),
                q.cpu.as_str()
            )
        } else {
            "no asset of this build runs on every GPU given (reasons below)".to_string()
        }
    });
    let next_step = choice.as_ref().map(|c| next_step(q, c));
    Ok(Outcome {
        schema: SCHEMA,
        gpuprobe_version: env!("CARGO_PKG_VERSION"),
        llama_build: q.build,
        os: q.os,
        cpu: q.cpu,
        gpus: q.gpus.iter().map(|g| g.arch.clone()).collect(),
        driver: q.driver.clone(),
        era: EraInfo {
            id: at.era.id.clone(),
            from: at.era.from,
            until: at.era.until,
            samples: at.era.samples.clone(),
            sources: at.era.sources.clone(),
            boundary: at.era.boundary.clone(),
            inferred_from: at.inferred_from,
        },
        choice,
        alternatives,
        rejected,
        none_fits,
        build_instead: None,
        next_step,
        provenance: "asset names, toolkits and compiled architectures were read from llama.cpp's release workflow (profiles/release-assets.toml); the asset itself was not downloaded".into(),
    })
}

/// Ranking: weakest coverage, then driver support, then pool disagreement, then the newer
/// toolkit first.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    fit: How,
    driver: u8,
    pool_differs: bool,
    newer_toolkit_first: std::cmp::Reverse<(u64, u64)>,
}

fn judge(
    t: &AssetTable,
    q: &Query,
    a: &Asset,
    advise: &mut dyn FnMut(&Asset) -> Option<Advice>,
) -> Result<(Key, Candidate), String> {
    let mut cautions = Vec::new();
    let mut coverage = Vec::new();
    let mut driver_check = None;
    let mut driver_rank = 0u8;
    // One judgement per architecture: two GPUs of a kind are covered alike.
    let mut unique: Vec<&Gpu> = Vec::new();
    for g in &q.gpus {
        if !unique.iter().any(|u| u.arch == g.arch) {
            unique.push(g);
        }
    }
    match a.backend {
        AssetBackend::Cpu => {
            return Err("CPU only: it runs no layer on the GPUs".into());
        }
        AssetBackend::Sycl => {
            return Err("for Intel GPUs (SYCL); none of the GPUs given is Intel".into());
        }
        AssetBackend::Metal => {
            return Err("for Apple GPUs (Metal); none of the GPUs given is Apple".into());
        }
        AssetBackend::Vulkan => {
            for g in &unique {
                coverage.push(GpuCover {
                    gpu: g.arch.clone(),
                    how: How::Vulkan,
                    code: "vulkan".into(),
                    env: None,
                });
            }
            cautions.push("needs the GPU vendor's Vulkan driver (not checked by gpuprobe); usually slower than the vendor's own backend".into());
        }
        AssetBackend::Cuda => {
            let archs = t.cuda_archs(a, q.build);
            let cuda = a
                .cuda
                .clone()
                .unwrap_or_else(|| crate::version::Version::from_number(0));
            let support = driver::support(&q.driver, &cuda);
            for g in &unique {
                if g.vendor != Some(Vendor::Nvidia) {
                    return Err(format!(
                        "CUDA runs on NVIDIA GPUs only; {} is not one",
                        g.arch
                    ));
                }
                let Some(c) = coverage::cuda(&g.arch, &archs) else {
                    let dropped =
                        coverage::cc_of(&g.arch).is_some_and(|cc| cc < 75) && cuda.major() >= 13;
                    return Err(format!(
                        "no code for {}: compiled for {}{}",
                        g.arch,
                        archs.join(";"),
                        if dropped {
                            " (CUDA 13 dropped Maxwell, Pascal and Volta: sm_50 to sm_72)"
                        } else {
                            ""
                        }
                    ));
                };
                if c.how == How::PtxJit {
                    if support == Support::MachineCodeOnly {
                        return Err(format!(
                            "{} is covered only by PTX ({}), and a driver for CUDA {} cannot JIT-compile PTX from CUDA {} (minor-version compatibility runs machine code only; the error is \"the provided PTX was compiled with an unsupported toolchain\")",
                            g.arch,
                            c.code,
                            q.driver
                                .cuda
                                .as_ref()
                                .map(|v| v.to_string())
                                .unwrap_or_default(),
                            cuda
                        ));
                    }
                    cautions.push(format!(
                        "{}: no machine code in this asset; the driver JIT-compiles {} on first use (slow the first time, then cached)",
                        g.arch, c.code
                    ));
                }
                coverage.push(GpuCover {
                    gpu: g.arch.clone(),
                    how: c.how,
                    code: c.code,
                    env: None,
                });
            }
            let driver_text = match (&q.driver.cuda, &q.driver.module) {
                (Some(v), Some(m)) => format!(
                    "driver {m} (CUDA {v}{})",
                    if q.driver.at_least { " or newer" } else { "" }
                ),
                (Some(v), None) => format!("the driver (CUDA {v})"),
                _ => "the driver".into(),
            };
            let message = match support {
                Support::Full => format!(
                    "{driver_text} supports the asset's CUDA {cuda} runtime, PTX JIT included ({})",
                    q.driver.source
                ),
                Support::MachineCodeOnly => format!(
                    "{driver_text} is older than the asset's CUDA {cuda}: it runs through minor-version compatibility (machine code only; PTX cannot be JIT-compiled)"
                ),
                Support::TooOld => {
                    return Err(format!(
                        "its CUDA {cuda} runtime needs a newer driver than {driver_text} (\"CUDA driver version is insufficient for CUDA runtime version\"); install driver {} or newer, or take an asset of an older CUDA",
                        min_driver_for(&cuda)
                    ));
                }
                Support::Unknown => format!(
                    "not known whether the driver supports CUDA {cuda}: it needs {} or newer ({}); pass --driver VER or probe this machine",
                    min_driver_for(&cuda),
                    if q.driver.at_least {
                        "the driver is newer than gpuprobe's table"
                    } else {
                        "no driver measured"
                    }
                ),
            };
            driver_rank = match support {
                Support::Full => 0,
                Support::MachineCodeOnly => 1,
                _ => 2,
            };
            if support == Support::Unknown {
                cautions.push(message.clone());
            }
            driver_check = Some(DriverCheck { support, message });
        }
        AssetBackend::Hip => {
            for g in &unique {
                if g.vendor != Some(Vendor::Amd) {
                    return Err(format!("HIP runs on AMD GPUs only; {} is not one", g.arch));
                }
                let ov = t.override_for(&g.arch);
                let via = ov
                    .filter(|_| q.os == AssetOs::Linux)
                    .map(|o| o.runs_as.as_str());
                let Some(c) = coverage::amd(&g.arch, &a.gpu_targets, via) else {
                    let why_not = match (ov, q.os) {
                        (Some(o), AssetOs::Windows) if a.gpu_targets.contains(&o.runs_as) => {
                            format!(
                                "; HSA_OVERRIDE_GFX_VERSION (to run {} code) works only with ROCm on Linux",
                                o.runs_as
                            )
                        }
                        _ => String::new(),
                    };
                    return Err(format!(
                        "no code for {}: built for {}{why_not}",
                        g.arch,
                        a.gpu_targets.join(";")
                    ));
                };
                let env = (c.how == How::Override)
                    .then(|| ov.map(|o| format!("HSA_OVERRIDE_GFX_VERSION={}", o.value)))
                    .flatten();
                if let Some(e) = &env {
                    cautions.push(format!(
                        "{}: no code for it; runs {} code only with {e} set (not supported by AMD; wrong results or faults are possible)",
                        g.arch, c.code
                    ));
                }
                coverage.push(GpuCover {
                    gpu: g.arch.clone(),
                    how: c.how,
                    code: c.code,
                    env,
                });
            }
        }
    }
    let fit = coverage.iter().map(|c| c.how).max().unwrap_or(How::Vulkan);
    let advice = matches!(a.backend, AssetBackend::Cuda | AssetBackend::Hip)
        .then(|| advise(a))
        .flatten();
    let pool = a
        .pool
        .map(|asset_pool| pool_check(asset_pool, advice.as_ref()));
    let pool_differs = pool.as_ref().is_some_and(|p| p.agrees == Some(false));
    if pool_differs && let Some(p) = &pool {
        cautions.push(p.message.clone());
    }
    let toolkit = a.cuda.as_ref().map(|v| v.major_minor()).unwrap_or((0, 0));
    let build = q.build;
    let c = Candidate {
        name: a.file_name(build),
        url: table::url(build, &a.file_name(build)),
        companion: a.companion_name(build).map(|n| Download {
            url: table::url(build, &n),
            name: n,
        }),
        backend: a.backend,
        cuda: a.cuda.as_ref().map(|v| v.to_string()),
        rocm: a.rocm.clone(),
        hip_sdk: a.hip_sdk.clone(),
        fit,
        coverage,
        driver: driver_check,
        pool,
        bundles: a.bundles.clone(),
        runtime_notes: advice.map(|a| a.runtime_notes).unwrap_or_default(),
        cautions,
    };
    Ok((
        Key {
            fit,
            driver: driver_rank,
            pool_differs,
            newer_toolkit_first: std::cmp::Reverse(toolkit),
        },
        c,
    ))
}

fn pool_check(asset: Pool, advice: Option<&Advice>) -> PoolCheck {
    let name = |p: Pool| match p {
        Pool::Vmm => "the VMM pool",
        Pool::Legacy => "the legacy pool",
    };
    let advised = advice.and_then(|a| a.pool);
    let agrees = advised.map(|p| p == asset);
    let reason = advice.map(|a| a.reason.as_str()).unwrap_or("");
    let message = match advised {
        Some(p) if p == asset => format!(
            "built with {}, as gpuprobe advises for these GPUs",
            name(asset)
        ),
        Some(p) => format!(
            "built with {}; gpuprobe advises {} for these GPUs ({reason}); `gpuprobe cmake-flags` builds one that way",
            name(asset),
            name(p)
        ),
        None => format!(
            "built with {}; gpuprobe has no advice to compare{}",
            name(asset),
            if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            }
        ),
    };
    PoolCheck {
        asset,
        advised,
        agrees,
        message,
    }
}

/// The oldest driver (Linux branch) for a CUDA major version, from profiles/cuda-drivers.toml.
fn min_driver_for(cuda: &crate::version::Version) -> String {
    crate::host::toolkit::min_driver_of(cuda.major())
        .map(|d| format!("{d} (CUDA {}.x)", cuda.major()))
        .unwrap_or_else(|| format!("a driver for CUDA {cuda}"))
}

fn next_step(q: &Query, c: &Candidate) -> String {
    let exe = if q.os == AssetOs::Windows {
        "llama-cli.exe"
    } else {
        "llama-cli"
    };
    let dir = if c.name.ends_with(".tar.gz") {
        format!("llama-b{}/", q.build)
    } else {
        "DIR/".to_string()
    };
    let unpack = match &c.companion {
        Some(comp) if dir == "DIR/" => format!(
            "unpack {} and {} into the same folder (DIR)",
            c.name, comp.name
        ),
        Some(comp) => format!(
            "unpack {} and {}, and move the libraries of the second into {dir} (the programs look next to themselves)",
            c.name, comp.name
        ),
        None => format!(
            "unpack {}{}",
            c.name,
            if dir == "DIR/" {
                " into a folder (DIR)"
            } else {
                ""
            }
        ),
    };
    format!(
        "{unpack}, then check it on this machine: gpuprobe check-build --binary {dir}{exe} --llama-build {}",
        q.build
    )
}
