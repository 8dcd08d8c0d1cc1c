//! The `detect` report: what was measured on this machine (versioned JSON schema).
//!
//! The same types are read back by `cmake-flags --from` and `check-build --from`, so a report
//! captured on a GPU machine can drive decisions on a machine without one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bumped whenever a field changes meaning or disappears; additions keep the number.
pub const SCHEMA: &str = "gpuprobe.report/v1";

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cuda,
    Hip,
}

impl Vendor {
    pub fn backend(self) -> Backend {
        match self {
            Vendor::Nvidia => Backend::Cuda,
            Vendor::Amd => Backend::Hip,
        }
    }
    /// The toolkit (and runtime) that builds for and runs on the vendor's GPUs: `CUDA`, `ROCm`.
    pub fn toolkit(self) -> &'static str {
        match self {
            Vendor::Nvidia => "CUDA",
            Vendor::Amd => "ROCm",
        }
    }
    /// `NVIDIA GPU`, `AMD GPU`.
    pub fn gpu_word(self) -> &'static str {
        match self {
            Vendor::Nvidia => "NVIDIA GPU",
            Vendor::Amd => "AMD GPU",
        }
    }
}

impl Backend {
    pub fn vendor(self) -> Vendor {
        match self {
            Backend::Cuda => Vendor::Nvidia,
            Backend::Hip => Vendor::Amd,
        }
    }
    /// `CUDA`, `HIP`: the backend named in sentences.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "CUDA",
            Backend::Hip => "HIP",
        }
    }
    /// `cuda`, `hip`: the spelling of `--backend`, of the JSON and of build group names.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
        }
    }
    /// `CUDA`, `ROCm`: the toolkit that builds the backend and runs its programs.
    pub fn toolkit(self) -> &'static str {
        self.vendor().toolkit()
    }
    /// `cuda`, `rocm`: the option that gives the toolkit's version (`--cuda VER`, `--rocm VER`).
    pub fn toolkit_option(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Hip => "rocm",
        }
    }
    /// `CUDA`, `ROCm`: llama.cpp's name for the backend's registry and devices (`ROCm0`).
    pub fn llama_name(self) -> &'static str {
        match self {
            Backend::Cuda => "CUDA",
            Backend::Hip => "ROCm",
        }
    }
    /// The backend whose registry llama.cpp names `name` (`CUDA`, `ROCm`).
    pub fn from_llama_name(name: &str) -> Option<Backend> {
        [Backend::Cuda, Backend::Hip]
            .into_iter()
            .find(|b| b.llama_name() == name)
    }
    /// The CMake option that compiles llama.cpp's VMM pool out when ON.
    pub fn no_vmm_flag(self) -> &'static str {
        match self {
            Backend::Cuda => "GGML_CUDA_NO_VMM",
            Backend::Hip => "GGML_HIP_NO_VMM",
        }
    }
    /// The CMake options that turn the backend on, by era: `GGML_HIPBLAS` was renamed
    /// `GGML_HIP` at build 4080.
    pub fn switch_names(self) -> &'static [&'static str] {
        match self {
            Backend::Cuda => &["GGML_CUDA"],
            Backend::Hip => &["GGML_HIP", "GGML_HIPBLAS"],
        }
    }
}

/// Which backends `detect` probes: both (`auto`), or one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Auto,
    Cuda,
    Hip,
}

impl BackendChoice {
    /// The one backend chosen; None for `auto`.
    pub fn backend(self) -> Option<Backend> {
        match self {
            BackendChoice::Auto => None,
            BackendChoice::Cuda => Some(Backend::Cuda),
            BackendChoice::Hip => Some(Backend::Hip),
        }
    }
    /// Whether `b` is probed.
    pub fn includes(self, b: Backend) -> bool {
        self.backend().is_none_or(|c| c == b)
    }
    pub fn as_str(self) -> &'static str {
        self.backend().map_or("auto", Backend::as_str)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Report {
    pub schema: String,
    pub gpuprobe_version: String,
    pub host: Host,
    /// One entry per backend that was tried, found or not.
    pub backends: Vec<BackendStatus>,
    pub devices: Vec<Device>,
    #[serde(default)]
    pub peers: Vec<PeerResult>,
    /// Environment variables that change what the GPU runtime shows or does.
    #[serde(default)]
    pub environment: Vec<EnvNotice>,
    /// GPUs present on the machine that a visible-devices variable hides from programs: listed,
    /// never planned for.
    #[serde(default)]
    pub hidden_devices: Vec<HiddenDevice>,
    /// How visible-device variables map the machine's GPUs to the indices programs see.
    #[serde(default)]
    pub visibility: Vec<Visibility>,
    /// What stops (or would stop) a GPU from being usable on this host, each with its fix.
    #[serde(default)]
    pub host_checks: Vec<HostCheck>,
    /// How the probing went: device counting, when each child started, where the time went,
    /// the peer child. Absent in reports read from files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_run: Option<ProbeRun>,
}

/// The parent's view of one `detect`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProbeRun {
    /// Wall-clock milliseconds of the whole probe (none in a replay or a dump: nothing ran then).
    pub wall_ms: Option<f64>,
    pub backends: Vec<BackendRun>,
}

/// One backend's probing, as the parent saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BackendRun {
    pub backend: Option<Backend>,
    /// How the devices were counted before any driver was loaded: `procfs`, `pci-sysfs`, `kfd`,
    /// or `hello` (no file said, so the first child's answer was awaited before starting more).
    pub count_source: String,
    /// Devices counted that way: that many children started at once.
    pub counted: u32,
    /// From the start of `detect` until every child of this backend had exited.
    pub wall_ms: Option<f64>,
    /// With status `hang`: the last stage the backend's probe announced before it was killed.
    // `driver_init` when it announced none.
    #[schemars(with = "Option<String>")]
    pub last_stage: Option<SmokeStage>,
    /// The peer checks: with `isolated`, the peer child (two or more devices), started with the
    /// device children; with `shared`, the checks inside the shared child.
    pub peer: Option<PeerRun>,
    /// How the devices were probed (absent in reports from before the shared child).
    #[serde(default)]
    pub mode: Option<ChildMode>,
    /// The shared child ended before every device had finished (not at the deadline): how, and
    /// which devices were then probed again each in a child of its own.
    #[serde(default)]
    pub shared_crash: Option<SharedCrash>,
}

/// How a backend's devices were probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChildMode {
    /// One child for every device, each device from its own thread (CUDA's default).
    Shared,
    /// One child per device (HIP, and CUDA with `--isolate`).
    Isolated,
}

/// A shared child that ended early: what every device finished before stays; the rest is probed
/// again, one child per device, so that one faulty GPU costs no other its result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SharedCrash {
    /// How it ended (`died with SIGSEGV (11)`, `exited with code 0 before its report was complete`).
    pub how: String,
    /// The devices that had not finished, re-run isolated.
    pub rerun_isolated: Vec<u32>,
}

/// The peer checks: one process for every pair started with the device children (`isolated`), or
/// inside the shared child, each pair once both of its devices are done (`shared`: `start_ms` is
/// when the first pair began, `wall_ms` until the last ended, and no context is created).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PeerRun {
    pub start_ms: Option<f64>,
    pub wall_ms: Option<f64>,
    /// Its own numbers: creating a context on every device (`isolated` only), and all the checks.
    pub contexts_ms: Option<f64>,
    pub elapsed_ms: Option<f64>,
    pub pairs: Vec<PeerVmm>,
}

/// Each device's VMM pool, with access granted to its peers in one call as llama.cpp does with
/// GGML_CUDA_P2P or an NCCL/RCCL build, read by the other device of the pair.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PeerVmm {
    pub from: u32,
    pub to: u32,
    /// Whether `to` can access `from`'s memory (the other direction of `PeerResult::can_access`).
    pub reverse_can_access: Option<bool>,
    /// Null when neither device could access the other.
    pub read_ok: Option<bool>,
    pub mismatches: u64,
    pub stage: Option<String>,
    pub error: Option<ApiError>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Host {
    pub os: String,
    pub kernel: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BackendStatus {
    pub backend: Backend,
    /// `ok`, `no-driver`, `no-device`, `no-toolchain`, `probe-build-failed`, `error`, `skipped`,
    /// or `hang` (the backend's probe was killed at the deadline before it could report; the
    /// stage it was in is in `detail` and `probe_run`).
    pub status: BackendState,
    pub detail: Option<String>,
    pub driver_version: Option<String>,
    pub runtime_version: Option<String>,
    /// How to get further (e.g. what to install) when status is not `ok`.
    pub hint: Option<String>,
}

/// How far a backend's probe got.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackendState {
    Ok,
    NoDriver,
    NoDevice,
    NoToolchain,
    ProbeBuildFailed,
    Error,
    Skipped,
    Hang,
}

impl BackendState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Ok => "ok",
            BackendState::NoDriver => "no-driver",
            BackendState::NoDevice => "no-device",
            BackendState::NoToolchain => "no-toolchain",
            BackendState::ProbeBuildFailed => "probe-build-failed",
            BackendState::Error => "error",
            BackendState::Skipped => "skipped",
            BackendState::Hang => "hang",
        }
    }
}

impl std::fmt::Display for BackendState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one device's probe spent its time (milliseconds). `start_ms` is when its child was
/// started, from the start of `detect`: equal starts mean no serial phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct StageTimings {
    pub start_ms: Option<f64>,
    /// Loading the driver and initialising it (cuInit / HIP runtime), in the child.
    pub driver_init_ms: Option<f64>,
    /// Creating the device's context.
    pub context_ms: Option<f64>,
    /// Device attributes, granularity, memory.
    pub queries_ms: Option<f64>,
    pub smoke_ms: Option<f64>,
    /// The child from start to exit, as the parent saw it (includes process start and teardown);
    /// in the shared child, from its start to this device's own `done`, as the child timed it.
    pub wall_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Device {
    pub index: u32,
    pub backend: Backend,
    pub vendor: Vendor,
    pub name: String,
    /// `sm_90`, `gfx1201`.
    pub arch: String,
    /// AMD target features such as `sramecc+:xnack-`.
    pub arch_features: Option<String>,
    pub compute_capability: Option<String>,
    pub vram_total_bytes: Option<u64>,
    pub vram_free_bytes: Option<u64>,
    pub pci_bus_id: Option<String>,
    pub integrated: Option<bool>,
    pub wave_size: Option<u32>,
    pub vmm_supported: Option<bool>,
    pub granularity_min: Option<u64>,
    pub granularity_recommended: Option<u64>,
    pub driver_version: Option<String>,
    pub runtime_version: Option<String>,
    /// Where the facts came from: `driver`, `probe-program`, `sysfs` (KFD), `procfs`, and the
    /// fallbacks `sysfs-ip-discovery` / `drm-ip-discovery` (architecture from DRM IP discovery).
    pub source: DeviceSource,
    pub smoke: Smoke,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<StageTimings>,
}

/// The architecture a probe writes for a device it saw but could not name (no compute capability,
/// no gfx target): such a device has no build target.
pub const UNKNOWN_ARCH: &str = "unknown";

/// `arch` is a real architecture, not [`UNKNOWN_ARCH`].
pub fn arch_known(arch: &str) -> bool {
    arch != UNKNOWN_ARCH
}

/// Where a device's facts came from. Only `driver` and `probe-program` mean a GPU runtime reached
/// the device; the others are what the kernel shows of a GPU no runtime could use.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceSource {
    Driver,
    ProbeProgram,
    Sysfs,
    SysfsIpDiscovery,
    DrmIpDiscovery,
    Procfs,
    None,
}

impl DeviceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceSource::Driver => "driver",
            DeviceSource::ProbeProgram => "probe-program",
            DeviceSource::Sysfs => "sysfs",
            DeviceSource::SysfsIpDiscovery => "sysfs-ip-discovery",
            DeviceSource::DrmIpDiscovery => "drm-ip-discovery",
            DeviceSource::Procfs => "procfs",
            DeviceSource::None => "none",
        }
    }

    /// A GPU runtime (the CUDA driver or the HIP probe program) measured the device.
    pub fn is_runtime(self) -> bool {
        matches!(self, DeviceSource::Driver | DeviceSource::ProbeProgram)
    }
}

impl std::fmt::Display for DeviceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Device {
    pub fn arch_known(&self) -> bool {
        arch_known(&self.arch)
    }

    /// A device with only its identity known; everything measured starts unknown.
    pub fn new(
        index: u32,
        backend: Backend,
        name: impl Into<String>,
        arch: impl Into<String>,
        source: DeviceSource,
    ) -> Self {
        Device {
            index,
            backend,
            vendor: backend.vendor(),
            name: name.into(),
            arch: arch.into(),
            arch_features: None,
            compute_capability: None,
            vram_total_bytes: None,
            vram_free_bytes: None,
            pci_bus_id: None,
            integrated: None,
            wave_size: None,
            vmm_supported: None,
            granularity_min: None,
            granularity_recommended: None,
            driver_version: None,
            runtime_version: None,
            source,
            smoke: Smoke::not_run("not measured"),
            timings: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SmokeOutcome {
    Pass,
    Fail,
    Hang,
    Crash,
    BadOutput,
    NotRun,
    /// Passed, but over fewer cycles than the plan's minimum: nothing wrong was seen, and it
    /// lifts no deny (a `pass` needs the full count).
    Partial,
}

impl SmokeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SmokeOutcome::Pass => "pass",
            SmokeOutcome::Fail => "fail",
            SmokeOutcome::Hang => "hang",
            SmokeOutcome::Crash => "crash",
            SmokeOutcome::BadOutput => "bad-output",
            SmokeOutcome::NotRun => "not-run",
            SmokeOutcome::Partial => "partial",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ApiError {
    pub api: String,
    pub code: i64,
    pub name: Option<String>,
    pub message: Option<String>,
}

impl ApiError {
    /// The name given to a call whose entry point the driver library does not export.
    pub const SYMBOL_NOT_FOUND: &'static str = "SYMBOL_NOT_FOUND";
    /// The name given to a driver library that could not be loaded at all (`dlopen` failed).
    pub const LIBRARY_NOT_FOUND: &'static str = "LIBRARY_NOT_FOUND";

    /// The driver lacks the function: too old, not a failing call.
    pub fn is_symbol_not_found(&self) -> bool {
        self.name.as_deref() == Some(Self::SYMBOL_NOT_FOUND)
    }

    /// No driver library at all.
    pub fn is_library_not_found(&self) -> bool {
        self.name.as_deref() == Some(Self::LIBRARY_NOT_FOUND)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} returned {}",
            self.api,
            self.name.as_deref().unwrap_or("error")
        )?;
        write!(f, " ({})", self.code)?;
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// Which check of the smoke test saw wrong words (probes/PROTOCOL.md); a name this gpuprobe does
/// not know is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum BadCheck {
    /// Read back on the GPU right after mapping.
    Gpu,
    /// While the next chunk was being mapped.
    Busy,
    /// Again after the host waited.
    Settle,
    /// On the host, after copying the pool there.
    Host,
    Other(String),
}

impl BadCheck {
    pub fn as_str(&self) -> &str {
        match self {
            BadCheck::Gpu => "gpu",
            BadCheck::Busy => "busy",
            BadCheck::Settle => "settle",
            BadCheck::Host => "host",
            BadCheck::Other(s) => s,
        }
    }
}

impl From<&str> for BadCheck {
    fn from(s: &str) -> Self {
        match s {
            "gpu" => BadCheck::Gpu,
            "busy" => BadCheck::Busy,
            "settle" => BadCheck::Settle,
            "host" => BadCheck::Host,
            other => BadCheck::Other(other.to_string()),
        }
    }
}

impl From<String> for BadCheck {
    fn from(s: String) -> Self {
        BadCheck::from(s.as_str())
    }
}

impl From<BadCheck> for String {
    fn from(c: BadCheck) -> Self {
        c.as_str().to_string()
    }
}

/// A stage of the smoke test, as the probe children name it (probes/PROTOCOL.md). A name this
/// gpuprobe does not know (a newer probe, a recorded dump) is kept as written, so a report reads
/// back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SmokeStage {
    /// Before any stage: the driver or runtime was still loading (a hang there names this).
    DriverInit,
    Init,
    Context,
    VramCheck,
    Reserve,
    Create,
    Map,
    SetAccess,
    Write,
    Verify,
    Busy,
    Settle,
    HostCompare,
    Sync,
    Unmap,
    Free,
    Release,
    Other(String),
}

impl SmokeStage {
    pub fn as_str(&self) -> &str {
        match self {
            SmokeStage::DriverInit => "driver_init",
            SmokeStage::Init => "init",
            SmokeStage::Context => "context",
            SmokeStage::VramCheck => "vram_check",
            SmokeStage::Reserve => "reserve",
            SmokeStage::Create => "create",
            SmokeStage::Map => "map",
            SmokeStage::SetAccess => "set_access",
            SmokeStage::Write => "write",
            SmokeStage::Verify => "verify",
            SmokeStage::Busy => "busy",
            SmokeStage::Settle => "settle",
            SmokeStage::HostCompare => "host_compare",
            SmokeStage::Sync => "sync",
            SmokeStage::Unmap => "unmap",
            SmokeStage::Free => "free",
            SmokeStage::Release => "release",
            SmokeStage::Other(s) => s,
        }
    }
}

impl From<&str> for SmokeStage {
    fn from(s: &str) -> Self {
        match s {
            "driver_init" => SmokeStage::DriverInit,
            "init" => SmokeStage::Init,
            "context" => SmokeStage::Context,
            "vram_check" => SmokeStage::VramCheck,
            "reserve" => SmokeStage::Reserve,
            "create" => SmokeStage::Create,
            "map" => SmokeStage::Map,
            "set_access" => SmokeStage::SetAccess,
            "write" => SmokeStage::Write,
            "verify" => SmokeStage::Verify,
            "busy" => SmokeStage::Busy,
            "settle" => SmokeStage::Settle,
            "host_compare" => SmokeStage::HostCompare,
            "sync" => SmokeStage::Sync,
            "unmap" => SmokeStage::Unmap,
            "free" => SmokeStage::Free,
            "release" => SmokeStage::Release,
            other => SmokeStage::Other(other.to_string()),
        }
    }
}

impl From<String> for SmokeStage {
    fn from(s: String) -> Self {
        SmokeStage::from(s.as_str())
    }
}

impl From<SmokeStage> for String {
    fn from(s: SmokeStage) -> Self {
        s.as_str().to_string()
    }
}

impl std::fmt::Display for SmokeStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Smoke {
    pub outcome: SmokeOutcome,
    /// One sentence a person can act on.
    pub reason: Option<String>,
    /// The stage that failed, or the last stage that started before a hang or crash.
    #[schemars(with = "Option<String>")]
    pub stage: Option<SmokeStage>,
    pub error: Option<ApiError>,
    pub signal: Option<i32>,
    pub cycles_done: Option<u32>,
    pub cycles: Option<u32>,
    pub chunks_per_cycle: Option<u32>,
    pub chunk_bytes: Option<u64>,
    pub reserve_bytes: Option<u64>,
    pub mismatches: Option<u64>,
    pub first_bad_offset: Option<u64>,
    pub first_bad_value: Option<u32>,
    pub expected_value: Option<u32>,
    /// Where access on the new chunk failed: would access over the whole mapped range work?
    pub whole_range_access_helped: Option<bool>,
    pub vram_free_before: Option<u64>,
    pub vram_free_after: Option<u64>,
    pub elapsed_ms: Option<f64>,
    /// The child's last stderr lines, for hangs, crashes and bad output.
    #[serde(default)]
    pub stderr_tail: Vec<String>,
    /// What the growth plan looked like and how far it got (probes/smoke-plan.toml).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<SmokeGrowth>,
    /// Who else used the GPU during the test, and what the driver charged to the probe itself
    /// (absent where the driver offers no per-process accounting, and in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<GpuSharing>,
    /// What the measurement met that did not change its outcome (free VRAM moved by other
    /// processes, a plan scaled down to the free VRAM).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The GPU as others used it during the smoke test, from the driver's per-process accounting.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct GpuSharing {
    /// Where the numbers come from: `nvml` (NVIDIA) or `kfd` (AMD, /sys/class/kfd).
    pub source: String,
    /// True when other compute processes were seen on the GPU: the measurement ran beside them.
    pub shared: bool,
    /// Their process ids, as the driver names them (another PID namespace's, in a container).
    #[serde(default)]
    pub other_pids: Vec<u32>,
    /// False where the driver's list did not name this probe (another PID namespace): one of
    /// `other_pids` may then be the probe itself.
    pub own_listed: bool,
    /// VRAM the driver charged to the probe before the first cycle and after the last.
    pub own_vram_before: Option<u64>,
    pub own_vram_after: Option<u64>,
}

/// The smoke test's pool growth: the plan that ran, where it failed, what it covered.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SmokeGrowth {
    pub plan_version: Option<u32>,
    /// Cycles a pass needs to count (fewer give `partial`).
    pub min_cycles: Option<u32>,
    pub pools: Option<u32>,
    pub failed_cycle: Option<u32>,
    pub failed_pool: Option<u32>,
    pub failed_growth: Option<u32>,
    /// Which check saw wrong words: `gpu`, `busy`, `settle` (after the host waited) or `host`.
    #[schemars(with = "Option<String>")]
    pub bad_check: Option<BadCheck>,
    pub smallest_chunk_bytes: Option<u64>,
    pub largest_chunk_bytes: Option<u64>,
    pub largest_pool_bytes: Option<u64>,
    pub long_target_bytes: Option<u64>,
    pub long_growths: Option<u32>,
    pub host_checked_bytes: Option<u64>,
    pub long_phase_ms: Option<f64>,
}

impl Smoke {
    pub fn not_run(reason: impl Into<String>) -> Self {
        Smoke::with_outcome(SmokeOutcome::NotRun, reason)
    }

    pub fn with_outcome(outcome: SmokeOutcome, reason: impl Into<String>) -> Self {
        Smoke {
            outcome,
            reason: Some(reason.into()),
            stage: None,
            error: None,
            signal: None,
            cycles_done: None,
            cycles: None,
            chunks_per_cycle: None,
            chunk_bytes: None,
            reserve_bytes: None,
            mismatches: None,
            first_bad_offset: None,
            first_bad_value: None,
            expected_value: None,
            whole_range_access_helped: None,
            vram_free_before: None,
            vram_free_after: None,
            elapsed_ms: None,
            stderr_tail: Vec::new(),
            growth: None,
            sharing: None,
            notes: Vec::new(),
        }
    }

    /// True when the 32 GiB reservation itself failed (WSL, WDDM, Jetson: quirk Q15).
    pub fn reserve_failed(&self) -> bool {
        self.outcome == SmokeOutcome::Fail && self.stage == Some(SmokeStage::Reserve)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PeerResult {
    pub from: u32,
    pub to: u32,
    pub can_access: Option<bool>,
    pub copy_ok: Option<bool>,
    pub mismatches: Option<u64>,
    pub outcome: SmokeOutcome,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct EnvNotice {
    pub name: String,
    pub value: String,
    pub effect: String,
}

/// A GPU hidden from programs by a visible-devices variable. `device.index` is its position in
/// the machine's own order (KFD nodes, PCI bus order).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HiddenDevice {
    #[serde(flatten)]
    pub device: Device,
    /// `HIP_VISIBLE_DEVICES=1`.
    pub hidden_by: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Visibility {
    pub backend: Backend,
    /// `NAME=value` of the variables that took effect, in the order they apply.
    pub variables: Vec<String>,
    /// One entry per GPU on the machine, in its own order.
    pub devices: Vec<VisibleDevice>,
    /// `measured` (the runtime's device list, matched by PCI bus id) or `predicted` (from the
    /// variables alone).
    pub basis: String,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct VisibleDevice {
    /// Position in the machine's own order.
    pub physical: u32,
    /// The index programs (llama.cpp's `ROCm0`, `CUDA1`) use; None when hidden.
    pub visible: Option<u32>,
    pub name: String,
    pub arch: String,
    pub pci_bus_id: Option<String>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = accept_info)]
pub enum CheckLevel {
    /// Informs; nothing to do (saved reports may say `info`, the name before 0.2).
    #[serde(alias = "info")]
    Note,
    Warning,
    Error,
}

/// Documents written before `note` was the name say `info`: still read, so still valid.
pub fn accept_info(schema: &mut schemars::Schema) {
    if let Some(serde_json::Value::Array(variants)) = schema.get_mut("oneOf") {
        variants.push(serde_json::json!({
            "const": "info",
            "deprecated": true,
            "description": "The earlier name of `note`: read, never written.",
            "type": "string"
        }));
    }
}

impl CheckLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckLevel::Note => "note",
            CheckLevel::Warning => "warning",
            CheckLevel::Error => "error",
        }
    }
}

/// One host finding: a fact about the machine that decides whether its GPUs can be used.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostCheck {
    /// Stable identifier (`kfd-no-access`, `visible-devices-hide-all`, `hip-target-unbuildable`).
    pub id: String,
    pub level: CheckLevel,
    pub title: String,
    pub detail: String,
    pub fix: Option<String>,
    /// Supporting lines (a compiler's error, the command run, the files read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

impl HostCheck {
    pub fn new(
        id: &str,
        level: CheckLevel,
        title: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        HostCheck {
            id: id.into(),
            level,
            title: title.into(),
            detail: detail.into(),
            fix: None,
            evidence: Vec::new(),
        }
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    pub fn evidence(mut self, lines: impl IntoIterator<Item = String>) -> Self {
        self.evidence.extend(lines);
        self
    }
}

impl Report {
    pub fn new(host: Host) -> Self {
        Report {
            schema: SCHEMA.to_string(),
            gpuprobe_version: env!("CARGO_PKG_VERSION").to_string(),
            host,
            backends: Vec::new(),
            devices: Vec::new(),
            peers: Vec::new(),
            environment: Vec::new(),
            hidden_devices: Vec::new(),
            visibility: Vec::new(),
            host_checks: Vec::new(),
            probe_run: None,
        }
    }

    /// The report without what the parent's clock measured (device timings, wall and start
    /// times): what a replay of the same inputs reproduces.
    pub fn strip_timings(&mut self) {
        if let Some(run) = self.probe_run.as_mut() {
            run.wall_ms = None;
            for b in run.backends.iter_mut() {
                b.wall_ms = None;
                if let Some(p) = b.peer.as_mut() {
                    p.start_ms = None;
                    p.wall_ms = None;
                }
            }
        }
        for d in self.devices.iter_mut() {
            d.timings = None;
        }
        for h in self.hidden_devices.iter_mut() {
            h.device.timings = None;
        }
    }

    /// The schema check (the `schema` field, then the published schema) and deserialisation,
    /// without the field checks of [`crate::report_file`].
    pub fn from_json_value(value: serde_json::Value, origin: &str) -> Result<Self, crate::Error> {
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(crate::Error::Input {
                input: origin.to_string(),
                line: None,
                message: format!("schema is `{}`, this gpuprobe reads `{SCHEMA}`", crate::neutral::inline(schema)),
                fix: "re-create the report with this gpuprobe version: `gpuprobe detect --json > report.json`".into(),
            });
        }
        crate::published::enforce(crate::published::Document::Report, &value, origin)?;
        serde_json::from_value(value).map_err(|e| crate::Error::Input {
            input: origin.to_string(),
            line: None,
            message: format!("does not match the report schema: {e}"),
            fix: "re-create the report with `gpuprobe detect --json`".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoke_stages_and_checks_read_back_as_written() {
        for name in [
            "reserve",
            "set_access",
            "host_compare",
            "init",
            "driver_init",
            "a_newer_stage",
        ] {
            let stage: SmokeStage = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(serde_json::to_value(&stage).unwrap(), name);
            assert_eq!(stage.to_string(), name);
        }
        assert_eq!(SmokeStage::from("reserve"), SmokeStage::Reserve);
        for name in ["gpu", "busy", "settle", "host", "a_newer_check"] {
            let check: BadCheck = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(serde_json::to_value(&check).unwrap(), name);
        }
        assert_eq!(
            SmokeStage::from("a_newer_stage"),
            SmokeStage::Other("a_newer_stage".into())
        );
    }

    #[test]
    fn state_names_are_their_serde_names() {
        use BackendState as B;
        for s in [
            B::Ok,
            B::NoDriver,
            B::NoDevice,
            B::NoToolchain,
            B::ProbeBuildFailed,
            B::Error,
            B::Skipped,
            B::Hang,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        use DeviceSource as D;
        for s in [
            D::Driver,
            D::ProbeProgram,
            D::Sysfs,
            D::SysfsIpDiscovery,
            D::DrmIpDiscovery,
            D::Procfs,
            D::None,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
