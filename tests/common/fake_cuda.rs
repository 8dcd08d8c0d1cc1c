//! A FAKE `libcuda.so.1` (tests/fake_cuda/fake_libcuda.c), compiled once per test binary with
//! the `cc` crate, and a builder for `gpuprobe` commands that use it in a sealed environment.
//! The fake measures nothing: it exists so that isolation, reporting and decisions can be
//! tested where there is no GPU.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// Which build of the fake driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Exports every function in `src/probe/cuda/sys.rs`.
    Current,
    /// `-DFAKE_OLD_DRIVER`: no cuMemCreate, cuMemMap, cuMemSetAccess, cuMemAddressReserve.
    Old,
}

fn target_triple() -> String {
    let env = if cfg!(target_env = "musl") {
        "musl"
    } else {
        "gnu"
    };
    format!("{}-unknown-linux-{env}", std::env::consts::ARCH)
}

fn compile(build: Build) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda/fake_libcuda.c");
    let name = match build {
        Build::Current => "current",
        Build::Old => "old",
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fake_cuda")
        .join(name);
    std::fs::create_dir_all(&dir).expect("create the fake driver's build directory");
    let triple = target_triple();
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .opt_level(3)
        .debug(false)
        .target(&triple)
        .host(&triple)
        .get_compiler();
    let out = dir.join("libcuda.so.1");
    // Another test process may be building the same file: write aside, then rename.
    let tmp = dir.join(format!("libcuda.so.1.{}.tmp", std::process::id()));
    let mut cmd = compiler.to_command();
    cmd.args(["-shared", "-fPIC", "-pthread", "-Wall", "-Wextra", "-o"])
        .arg(&tmp)
        .arg(&src);
    if build == Build::Old {
        cmd.arg("-DFAKE_OLD_DRIVER");
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {:?}: {e}", compiler.path()));
    assert!(
        output.status.success(),
        "compiling the fake libcuda failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&tmp, &out).expect("move the fake driver into place");
    out
}

/// The fake driver's path, compiled on first use.
pub fn libcuda(build: Build) -> &'static Path {
    static CURRENT: OnceLock<PathBuf> = OnceLock::new();
    static OLD: OnceLock<PathBuf> = OnceLock::new();
    let cell = match build {
        Build::Current => &CURRENT,
        Build::Old => &OLD,
    };
    cell.get_or_init(|| compile(build))
}

/// `/proc/driver/nvidia/version` first lines of the two kernel-module flavours (the open one
/// is the default on recent drivers and GPUs).
pub const OPEN_MODULE: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@fake)  Tue Sep 30 00:00:00 UTC 2025";
pub const PROPRIETARY_MODULE: &str =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  Tue Apr  8 00:00:00 UTC 2025";

/// Variables that would make the report depend on the machine the tests run on.
const SCRUBBED: &[&str] = &[
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GGML_CUDA_P2P",
    "GPU_DEVICE_ORDINAL",
    "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
    "GPUPROBE_QUIRKS_DIR",
    "GPUPROBE_HIP_PROBE",
    "WSL_DISTRO_NAME",
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "FAKE_CUDA_SCENARIO",
    "FAKE_CUDA_DEVICES",
    "FAKE_CUDA_PEER",
    "FAKE_CUDA_PEER_CORRUPT",
    "FAKE_CUDA_PIDFILE",
    "FAKE_CUDA_FREE_MIB",
    "FAKE_CUDA_WINDOW_MS",
    "FAKE_CUDA_HANG_DEVICE",
    "FAKE_CUDA_INIT_MS",
    "FAKE_CUDA_CRASH_DEVICE",
    "GPUPROBE_ISOLATE",
    "GPUPROBE_LIBNVML",
];

/// Free VRAM the fake reports unless a test says otherwise: small, so the smoke test's long
/// phase (past a quarter of free VRAM) stays cheap in host memory and time.
pub const FREE_MIB: u64 = 128;

/// One fake machine: a scenario, the driver build, extra variables, and an empty root for
/// `/proc` and `/sys` (GPUPROBE_SYSFS_ROOT) so nothing of the real machine leaks in.
pub struct FakeMachine {
    pub root: tempfile::TempDir,
    lib: PathBuf,
    scenario: String,
    env: Vec<(String, String)>,
}

impl FakeMachine {
    pub fn new(scenario: &str) -> Self {
        FakeMachine {
            root: tempfile::tempdir().expect("temp dir"),
            lib: libcuda(Build::Current).to_path_buf(),
            scenario: scenario.to_string(),
            env: Vec::new(),
        }
    }

    pub fn old_driver(mut self) -> Self {
        self.lib = libcuda(Build::Old).to_path_buf();
        self
    }

    /// Points GPUPROBE_LIBCUDA somewhere else (e.g. a file that does not exist).
    pub fn lib_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.lib = p.into();
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<str>) -> Self {
        self.env.push((k.to_string(), v.as_ref().to_string()));
        self
    }

    /// What the NVIDIA kernel module shows under /proc: the first line of
    /// `/proc/driver/nvidia/version` (see OPEN_MODULE, PROPRIETARY_MODULE) and one GPU.
    pub fn with_proc_nvidia(self, version_line: &str, bus: &str, model: &str) -> Self {
        let nv = self.root.path().join("proc/driver/nvidia");
        std::fs::create_dir_all(&nv).unwrap();
        std::fs::write(
            nv.join("version"),
            format!("{version_line}\nGCC version:  gcc version 13.3.0 (fake)\n"),
        )
        .unwrap();
        self.with_proc_gpu(bus, model)
    }

    /// One more GPU under `/proc/driver/nvidia/gpus`.
    pub fn with_proc_gpu(self, bus: &str, model: &str) -> Self {
        let dir = self.root.path().join("proc/driver/nvidia/gpus").join(bus);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("information"),
            format!("Model: \t\t {model}\nIRQ:   \t\t 1\nBus Location: \t {bus}\n"),
        )
        .unwrap();
        self
    }

    fn apply(&self, cmd: &mut Command) {
        for v in SCRUBBED {
            cmd.env_remove(v);
        }
        // The fake answers NVML's process list too: the real one, where there is one, knows
        // nothing of the fake's devices.
        cmd.env("GPUPROBE_LIBCUDA", &self.lib)
            .env("GPUPROBE_LIBNVML", &self.lib)
            .env("FAKE_CUDA_SCENARIO", &self.scenario)
            .env("GPUPROBE_SYSFS_ROOT", self.root.path())
            .env("FAKE_CUDA_FREE_MIB", FREE_MIB.to_string())
            .env("XDG_CONFIG_HOME", self.root.path().join("config"))
            .env("XDG_CACHE_HOME", self.root.path().join("cache"))
            .env("NO_COLOR", "1");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }

    /// A plain `std::process::Command` for `gpuprobe ARGS` (for tests that must signal it).
    pub fn std_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuprobe"));
        cmd.args(args);
        self.apply(&mut cmd);
        cmd
    }

    pub fn command(&self, args: &[&str]) -> assert_cmd::Command {
        assert_cmd::Command::from_std(self.std_command(args))
    }

    /// Runs `gpuprobe ARGS`; returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .command(args)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("run gpuprobe");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `gpuprobe detect --json --backend cuda EXTRA`, which must exit 0; returns the report.
    pub fn detect(&self, extra: &[&str]) -> (Value, String) {
        let mut args = vec!["detect", "--json", "--backend", "cuda"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = self.run(&args);
        assert_eq!(
            code, 0,
            "detect {extra:?} exited {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("detect --json is not JSON ({e}):\n{stdout}"));
        (v, stdout)
    }
}

/// The smoke pattern of probes/PROTOCOL.md, computed independently of the crate.
pub fn pattern(word: u64, seed: u32) -> u32 {
    (word as u32).wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(2_246_822_519) ^ 0xA5A5_A5A5
}

/// The seed of pool `pool` in cycle `cycle` (probes/PROTOCOL.md).
pub fn seed(cycle: u32, pool: u32) -> u32 {
    (cycle << 3) | pool
}
