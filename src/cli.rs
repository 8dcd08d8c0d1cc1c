//! The command line, defined once: parsing, `--help`, the man page and shell completions all
//! come from these types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

macro_rules! exit_codes {
    () => {
        "Exit codes: 0 ok; 1 a problem blocks a safe plan (or check-build found problems); \
2 bad input or usage; 3 environment problem (e.g. no driver when one was required)."
    };
}
const EXIT_CODES: &str = exit_codes!();

/// What check-build accepts: said under its --help and in the error when nothing was given.
macro_rules! check_build_inputs {
    () => {
        "a build folder (`gpuprobe check-build ./build`, or --build-dir ./build), a program \
(--binary ./build/bin/llama-cli, or an executable file as PATH), or a saved log (--log out.txt, \
--log - for stdin, or any other file as PATH)"
    };
}
pub const CHECK_BUILD_INPUTS: &str = check_build_inputs!();

const CHECK_BUILD_HELP: &str = concat!(
    "Inputs: give at least one of ",
    check_build_inputs!(),
    ".\n\n",
    exit_codes!()
);

#[derive(Debug, Parser)]
#[command(
    name = "gpuprobe",
    version,
    about = "Measure which CMake flags are safe and best for building llama.cpp on your GPUs",
    long_about = "Measure which CMake flags are safe and best for building llama.cpp on your GPUs.\n\n\
gpuprobe probes each GPU in an isolated child process (VMM support, allocation granularity, and a \
smoke test that repeats llama.cpp's own VMM pool call sequence), combines what it measured with a \
database of known per-architecture problems and the llama.cpp version, and prints CMake flags with \
the reason for each.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Enumerate GPUs and measure each one (VMM attribute, granularity, smoke test).
    #[command(after_help = EXIT_CODES)]
    Detect(DetectArgs),
    /// Resolve the CMake flags for llama.cpp: probe this machine, read a report, or take declared targets.
    #[command(name = "cmake-flags", after_help = EXIT_CODES)]
    CmakeFlags(CmakeFlagsArgs),
    /// Render a GitHub Actions workflow that builds llama.cpp with the resolved flags.
    #[command(after_help = EXIT_CODES)]
    Workflow(WorkflowArgs),
    /// Judge an existing llama.cpp build (binary or log) against this machine and the quirk database.
    #[command(name = "check-build", after_help = CHECK_BUILD_HELP)]
    CheckBuild(CheckBuildArgs),
    /// Pick the official llama.cpp release asset that runs on these GPUs, or say why none does.
    #[command(after_help = EXIT_CODES)]
    Prebuilt(PrebuiltArgs),
    /// Show the quirk database, or the target table.
    #[command(after_help = EXIT_CODES)]
    Quirks(QuirksArgs),
    /// Print the JSON Schema of a document gpuprobe writes (the same as the file in `schemas/`).
    Schema {
        #[arg(value_enum)]
        document: SchemaDocument,
    },
    /// Print shell completions for SHELL to stdout.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout.
    Man,
    /// Internal: the isolated per-device probe child. Not for direct use.
    #[command(name = "__child", hide = true)]
    Child(ChildArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaDocument {
    /// `detect --json` (gpuprobe.report/v1).
    Report,
    /// `cmake-flags --format json` (gpuprobe.plan/v1).
    Plan,
    /// `check-build --json` (gpuprobe.check-build/v1).
    CheckBuild,
    /// `check-build --exercise --json` (gpuprobe.exercise/v1).
    Exercise,
    /// `check-build --exercise inference --json` (gpuprobe.inference/v1).
    Inference,
    /// `prebuilt --format json` (gpuprobe.prebuilt/v1).
    Prebuilt,
}

pub use crate::report::BackendChoice;

#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Which GPU backend to probe.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Skip the VMM smoke test (only query device facts).
    #[arg(long)]
    pub no_smoke: bool,
    /// Seconds each device's probe may take before it is killed and reported as a hang.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,
    /// Smoke-test cycles per device (fresh reservation and handles each cycle).
    #[arg(long, default_value_t = 200, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub cycles: u32,
    /// Probe each CUDA device in a process of its own (one driver initialisation per device; kept
    /// for comparison and for drivers that misbehave with several devices in one process); HIP
    /// always does. Also GPUPROBE_ISOLATE=1.
    #[arg(long)]
    pub isolate: bool,
}

#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// Print the report as JSON (schema gpuprobe.report/v1); the same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// What to print: the human table, the JSON report, or a Kubernetes Node Feature Discovery
    /// feature file (labels under gpuprobe.feature.node.kubernetes.io/ for a scheduler).
    #[arg(long, value_enum, default_value = "text")]
    pub format: DetectFormat,
    /// Write the output to FILE instead of stdout, atomically (for NFD: a file in
    /// /etc/kubernetes/node-feature-discovery/features.d/, which NFD reads as it changes).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --format nfd: hours until NFD drops these labels unless gpuprobe writes them again.
    #[arg(long, value_name = "HOURS", default_value_t = 24.0)]
    pub expiry: f64,
    /// Exit 3 unless at least one GPU was reached through its runtime (driver or HIP probe).
    #[arg(long)]
    pub require_gpu: bool,
    /// Also write every input read here (kernel files, toolkit versions, relevant environment,
    /// the probe's raw output) with the report to FILE, redacted (user and host names, serial
    /// numbers). `GPUPROBE_REPLAY=FILE gpuprobe detect` turns it back into the same report.
    #[arg(long, value_name = "FILE")]
    pub dump: Option<PathBuf>,
    /// Also show where the time went: when each probe started, driver init, context, queries,
    /// smoke test and peer checks (the JSON report always carries them).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DetectFormat {
    /// The human table.
    Text,
    /// The versioned JSON report (gpuprobe.report/v1).
    Json,
    /// A Node Feature Discovery local feature file (node labels).
    Nfd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A commented POSIX-sh fragment that configures and builds llama.cpp.
    Shell,
    /// Only the -D flags, on one line (one line per group).
    Args,
    /// The whole plan with reasons and quirk ids.
    Json,
    /// A CMakeUserPresets.json.
    Preset,
    /// GitHub Actions step outputs and summary ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY).
    Github,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OsChoice {
    Linux,
    Windows,
    /// Windows Subsystem for Linux 2 (the Linux runtime on a Windows driver).
    Wsl,
}

#[derive(Debug, Args)]
pub struct CmakeFlagsArgs {
    /// Declared targets, comma-separated: gfx names (gfx1100), family tokens (gfx110X, gfx120X) and CUDA
    /// archs (sm_90, 90), built for machines not known here. Targets-only mode: nothing is probed.
    #[arg(long, value_name = "LIST", conflicts_with = "machine")]
    pub targets: Option<String>,
    /// The GPUs of one machine, one name per GPU, comma-separated (gfx1201,gfx1103 for a dGPU
    /// next to an iGPU; sm_75,sm_75 for two of a kind): one build for all of them, and quirks that
    /// depend on the machine's set of GPUs apply definitely. Nothing is probed.
    #[arg(long, value_name = "LIST")]
    pub machine: Option<String>,
    /// Evidence and reports: a `gpuprobe detect --json` report, a `check-build --exercise --json`
    /// document, a `kubectl get nodes -o json` dump of nodes labelled by `detect --format nfd`, or
    /// a directory of them; repeatable. Without --targets/--machine, one report is the machine to
    /// plan for and several reports (or labelled nodes) plan for the union of their GPUs; with
    /// them, the documents are only evidence (measured passes that let HIP VMM on).
    #[arg(long, value_name = "PATH")]
    pub from: Vec<PathBuf>,
    /// A llama.cpp source tree: the options it declares and (from git or an sdist) its build number.
    #[arg(long, value_name = "DIR")]
    pub llama_cpp: Option<PathBuf>,
    /// The llama.cpp build number (the N of release tag bN).
    #[arg(long, value_name = "N")]
    pub llama_build: Option<u64>,
    /// ROCm version that will build llama.cpp (e.g. 6.4.1, 7.2.1, 7.14.0a20260608); with --cuda
    /// too for a machine or fleet with GPUs of both vendors (one build group per backend).
    #[arg(long, value_name = "VER")]
    pub rocm: Option<String>,
    /// CUDA toolkit version that will build llama.cpp (e.g. 12.8, 13.0).
    #[arg(long, value_name = "VER")]
    pub cuda: Option<String>,
    /// Find the toolkit version: `auto` asks nvcc/hipconfig on PATH; or a path to nvcc/hipconfig; `none` skips it.
    #[arg(long, value_name = "auto|none|PATH", default_value = "auto")]
    pub toolchain: String,
    /// Operating system the build is for.
    #[arg(long, value_enum)]
    pub os: Option<OsChoice>,
    #[arg(long, value_enum, default_value = "shell")]
    pub format: Format,
    /// Only this group (by name) for `args`; see `--format json` for the names.
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
    /// Explain every decision on stderr: what matched, why, and the sources.
    #[arg(long)]
    pub explain: bool,
    /// Plan the legacy pool (GGML_*_NO_VMM=ON) whatever was measured, e.g. to compare builds.
    #[arg(long)]
    pub force_no_vmm: bool,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AssetOsChoice {
    Linux,
    Windows,
    Macos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CpuChoice {
    X64,
    Arm64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrebuiltFormat {
    /// The asset, why it fits, the rejected ones.
    Text,
    /// The whole answer (schema gpuprobe.prebuilt/v1; `choice` is null when none fits).
    Json,
    /// Only the download URL(s): the asset, then its runtime companion if it has one.
    Url,
}

#[derive(Debug, Args)]
pub struct PrebuiltArgs {
    /// Declared targets, comma-separated (gfx1152, sm_120, gfx110X): nothing is probed.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["machine", "from"])]
    pub targets: Option<String>,
    /// The GPUs of one machine, one name per GPU (gfx1201,gfx1103): one asset for all of them.
    #[arg(long, value_name = "LIST", conflicts_with = "from")]
    pub machine: Option<String>,
    /// A saved `gpuprobe detect --json` report instead of probing this machine.
    #[arg(long, value_name = "REPORT.json")]
    pub from: Option<PathBuf>,
    /// The OS the asset is for [default: this machine's, or the report's].
    #[arg(long, value_enum)]
    pub os: Option<AssetOsChoice>,
    /// The CPU the asset is for [default: this machine's].
    #[arg(long, value_enum)]
    pub cpu: Option<CpuChoice>,
    /// The llama.cpp build (release bN) [default: the newest whose release workflow gpuprobe read].
    #[arg(long, value_name = "N")]
    pub llama_build: Option<u64>,
    /// The NVIDIA driver version (e.g. 550.54.14), where it is not probed (--targets, --machine).
    #[arg(long, value_name = "VER")]
    pub driver: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: PrebuiltFormat,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

#[derive(Debug, Args)]
pub struct QuirksArgs {
    #[command(subcommand)]
    pub action: Option<QuirksAction>,
}

#[derive(Debug, Subcommand)]
pub enum QuirksAction {
    /// One line per quirk record (the default).
    List {
        #[arg(long)]
        json: bool,
    },
    /// One record in full, with its match conditions, effect and sources.
    Show { id: String },
    /// The known GPU targets and family tokens.
    Targets,
    /// Turn VMM failures measured on this machine into local quirk records (a TOML file edited in
    /// place), so every plan made here keeps the legacy pool there; send them upstream.
    ///
    /// Without --from, this machine is probed and every device whose smoke test failed, hung or
    /// crashed is recorded. With --from, the failures in a saved document are recorded.
    Record {
        /// Record from a saved document instead of probing now: a `gpuprobe detect --json` report
        /// (smoke-test failures) or a `gpuprobe check-build --exercise --json` document (hangs,
        /// crashes and GPU faults of a VMM build under test-backend-ops), or a `check-build
        /// --exercise inference --output FILE` document (hangs, crashes and GPU faults of a VMM
        /// build running a model: a deny; configurations that differ from the CPU and a pool that
        /// keeps memory: warnings with the measured numbers).
        #[arg(long, value_name = "DOCUMENT.json")]
        from: Option<PathBuf>,
        /// The file to add the records to (default: ~/.config/gpuprobe/quirks/local.toml).
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        #[command(flatten)]
        probe: ProbeArgs,
    },
}

#[derive(Debug, Args)]
pub struct ChildArgs {
    /// Backend to probe in this child.
    #[arg(value_enum)]
    pub backend: BackendChoice,
    #[arg(long)]
    pub list: bool,
    #[arg(long)]
    pub device: Option<u32>,
    /// Probe every device in this one process, each from its own thread (with --peers: and each
    /// pair once both of its devices are done).
    #[arg(long, conflicts_with_all = ["device", "list"])]
    pub all: bool,
    /// Check every pair of devices (peer access, VMM pool read from the peer, peer copy).
    #[arg(long)]
    pub peers: bool,
    /// With --peers: only the pairs of these devices (comma-separated indices).
    #[arg(long, value_delimiter = ',', requires = "peers")]
    pub only: Vec<u32>,
    #[arg(long, default_value_t = 200)]
    pub cycles: u32,
    #[arg(long)]
    pub no_smoke: bool,
    /// Print the smoke test's growth schedule for GRANULARITY and FREE bytes, load no driver.
    #[arg(long, num_args = 2, value_names = ["GRANULARITY", "FREE"])]
    pub plan: Option<Vec<u64>>,
}

#[derive(Debug, Args)]
pub struct WorkflowArgs {
    /// Declared targets, comma-separated: gfx names (gfx1100), family tokens (gfx110X, gfx120X) and
    /// CUDA archs (sm_90). Explicit architectures only: never `native`.
    #[arg(long, value_name = "LIST")]
    pub targets: String,
    /// Operating systems to build on, comma-separated: linux, windows.
    #[arg(long, value_name = "LIST", default_value = "linux")]
    pub os: String,
    /// Evidence: `gpuprobe detect --json` reports, `check-build --exercise --json` documents and
    /// `kubectl get nodes -o json` dumps of nodes labelled by `detect --format nfd` (files or
    /// directories of them; repeatable). A HIP target gets the VMM pool only where a
    /// measured pass for its architecture on that ROCm series and OS is among them (or shipped in
    /// profiles/measured.toml).
    #[arg(long, value_name = "PATH")]
    pub from: Vec<PathBuf>,
    /// Backend, when the targets do not make it clear.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// ROCm version to install and build with: 6.x to 7.2.x (AMD's rocm/dev image, Linux only), or
    /// 7.13 and later, a nightly (7.14.0a20260608) or a release candidate (TheRock wheels).
    #[arg(long, value_name = "VER", conflicts_with = "cuda")]
    pub rocm: Option<String>,
    /// CUDA version to install and build with (e.g. 12.8, 12.8.1, 13.0).
    #[arg(long, value_name = "VER")]
    pub cuda: Option<String>,
    /// llama.cpp git ref to build: a release tag such as b11434, a branch or a commit
    /// [default: the tag of the newest build gpuprobe knows]
    #[arg(long, value_name = "REF")]
    pub llama_ref: Option<String>,
    /// llama.cpp build number for option and quirk look-ups (default: N of a bN ref).
    #[arg(long, value_name = "N")]
    pub llama_build: Option<u64>,
    /// Write the workflow to FILE instead of stdout (written whole, or not at all); missing
    /// directories are created and named on stderr.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    pub output: Option<PathBuf>,
    /// Compare FILE with what would be generated: exit 0 when equal, 1 with a unified diff when not.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

/// What `check-build --exercise` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExerciseMode {
    /// llama.cpp's test-backend-ops on each GPU.
    Ops,
    /// A synthetic model on the CPU and in each GPU configuration, compared.
    Inference,
    /// Both.
    All,
}

#[derive(Debug, Clone, Args)]
pub struct CheckBuildArgs {
    /// What to judge: a llama.cpp build folder (as --build-dir), a program (an executable file, as
    /// --binary) or a saved log (any other file, as --log).
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// A llama.cpp program (llama-cli, llama-server...): runs `--version` and `--list-devices` in an
    /// isolated child. With --exercise: test-backend-ops itself, or any program of the build next to it.
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// A saved llama.cpp log (any program, any era) or kernel log (dmesg, journalctl -k); repeat for
    /// several; `-` reads stdin.
    #[arg(long, value_name = "FILE")]
    pub log: Vec<PathBuf>,
    /// Run the build on this machine's GPUs and judge it. `ops` (the default): llama.cpp's own
    /// test-backend-ops on each GPU, on the operations that use the memory pool hardest: pass,
    /// fail, hang, crash. `inference`: a synthetic model gpuprobe writes, run by the build's
    /// llama-perplexity on the CPU and in each GPU configuration (each GPU, splits, flash
    /// attention, KV types, graphs off, MoE offload), compared by KL divergence, plus memory over a
    /// long context. `all`: both. New GPU faults in the kernel log are reported. JSON (--json) is
    /// evidence for `gpuprobe cmake-flags --from` and `gpuprobe quirks record --from`.
    #[arg(long, conflicts_with = "log", value_name = "MODE", num_args = 0..=1, default_missing_value = "ops", value_enum)]
    pub exercise: Option<ExerciseMode>,
    /// With --exercise inference: the user's GGUF model instead of the synthetic ones (dense
    /// configurations; MoE ones too when it has experts).
    #[arg(long, value_name = "FILE", requires = "exercise")]
    pub model: Option<PathBuf>,
    /// With --exercise inference: size of the synthetic models in MiB of f16 weights.
    #[arg(long, value_name = "MIB", default_value_t = 16, requires = "exercise")]
    pub model_mib: u64,
    /// With --exercise inference: folder for the models, text and logits (default: a new
    /// temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR", requires = "exercise")]
    pub work_dir: Option<PathBuf>,
    /// With --exercise inference: only these configurations (comma-separated): base, fa, kv-q8_0,
    /// kv-q4_0, graphs-off, moe, moe-ncmoe, split-layer, split-row.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "exercise"
    )]
    pub configs: Vec<String>,
    /// With --exercise inference: context of the long run whose memory is sampled (0: none).
    #[arg(
        long,
        value_name = "TOKENS",
        default_value_t = 4096,
        requires = "exercise"
    )]
    pub memory_context: u32,
    /// With --exercise inference: seconds after which no new run starts (the rest are reported
    /// as not run).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 900.0,
        requires = "exercise"
    )]
    pub budget: f64,
    /// A llama.cpp build folder (the one given to `cmake -B`). Without --exercise: its program in
    /// bin/ (llama-cli, else llama-server, llama-bench...) is run as with --binary; CMakeCache.txt
    /// is not read (the program says what was compiled in; the cache says what the next build
    /// would ask for). With --exercise: test-backend-ops and llama-perplexity come from its bin/.
    #[arg(long, value_name = "DIR")]
    pub build_dir: Option<PathBuf>,
    /// With --exercise: a llama.cpp device to exercise (CUDA0, ROCm1, CPU); repeatable. Default:
    /// every GPU of the build's backend that the probe (or --from) finds.
    #[arg(long = "device", value_name = "NAME", requires = "exercise")]
    pub devices: Vec<String>,
    /// With --exercise: seconds one device's run may take before it is killed and reported as a hang.
    #[arg(
        long,
        default_value_t = 300.0,
        value_name = "SECS",
        requires = "exercise"
    )]
    pub exercise_timeout: f64,
    /// With --exercise: test-backend-ops `-o` (ops, comma-separated; default MUL_MAT,FLASH_ATTN_EXT).
    #[arg(long, value_name = "LIST", requires = "exercise")]
    pub ops: Option<String>,
    /// With --exercise: test-backend-ops `-p` (a regex over the test parameters; default: MUL_MAT
    /// with quantized weights, flash attention with q8_0/q4_0 KV, and with f16 KV of 1024+ tokens).
    #[arg(long, value_name = "REGEX", requires = "exercise")]
    pub params: Option<String>,
    /// Write the JSON document to FILE too (whole, or not at all).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Compare with a saved `gpuprobe detect --json` report instead of probing this machine.
    #[arg(long, value_name = "REPORT.json", conflicts_with = "no_probe")]
    pub from: Option<PathBuf>,
    /// Do not probe this machine; judge the build from its own output and the quirk database only.
    #[arg(long)]
    pub no_probe: bool,
    /// The build number, when the binary does not know it (builds from an sdist report build 0).
    #[arg(long, value_name = "N")]
    pub llama_build: Option<u64>,
    /// Print findings as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write out every "may apply" note (folded into one line by default; the JSON has them all).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub probe: ProbeArgs,
}
