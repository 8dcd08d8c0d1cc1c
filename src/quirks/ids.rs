//! The quirk records the code itself names (as the reason for a decision it makes without
//! matching the record). Each must exist in `profiles/quirks.toml`: `tests/quirk_ids.rs` checks
//! these and every other quirk id written in the sources.

/// HIP builds compile the VMM pool out by default (`GGML_HIP_NO_VMM=ON`): the background of every
/// HIP VMM decision.
pub const HIP_VMM_OFF_BY_DEFAULT: &str = "Q1";
/// The legacy pool keeps peak-sized blocks: VRAM creep and OOM at long context.
pub const LEGACY_POOL_CREEP: &str = "Q2";
/// An HSA runtime that crashes at initialisation takes every HIP program with it.
pub const HSA_INIT_CRASH: &str = "Q10";
/// The 32 GiB VMM address reservation fails (WDDM, WSL2, Jetson).
pub const VMM_RESERVE_FAILS: &str = "Q15";
/// No GPU on a CI machine: `native` architecture detection picks nothing or garbage.
pub const NATIVE_ARCH_IN_CI: &str = "Q19";

/// Every constant above, for the test that checks them against the data.
pub const ALL: &[&str] = &[
    HIP_VMM_OFF_BY_DEFAULT,
    LEGACY_POOL_CREEP,
    HSA_INIT_CRASH,
    VMM_RESERVE_FAILS,
    NATIVE_ARCH_IN_CI,
];
