//! The `detect` report: what was measured on this machine (versioned JSON schema).
//!
//! The same types are read back by `cmake-flags --from` and `check-build --from`, so a report
//! captured on a GPU machine can drive decisions on a machine without one.

use serde::{Deserialize, Serialize};

/// Bumped whenever a field changes meaning or disappears; additions keep the number.
pub const SCHEMA: &str = "gpuprobe.report/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cuda,
    Hip,
}

impl Backend {
    pub fn vendor(self) -> Vendor {
        match self {
            Backend::Cuda => Vendor::Nvidia,
            Backend::Hip => Vendor::Amd,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "CUDA",
            Backend::Hip => "HIP",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub os: String,
    pub kernel: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackendStatus {
    pub backend: Backend,
    /// `ok`, `no-driver`, `no-device`, `no-toolchain`, `error`, `skipped`.
    pub status: String,
    pub detail: Option<String>,
    pub driver_version: Option<String>,
    pub runtime_version: Option<String>,
    /// How to get further (e.g. what to install) when status is not `ok`.
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// Where the facts came from: `driver`, `probe-program`, `sysfs`.
    pub source: String,
    pub smoke: Smoke,
}

impl Device {
    /// A device with only its identity known; everything measured starts unknown.
    pub fn new(
        index: u32,
        backend: Backend,
        name: impl Into<String>,
        arch: impl Into<String>,
        source: impl Into<String>,
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
            source: source.into(),
            smoke: Smoke::not_run("not measured"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmokeOutcome {
    Pass,
    Fail,
    Hang,
    Crash,
    BadOutput,
    NotRun,
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
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiError {
    pub api: String,
    pub code: i64,
    pub name: Option<String>,
    pub message: Option<String>,
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Smoke {
    pub outcome: SmokeOutcome,
    /// One sentence a person can act on.
    pub reason: Option<String>,
    /// The stage that failed, or the last stage that started before a hang or crash.
    pub stage: Option<String>,
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
        }
    }

    /// True when the 32 GiB reservation itself failed (WSL, WDDM, Jetson: quirk Q15).
    pub fn reserve_failed(&self) -> bool {
        self.outcome == SmokeOutcome::Fail && self.stage.as_deref() == Some("reserve")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PeerResult {
    pub from: u32,
    pub to: u32,
    pub can_access: Option<bool>,
    pub copy_ok: Option<bool>,
    pub mismatches: Option<u64>,
    pub outcome: SmokeOutcome,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvNotice {
    pub name: String,
    pub value: String,
    pub effect: String,
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
        }
    }

    /// Parses a saved report, refusing other schemas with a message that names the fix.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, crate::Error> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| crate::Error::Input {
                input: origin.to_string(),
                line: Some(e.line()),
                message: format!("not JSON: {e}"),
                fix: "pass a file written by `gpuprobe detect --json`".into(),
            })?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(crate::Error::Input {
                input: origin.to_string(),
                line: None,
                message: format!("schema is `{schema}`, this gpuprobe reads `{SCHEMA}`"),
                fix: "re-create the report with this gpuprobe version: `gpuprobe detect --json > report.json`".into(),
            });
        }
        serde_json::from_value(value).map_err(|e| crate::Error::Input {
            input: origin.to_string(),
            line: None,
            message: format!("does not match the report schema: {e}"),
            fix: "re-create the report with `gpuprobe detect --json`".into(),
        })
    }
}
