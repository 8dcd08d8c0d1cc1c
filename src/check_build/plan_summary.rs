//! What the resolver would build for the devices judged, as check-build quotes it: one line of
//! CMake flags per group, which every rebuild fix repeats.

use schemars::JsonSchema;
use serde::Serialize;

use crate::emit::sh_quote;
use crate::plan::{Group, Mode, Plan};
use crate::report::Backend;

/// What the resolver would build for this machine (or for the build's own devices).
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct PlanSummary {
    pub backend: Backend,
    pub mode: Mode,
    pub groups: Vec<PlanGroup>,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct PlanGroup {
    pub name: String,
    pub targets: Vec<String>,
    pub devices: Vec<u32>,
    pub vmm: bool,
    pub cmake_args: Vec<String>,
}

/// `cmake -S llama.cpp -B build -D...` for one plan group, ready to paste.
pub fn rebuild_command(g: &PlanGroup, script_hint: &str) -> String {
    let args: Vec<String> = g.cmake_args.iter().map(|a| sh_quote(a)).collect();
    format!(
        "rebuild: cmake -S llama.cpp -B build {} && cmake --build build --config Release -j (the same flags with a reason for each: {script_hint})",
        args.join(" ")
    )
}

/// The groups of a resolved plan, each with its flags as CMake arguments.
pub fn summarise(plan: &Plan) -> PlanSummary {
    PlanSummary {
        backend: plan.backend,
        mode: plan.mode,
        groups: plan
            .groups
            .iter()
            .map(|g: &Group| PlanGroup {
                name: g.name.clone(),
                targets: g.targets.clone(),
                devices: g.devices.clone(),
                vmm: g.vmm,
                cmake_args: g.cmake_args(),
            })
            .collect(),
    }
}
