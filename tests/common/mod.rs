//! Shared by the integration tests that drive the binary.

use assert_cmd::Command;

/// Environment variables that change what gpuprobe sees or decides; tests start without them.
pub const HOST_VARIABLES: &[&str] = &[
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GGML_CUDA_P2P",
    "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "GPUPROBE_QUIRKS_DIR",
    "GPU_DEVICE_ORDINAL",
    "GPUPROBE_REPLAY",
    "GPUPROBE_SYSFS_ROOT",
];

/// The real binary, with the developer's own quirk files, cache and GPU environment kept out: a
/// probe program built by a test lands under cargo's scratch folder for tests, never in the
/// developer's `~/.cache/gpuprobe`.
pub fn gpuprobe() -> Command {
    Command::from_std(gpuprobe_process())
}

/// [`gpuprobe`] as a `std::process::Command`, for tests that wait on the process themselves.
pub fn gpuprobe_process() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_gpuprobe"));
    c.env("XDG_CONFIG_HOME", "/nonexistent-gpuprobe-config");
    c.env(
        "XDG_CACHE_HOME",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/xdg-cache"),
    );
    for v in HOST_VARIABLES {
        c.env_remove(v);
    }
    c
}

/// The binary run from the repository's root (so fixture paths are relative to it): exit code
/// (-1 for a signal), stdout, stderr.
#[allow(dead_code)]
pub fn run_in_repo(args: &[&str]) -> (i32, String, String) {
    let out = gpuprobe()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("gpuprobe runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
