//! gpuprobe's own plan for these GPUs, made as if building with the asset's toolkit: the pool it
//! advises and the runtime notes (environment advice, warnings) of the quirks that apply.

use super::Advice;
use super::table::{Asset, AssetBackend, AssetOs, Pool};
use crate::evidence::Evidence;
use crate::llama::LlamaTarget;
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::Backend;
use crate::resolve::{Devices, Request, resolve};

/// The advice for `asset` at `build`, or None for an asset of no GPU vendor.
pub fn advise(
    k: &Knowledge,
    devices: &Devices<'_>,
    evidence: &Evidence,
    os: AssetOs,
    wsl: bool,
    build: u64,
    asset: &Asset,
) -> Option<Advice> {
    let backend = match asset.backend {
        AssetBackend::Cuda => Backend::Cuda,
        AssetBackend::Hip => Backend::Hip,
        _ => return None,
    };
    let os = match (os, wsl) {
        (_, true) => Os::Wsl,
        (AssetOs::Windows, _) => Os::Windows,
        _ => Os::Linux,
    };
    let no_plan = |why: String| {
        Some(Advice {
            pool: None,
            reason: why,
            runtime_notes: Vec::new(),
        })
    };
    let llama = match LlamaTarget::select(None, Some(build), &k.options) {
        Ok((l, _)) => l,
        Err(e) => return no_plan(e.to_string()),
    };
    let rocm = asset.rocm.as_deref().and_then(|v| v.parse().ok());
    let req = Request {
        devices: devices.clone(),
        backend: Some(backend),
        llama,
        rocm,
        cuda: asset.cuda.clone(),
        rocm_source: "the asset's ROCm".into(),
        cuda_source: "the asset's CUDA".into(),
        os,
        env_set: Vec::new(),
        force_no_vmm: false,
        evidence: evidence.clone(),
    };
    let plan = match resolve(k, &req) {
        Ok(p) => p,
        Err(e) => return no_plan(format!("no plan: {e}")),
    };
    if plan.refused() {
        let why = plan
            .refusals
            .iter()
            .map(|r| r.message.clone())
            .collect::<Vec<_>>()
            .join("; ");
        return no_plan(format!("gpuprobe refuses a plan for these GPUs: {why}"));
    }
    let group = plan.groups.first()?;
    let flag = group.flag(backend.no_vmm_flag());
    let reason = flag
        .map(|f| f.reason.clone())
        .unwrap_or_else(|| "no pool flag in the plan".into());
    let mut notes: Vec<String> = Vec::new();
    for g in &plan.groups {
        for e in &g.env {
            let line = match &e.when {
                Some(w) => format!("{}={} when {w}: {}", e.name, e.value, e.reason),
                None => format!("{}={}: {}", e.name, e.value, e.reason),
            };
            if !notes.contains(&line) {
                notes.push(line);
            }
        }
    }
    for w in &plan.warnings {
        if !notes.contains(&w.message) {
            notes.push(w.message.clone());
        }
    }
    Some(Advice {
        pool: Some(if group.vmm { Pool::Vmm } else { Pool::Legacy }),
        reason,
        runtime_notes: notes,
    })
}
