//! What the per-build facts from llama.cpp's sources (`profiles/llama-facts.toml`) say about a plan:
//! a configure llama.cpp would stop (refused), a build that fails to compile (refused), and targets
//! the build's kernels do not know (warned, with the first build that knows them).

use crate::llama::facts::FactTable;
use crate::platform::Os;
use crate::report::Backend;
use crate::version::Version;

/// One finding: refused or warned, for some targets (none: the whole plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub refuse: bool,
    pub message: String,
    pub targets: Vec<String>,
}

pub struct Inputs<'a> {
    pub build: u64,
    pub backend: Backend,
    pub toolkit: Option<&'a Version>,
    pub os: Os,
    pub targets: &'a [String],
}

pub fn check(facts: &FactTable, i: &Inputs<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    match i.backend {
        Backend::Hip => {
            hip_floor(facts, i, &mut out);
            amd_archs(facts, i, &mut out);
        }
        Backend::Cuda => pdl_toolkit(facts, i, &mut out),
    }
    out
}

/// ggml-hip's CMake stops below its HIP version floor.
fn hip_floor(facts: &FactTable, i: &Inputs<'_>, out: &mut Vec<Finding>) {
    let (Some(v), Some(r)) = (i.toolkit, facts.at("hip_min_version", i.build)) else {
        return;
    };
    let Ok(min) = r.value.parse::<Version>() else {
        return; // "none": no floor in this build
    };
    if v >= &min {
        return;
    }
    let since = r
        .builds
        .min
        .as_ref()
        .map_or(String::new(), |m| format!(" b{}+", m.major()));
    let older = r.builds.min.as_ref().map_or(String::new(), |m| {
        format!(
            ", or plan for a llama.cpp build before {} (--llama-build)",
            m.major()
        )
    });
    out.push(Finding {
        refuse: true,
        message: format!(
            "llama.cpp{since} requires ROCm/HIP >= {min}: configuring build {} with ROCm {v} stops with `At least ROCM/HIP V{min} is required` ({}); fix: build with ROCm {min} or later (--rocm VER){older}",
            i.build, r.source
        ),
        targets: vec![],
    });
}

/// Targets the build's HIP vendor header does not name, where that is known to matter.
fn amd_archs(facts: &FactTable, i: &Inputs<'_>, out: &mut Vec<Finding>) {
    for t in i.targets {
        let name = format!("amd_arch:{t}");
        let Some(fact) = facts.get(&name) else {
            continue;
        };
        let Some((first, r)) = facts.first_build_with(&name, "named") else {
            continue;
        };
        if i.build >= first {
            continue;
        }
        let what = fact
            .consequence
            .clone()
            .unwrap_or_else(|| format!("llama.cpp does not know {t}"));
        out.push(Finding {
            refuse: false,
            message: format!(
                "llama.cpp build {} predates b{first}, the first whose HIP vendor header names {t} ({}): {what}; fix: plan for build {first} or later (--llama-build {first})",
                i.build, r.source
            ),
            targets: vec![t.clone()],
        });
    }
}

/// Builds that compile Programmatic Dependent Launch into sm_90+ code with a CUDA whose device
/// runtime lacks it fail to compile.
fn pdl_toolkit(facts: &FactTable, i: &Inputs<'_>, out: &mut Vec<Finding>) {
    let (Some(v), Some(r)) = (i.toolkit, facts.at("cuda_pdl_min_cudart", i.build)) else {
        return;
    };
    let Ok(cudart) = r.value.parse::<u64>() else {
        return; // "none"
    };
    let Some(api) = facts
        .meta
        .pdl_device_api_cuda
        .as_deref()
        .and_then(|s| s.parse::<Version>().ok())
    else {
        return;
    };
    let guard: Version = match format!("{}.{}", cudart / 1000, (cudart % 1000) / 10).parse() {
        Ok(g) => g,
        Err(_) => return,
    };
    // The MSVC host compiler needs CUDA 12.3 for PDL, so Windows builds below it compile none.
    if i.os == Os::Windows || v < &guard || v >= &api {
        return;
    }
    let hopper: Vec<String> = i
        .targets
        .iter()
        .filter(|t| sm_number(t).is_some_and(|n| n >= 90))
        .cloned()
        .collect();
    if hopper.is_empty() {
        return;
    }
    out.push(Finding {
        refuse: true,
        message: format!(
            "llama.cpp build {} compiles Programmatic Dependent Launch (cudaGridDependencySynchronize) into sm_90 and newer code with CUDA >= {guard} ({}), but CUDA {v}'s device runtime has no such function ({}), so the build fails; fix: build with CUDA {api} or later (--cuda VER), or leave {} out of --targets",
            i.build,
            r.source,
            facts.meta.pdl_device_api_source,
            hopper.join(", ")
        ),
        targets: hopper,
    });
}

fn sm_number(t: &str) -> Option<u64> {
    let n = t.strip_prefix("sm_")?;
    n.trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()
}
