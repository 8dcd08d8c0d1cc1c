//! Environment hygiene: variables that change which GPUs a runtime shows, or what it does.

use crate::host::HostView;
use crate::report::EnvNotice;

/// (name, what it changes). `GGML_CUDA_P2P` is checked for presence: `=0` enables P2P too.
pub const WATCHED: &[(&str, &str)] = &[
    (
        "HSA_OVERRIDE_GFX_VERSION",
        "makes ROCm treat every AMD GPU as the given gfx version; a stale value mis-targets hardware silently (Q9)",
    ),
    (
        "HIP_VISIBLE_DEVICES",
        "hides AMD GPUs from HIP programs and renumbers the rest",
    ),
    (
        "ROCR_VISIBLE_DEVICES",
        "hides AMD GPUs from the ROCm runtime and renumbers the rest",
    ),
    (
        "CUDA_VISIBLE_DEVICES",
        "hides NVIDIA GPUs from CUDA programs and renumbers the rest",
    ),
    (
        "GGML_CUDA_P2P",
        "turns on peer access in llama.cpp whatever its value (the variable is checked for presence, so =0 also enables it)",
    ),
    (
        "GPU_DEVICE_ORDINAL",
        "hides AMD GPUs from OpenCL programs and renumbers the rest (HIP programs, llama.cpp's among them, ignore it)",
    ),
    (
        "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
        "makes llama.cpp allocate managed memory (right for APUs, slow on discrete GPUs)",
    ),
];

/// The watched variables set in this process's environment.
pub fn notices() -> Vec<EnvNotice> {
    notices_of(&HostView::live())
}

/// The watched variables set where `h` looks (this process, or a replayed dump).
pub fn notices_of(h: &HostView) -> Vec<EnvNotice> {
    WATCHED
        .iter()
        .filter_map(|(name, effect)| {
            let value = h.env(name)?;
            Some(EnvNotice {
                name: name.to_string(),
                value,
                effect: effect.to_string(),
            })
        })
        .collect()
}

/// Names of watched variables that are set (for quirk matching).
pub fn set_names() -> Vec<String> {
    notices().into_iter().map(|n| n.name).collect()
}
