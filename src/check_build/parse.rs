//! Extracting facts from what a llama.cpp build prints about itself: `--version`,
//! `--list-devices`, and startup logs (`ggml_cuda_init`, `system_info`, `device_info`).
//!
//! Text from every era is accepted (the formats of common/arg.cpp's `--version`, ggml-cuda.cu's
//! `ggml_cuda_init` and `ggml_backend_cuda_get_features`, and src/llama.cpp's system_info):
//! `version: N (hash)` up to build 10393 and `version: X.Y.Z (build N, commit hash)` after;
//! `ggml_init_cublas:` / `ggml_cuda_init:` headers with or without `(Total VRAM: …)`; device
//! lines with or without `VMM:`, `Wave Size:` and `VRAM:`; lines behind a log prefix such as
//! `0.00.187.745 I ` or a launcher's own timestamp. Nothing here fails: what is not recognised
//! is simply not in the result. Lines that start with `#` are comments (a saved file's header, a
//! Markdown heading in a pasted report) and are skipped.

use schemars::JsonSchema;
use serde::Serialize;

/// Everything recognised in the text.
#[derive(Debug, Clone, Default, Serialize, PartialEq, JsonSchema)]
pub struct BuildFacts {
    pub version: VersionInfo,
    /// Backends named anywhere (init headers, device names, system_info registries), in order of
    /// first appearance: `CUDA`, `ROCm`, `MUSA`, `Vulkan`, `SYCL`, `Metal`, ...
    pub backends: Vec<String>,
    /// `ggml_cuda_init: found N <backend> devices` (and the Vulkan equivalent).
    pub inits: Vec<InitHeader>,
    /// `ggml_cuda_init: failed to initialize ROCm: ...`
    pub init_errors: Vec<InitError>,
    /// Per-device lines printed when the backend starts (`  Device 0: NVIDIA H200, ...`).
    pub devices: Vec<DeviceLine>,
    /// `Available devices:` entries (and the `device_info:` form of llama-server's trace log).
    pub listed: Vec<ListedDevice>,
    /// An `Available devices:` line was seen.
    pub list_seen: bool,
    /// `Available devices:` was followed by `(none)`: the build has no GPU device (CPU only).
    pub list_none: bool,
    /// Backend feature strings from `system_info` (`CUDA : ARCHS = 900 | USE_GRAPHS = 1 |`).
    pub registries: Vec<Registry>,
    /// A `system_info:` line was seen (old ones carry CPU flags only, no registries).
    pub system_info_seen: bool,
    /// Old builds print `ggml_cuda_init: GGML_CUDA_FORCE_MMQ: yes/no` at start-up.
    pub init_force_mmq: Option<bool>,
    pub init_force_cublas: Option<bool>,
    /// GPU devices the run put model, KV or compute buffers on (`ROCm1 model buffer size = ...`),
    /// in order of first appearance: two or more is a run split across GPUs.
    pub run_devices: Vec<RunDevice>,
    /// Number of lines that contributed at least one fact.
    pub lines_recognised: usize,
}

/// A device a run used, and the first line that shows it.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct RunDevice {
    /// `CUDA0`, `ROCm1`.
    pub name: String,
    pub backend: String,
    pub line: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, JsonSchema)]
pub struct VersionInfo {
    /// The build number as printed; builds made without git print 0.
    pub reported_build: Option<u64>,
    /// The build number, when known (never 0).
    pub build: Option<u64>,
    /// Short commit hash; None when absent or printed as `unknown`.
    pub commit: Option<String>,
    /// `0.6.0-dev` (printed from build 10394 on).
    pub semver: Option<String>,
    pub compiler: Option<String>,
    pub target: Option<String>,
    /// The line the build number came from.
    pub line: Option<String>,
    /// `version` (`--version`), `log` (`build: N (hash) with ...`), `bench` (`build: hash (N)`).
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct InitHeader {
    pub backend: String,
    pub count: u32,
    pub total_vram_mib: Option<u64>,
    pub line: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct InitError {
    pub backend: String,
    pub message: String,
    pub line: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, JsonSchema)]
pub struct DeviceLine {
    pub backend: String,
    pub index: u32,
    pub name: String,
    /// `sm_90` (CUDA, from the compute capability) or `gfx1201` (HIP, from gcnArchName).
    pub arch: Option<String>,
    /// AMD target features after the name, such as `sramecc+:xnack-`.
    pub arch_features: Option<String>,
    /// `9.0` (CUDA; old HIP builds printed one too).
    pub compute_capability: Option<String>,
    /// HIP: the hex id printed after the arch, `0x1201`.
    pub arch_id: Option<String>,
    /// `VMM: yes/no` (absent before VMM support existed).
    pub vmm: Option<bool>,
    pub wave_size: Option<u32>,
    pub vram_mib: Option<u64>,
    pub vram_free_mib: Option<u64>,
    pub line: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ListedDevice {
    /// `CUDA0`, `ROCm1`, `Vulkan0`, `CPU`.
    pub name: String,
    /// `CUDA`, `ROCm`, `Vulkan`, `CPU`.
    pub backend: String,
    pub index: Option<u32>,
    pub description: String,
    pub total_mib: Option<u64>,
    pub free_mib: Option<u64>,
    /// A GPU backend's device (not CPU, BLAS or an accelerator).
    pub gpu: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Registry {
    /// `CUDA`, `ROCm`, `MUSA`, `CPU`, `Vulkan`, ...
    pub name: String,
    pub features: Vec<Feature>,
    pub line: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Feature {
    pub key: String,
    pub value: String,
}

/// The backends built from `ggml/src/ggml-cuda`: they print `ggml_cuda_init` lines and the
/// VMM-related features, and they are the ones gpuprobe judges.
pub const CUDA_FAMILY: &[&str] = &["CUDA", "ROCm", "MUSA"];

/// Backend names that run on a GPU, as ggml spells its registries and device names.
const GPU_BACKENDS: &[&str] = &[
    "CUDA", "ROCm", "MUSA", "Vulkan", "SYCL", "Metal", "MTL", "OpenCL", "CANN", "WebGPU", "HIP",
];

/// Backend names that are not GPUs (listed devices and registries to tell apart).
const OTHER_BACKENDS: &[&str] = &[
    "CPU", "BLAS", "ACCEL", "RPC", "zDNN", "Hexagon", "HTP", "OpenVINO",
];

impl Registry {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.features
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.value.as_str())
    }
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl BuildFacts {
    /// The GPU backend this build is for: the first CUDA-family backend, else the first GPU one.
    pub fn gpu_backend(&self) -> Option<&str> {
        self.backends
            .iter()
            .find(|b| CUDA_FAMILY.contains(&b.as_str()))
            .or_else(|| self.backends.iter().find(|b| is_gpu_backend(b)))
            .map(String::as_str)
    }

    /// The system_info registry of a CUDA-family backend, if one was printed.
    pub fn cuda_registry(&self) -> Option<&Registry> {
        self.registries
            .iter()
            .find(|r| CUDA_FAMILY.contains(&r.name.as_str()))
    }

    /// Whether the VMM pool is compiled in, and the evidence. `NO_VMM = 1` in system_info says
    /// no; a CUDA-family registry without it, or any device line with `VMM: yes`, says yes.
    /// Device lines that all say `VMM: no` cannot tell "compiled out" from "device lacks VMM".
    pub fn vmm_compiled(&self) -> (Option<bool>, String) {
        if let Some(r) = self.cuda_registry() {
            return if r.has("NO_VMM") {
                (
                    Some(false),
                    format!(
                        "system_info prints `{} : NO_VMM = {}`",
                        r.name,
                        r.get("NO_VMM").unwrap_or("1")
                    ),
                )
            } else {
                (
                    Some(true),
                    format!("system_info prints the {} features without NO_VMM", r.name),
                )
            };
        }
        if let Some(d) = self.devices.iter().find(|d| d.vmm == Some(true)) {
            return (
                Some(true),
                format!("device {} ({}) is listed with `VMM: yes`", d.index, d.name),
            );
        }
        if self.devices.iter().any(|d| d.vmm == Some(false)) {
            return (
                None,
                "every device line says `VMM: no`, which a build without VMM prints whatever the device supports; no system_info line to settle it".into(),
            );
        }
        (
            None,
            "neither a system_info line nor a `VMM:` device line was found".into(),
        )
    }

    /// `ARCHS = 750,800,860` of a CUDA build, as numbers (`__CUDA_ARCH_LIST__`: 10 × cc).
    pub fn cuda_archs(&self) -> Option<Vec<u32>> {
        let r = self.registries.iter().find(|r| r.name == "CUDA")?;
        let v = r.get("ARCHS")?;
        let archs: Vec<u32> = v
            .split([',', ';', ' '])
            .filter_map(|s| {
                let digits: String = s
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                digits.parse().ok()
            })
            .collect();
        Some(archs)
    }

    /// A CUDA-family feature flag: Some(true) when printed, Some(false) when the registry was
    /// printed without it, None when no registry was seen.
    pub fn feature_flag(&self, key: &str) -> Option<bool> {
        self.cuda_registry()
            .map(|r| r.get(key).is_some_and(|v| v != "0"))
    }

    /// True when nothing at all was recognised.
    pub fn is_empty(&self) -> bool {
        self.lines_recognised == 0
    }

    /// The build has no GPU backend: it listed `(none)`, or printed a version and devices
    /// list/system_info without naming any GPU backend.
    pub fn cpu_only(&self) -> bool {
        if self.gpu_backend().is_some() {
            return false;
        }
        self.list_none
            || (self.list_seen && self.listed.iter().all(|d| !d.gpu))
            || self.registries.iter().any(|r| r.name == "CPU")
    }
}

pub fn is_gpu_backend(name: &str) -> bool {
    GPU_BACKENDS.contains(&name)
}

/// Parses all of `text`. Never fails.
pub fn parse(text: &str) -> BuildFacts {
    let mut r = Reading::default();
    for raw in text.lines() {
        let line = raw.trim_end_matches(['\r', ' ', '\t']);
        // Comment lines (a saved file's header, a Markdown heading of a pasted report) are not
        // llama.cpp output.
        if super::pattern::is_comment(line) {
            continue;
        }
        let body = strip_log_prefix(line);
        let before = snapshot(&r.f, &r.seen);
        r.version(body);
        r.init(body);
        r.device_lines(line, body);
        r.device_list(body);
        r.system_info(line, body);
        if snapshot(&r.f, &r.seen) != before {
            r.f.lines_recognised += 1;
        }
    }
    if r.seen.beyond > 0 {
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: the input lists more than {MAX_DEVICES} devices of one kind; {} device lines after those were not judged",
            r.seen.beyond
        ));
    }
    r.f
}

/// The facts so far, and what reading a line depends on from the lines before it.
#[derive(Default)]
struct Reading {
    f: BuildFacts,
    /// The backend of the last init header (`ggml_cuda_init: found 2 ROCm devices:`).
    header_backend: Option<String>,
    /// Inside the list after `Available devices:`.
    after_list_header: bool,
    /// How good the version source kept is (a `--version` line beats a log's build line).
    version_rank: u8,
    /// What is already kept, by key: a hostile log of 100k device or feature lines stays linear.
    seen: Seen,
}

impl Reading {
    /// The version, build number and compiler.
    fn version(&mut self, body: &str) {
        let f = &mut self.f;
        if let Some(v) = parse_version_line(body) {
            take_version(f, v, 3, &mut self.version_rank);
        } else if let Some(v) = parse_build_log_line(body) {
            take_version(f, v, 2, &mut self.version_rank);
        } else if let Some(v) = parse_bench_build_line(body) {
            take_version(f, v, 1, &mut self.version_rank);
        }
        if let Some((compiler, target)) = parse_built_with(body) {
            f.version.compiler.get_or_insert(compiler);
            f.version.target.get_or_insert(target);
        }
    }

    /// Backend start-up: its header, errors, flags, and the backends loaded.
    fn init(&mut self, body: &str) {
        let f = &mut self.f;
        if let Some(h) = parse_init_header(body) {
            add_backend(f, &h.backend);
            self.header_backend = Some(h.backend.clone());
            f.inits.push(h);
        }
        if let Some(e) = parse_init_error(body) {
            add_backend(f, &e.backend);
            if !f
                .init_errors
                .iter()
                .any(|x| x.backend == e.backend && x.message == e.message)
            {
                f.init_errors.push(e);
            }
        }
        if let Some((key, yes)) = parse_init_flag(body) {
            match key {
                "FORCE_MMQ" => f.init_force_mmq = Some(yes),
                _ => f.init_force_cublas = Some(yes),
            }
        }
        if let Some(name) = parse_loaded_backend(body)
            && name != "CPU"
            && name != "RPC"
        {
            add_backend(f, &name);
        }
    }

    /// The per-device lines a backend prints at start-up (CUDA family, Vulkan).
    fn device_lines(&mut self, line: &str, body: &str) {
        let (f, seen) = (&mut self.f, &mut self.seen);
        if let Some(mut d) = parse_device_line(body, self.header_backend.as_deref()) {
            d.line = line.trim().to_string();
            add_backend(f, &d.backend);
            if seen.keep(f.devices.len()) && seen.devices.insert((d.backend.clone(), d.index)) {
                f.devices.push(d);
            }
        }
        if let Some(d) = parse_vulkan_device(body) {
            add_backend(f, "Vulkan");
            if seen.keep(f.devices.len()) && seen.devices.insert((d.backend.clone(), d.index)) {
                f.devices.push(d);
            }
        }
    }

    /// `--list-devices`: the header, `(none)`, and each listed device.
    fn device_list(&mut self, body: &str) {
        let (f, seen) = (&mut self.f, &mut self.seen);
        if body.contains("Available devices:") {
            f.list_seen = true;
            self.after_list_header = true;
        } else if self.after_list_header && body.trim() == "(none)" {
            f.list_none = true;
            self.after_list_header = false;
        } else if let Some(d) = parse_listed_device(body) {
            if d.gpu {
                add_backend(f, &d.backend);
            }
            if seen.keep(f.listed.len()) && seen.listed.insert(d.name.clone()) {
                f.listed.push(d);
            }
        } else if !body.trim().is_empty() && !body.contains(':') {
            self.after_list_header = false;
        }
    }

    /// system_info's registries and features, and the buffers a run put on each device.
    fn system_info(&mut self, line: &str, body: &str) {
        let (f, seen) = (&mut self.f, &mut self.seen);
        if body.contains("system_info:") || body.contains("system info:") {
            f.system_info_seen = true;
        }
        for r in parse_registries(body) {
            if is_gpu_backend(&r.name) {
                add_backend(f, &r.name);
            }
            merge_registry(f, seen, r, line.trim());
        }
        if let Some((name, backend)) = parse_buffer_line(body)
            && seen.keep(f.run_devices.len())
            && seen.run_devices.insert(name.clone())
        {
            f.run_devices.push(RunDevice {
                name,
                backend,
                line: line.trim().to_string(),
            });
        }
    }
}

/// The most devices of one kind (started, listed, used by a run) kept from one input: far above
/// any machine, and a bound on the per-device work of judging a hostile log.
pub const MAX_DEVICES: usize = 1024;

/// Keys of what [`parse`] has kept, so that each line costs the same however many came before.
#[derive(Default)]
struct Seen {
    devices: std::collections::HashSet<(String, u32)>,
    listed: std::collections::HashSet<String>,
    run_devices: std::collections::HashSet<String>,
    /// (registry, feature key)
    features: std::collections::HashSet<(String, String)>,
    /// Registry name to its place in `registries`.
    registries: std::collections::HashMap<String, usize>,
    /// Device lines past [`MAX_DEVICES`], counted and said, not kept.
    beyond: usize,
}

impl Seen {
    /// Whether one more device fits beside `kept`; counts the ones that do not.
    fn keep(&mut self, kept: usize) -> bool {
        if kept < MAX_DEVICES {
            return true;
        }
        self.beyond += 1;
        false
    }
}

/// A cheap fingerprint of the facts, to count the lines that added something.
#[derive(PartialEq)]
struct Fingerprint {
    counts: [usize; 6],
    flags: [bool; 3],
    version: Option<String>,
    compiler: Option<String>,
    init_flags: [Option<bool>; 2],
}

fn snapshot(f: &BuildFacts, seen: &Seen) -> Fingerprint {
    Fingerprint {
        counts: [
            f.backends.len(),
            f.inits.len(),
            f.init_errors.len(),
            f.devices.len(),
            f.listed.len(),
            seen.features.len() + f.registries.len() + f.run_devices.len(),
        ],
        flags: [f.list_seen, f.list_none, f.system_info_seen],
        version: f.version.line.clone(),
        compiler: f.version.compiler.clone(),
        init_flags: [f.init_force_mmq, f.init_force_cublas],
    }
}

fn add_backend(f: &mut BuildFacts, name: &str) {
    let canonical = match name {
        "MTL" => "Metal",
        "HIP" => "ROCm",
        n => n,
    };
    if !f.backends.iter().any(|b| b == canonical) {
        f.backends.push(canonical.to_string());
    }
}

fn take_version(f: &mut BuildFacts, v: VersionInfo, rank: u8, best: &mut u8) {
    if rank <= *best {
        // A weaker source only fills in what a stronger one left open.
        if f.version.semver.is_none() {
            f.version.semver = v.semver;
        }
        return;
    }
    *best = rank;
    let compiler = f.version.compiler.take().or(v.compiler.clone());
    let target = f.version.target.take().or(v.target.clone());
    let semver = v.semver.clone().or(f.version.semver.take());
    f.version = VersionInfo {
        compiler,
        target,
        semver,
        ..v
    };
}

/// Removes a leading llama.cpp log prefix (`0.00.187.745 I `), also when a launcher put its
/// own prefix in front (`2026-07-07 06:42:38.509 [Info] (Process) 0.00.108.345 I `).
pub fn strip_log_prefix(line: &str) -> &str {
    let mut search = 0;
    while let Some(rel) = line[search..].find(|c: char| c.is_ascii_digit()) {
        let start = search + rel;
        if start > 0 && !line[..start].ends_with([' ', '\t', ')', ']']) {
            search = start + 1;
            if search >= line.len() {
                break;
            }
            continue;
        }
        if let Some(end) = llama_timestamp_end(&line[start..]) {
            return &line[start + end..];
        }
        // Skip this run of digits and look further.
        let run = line[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(line.len() - start);
        search = start + run;
        if search >= line.len() {
            break;
        }
    }
    line
}

/// `D+.DD.DDD.DDD X ` (time since start, then a level letter): returns the length to skip.
fn llama_timestamp_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == 0 {
        return None;
    }
    for width in [2usize, 3, 3] {
        if i >= b.len() || b[i] != b'.' {
            return None;
        }
        i += 1;
        for _ in 0..width {
            if i >= b.len() || !b[i].is_ascii_digit() {
                return None;
            }
            i += 1;
        }
    }
    if i + 2 <= b.len()
        && b[i] == b' '
        && b[i + 1].is_ascii_uppercase()
        && (i + 2 == b.len() || b[i + 2] == b' ')
    {
        return Some((i + 3).min(b.len()));
    }
    None
}

fn is_hash(s: &str) -> bool {
    s.len() >= 4 && s.len() <= 40 && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn commit_of(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty() && s != "unknown").then(|| s.to_string())
}

fn build_of(n: u64) -> Option<u64> {
    (n != 0).then_some(n)
}

/// `version: 0.6.0-dev (build 0, commit unknown)` (build 10394 on) or `version: 4579 (abc1234)`.
fn parse_version_line(body: &str) -> Option<VersionInfo> {
    let at = find_word(body, "version: ")?;
    let rest = body[at + "version: ".len()..].trim();
    let (head, paren) = rest.split_once(" (")?;
    let inner = paren.strip_suffix(')').unwrap_or(paren);
    let line = Some(body.trim().to_string());
    let source = Some("version".to_string());
    if let Some(b) = inner.strip_prefix("build ") {
        // New format: semver (build N, commit H)
        let (n, commit) = b.split_once(", commit ")?;
        let n: u64 = n.trim().parse().ok()?;
        if !head.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        return Some(VersionInfo {
            reported_build: Some(n),
            build: build_of(n),
            commit: commit_of(commit),
            semver: Some(head.trim().to_string()),
            line,
            source,
            ..Default::default()
        });
    }
    let n: u64 = head.trim().parse().ok()?;
    let commit = inner.trim();
    if commit != "unknown" && !is_hash(commit) {
        return None;
    }
    Some(VersionInfo {
        reported_build: Some(n),
        build: build_of(n),
        commit: commit_of(commit),
        line,
        source,
        ..Default::default()
    })
}

/// `word` at the start of `s` or after whitespace.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(rel) = s[from..].find(word) {
        let at = from + rel;
        if at == 0 || s[..at].ends_with([' ', '\t', ':']) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `built with GNU 13.3.0 for Linux x86_64`
fn parse_built_with(body: &str) -> Option<(String, String)> {
    let at = find_word(body, "built with ")?;
    let rest = body[at + "built with ".len()..].trim();
    let (compiler, target) = rest.rsplit_once(" for ")?;
    Some((compiler.trim().to_string(), target.trim().to_string()))
}

/// Log forms: `build: 4526 (a94f3b272) with cc ... for x86_64-linux-gnu`,
/// `common_params_print_info: build 0 (unknown) with GNU 13.3.0 for Linux x86_64`,
/// `main: build = 968 (acfc547)`.
fn parse_build_log_line(body: &str) -> Option<VersionInfo> {
    for key in ["build: ", "build = ", "build "] {
        let mut from = 0;
        while let Some(rel) = body[from..].find(key) {
            let at = from + rel;
            from = at + key.len();
            if at > 0 && !body[..at].ends_with([' ', '\t', ':']) {
                continue;
            }
            let rest = &body[at + key.len()..];
            let Some((n, tail)) = rest.split_once(" (") else {
                continue;
            };
            let Ok(n) = n.trim().parse::<u64>() else {
                continue;
            };
            let Some((commit, after)) = tail.split_once(')') else {
                continue;
            };
            if commit != "unknown" && !is_hash(commit) {
                continue;
            }
            let (compiler, target) = match after
                .trim()
                .strip_prefix("with ")
                .and_then(|w| w.rsplit_once(" for "))
            {
                Some((c, t)) => (Some(c.trim().to_string()), Some(t.trim().to_string())),
                None => (None, None),
            };
            return Some(VersionInfo {
                reported_build: Some(n),
                build: build_of(n),
                commit: commit_of(commit),
                compiler,
                target,
                line: Some(body.trim().to_string()),
                source: Some("log".into()),
                ..Default::default()
            });
        }
    }
    None
}

/// llama-bench's last line: `build: 4f63cd70 (6431)`.
fn parse_bench_build_line(body: &str) -> Option<VersionInfo> {
    let rest = body.trim().strip_prefix("build: ")?;
    let (commit, paren) = rest.split_once(" (")?;
    let n: u64 = paren.strip_suffix(')')?.trim().parse().ok()?;
    if !is_hash(commit) {
        return None;
    }
    Some(VersionInfo {
        reported_build: Some(n),
        build: build_of(n),
        commit: commit_of(commit),
        line: Some(body.trim().to_string()),
        source: Some("bench".into()),
        ..Default::default()
    })
}

/// `ggml_cuda_init: found 2 CUDA devices (Total VRAM: 286311 MiB):`,
/// `ggml_init_cublas: found 1 ROCm devices:`, `ggml_vulkan: Found 1 Vulkan devices:`.
fn parse_init_header(body: &str) -> Option<InitHeader> {
    let at = body.find("found ").or_else(|| body.find("Found "))?;
    let prefix = &body[..at];
    if !(prefix.contains("ggml_cuda_init")
        || prefix.contains("ggml_init_cublas")
        || prefix.contains("ggml_vulkan"))
    {
        return None;
    }
    let rest = &body[at + "found ".len()..];
    let mut words = rest.split_whitespace();
    let count: u32 = words.next()?.parse().ok()?;
    let backend = words.next()?.to_string();
    let devices = words.next()?;
    if !devices.starts_with("device") {
        return None;
    }
    let total_vram_mib = rest
        .split_once("(Total VRAM: ")
        .and_then(|(_, t)| t.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    let backend = if backend == "HIP" {
        "ROCm".to_string()
    } else {
        backend
    };
    Some(InitHeader {
        backend,
        count,
        total_vram_mib,
        line: body.trim().to_string(),
    })
}

/// `load_tensors:        ROCm1 model buffer size = 10788.36 MiB`, `llama_kv_cache:      CUDA0 KV
/// buffer size = ...`, `llama_context:      CUDA1 compute buffer size = ...` (and the older
/// `llm_load_tensors:      CUDA0 buffer size = ...`): the device name and its backend.
fn parse_buffer_line(body: &str) -> Option<(String, String)> {
    let at = body.find(" buffer size")?;
    let head = body[..at].trim_end();
    let head = head
        .strip_suffix(" model")
        .or_else(|| head.strip_suffix(" KV"))
        .or_else(|| head.strip_suffix(" compute"))
        .unwrap_or(head);
    let token = head.rsplit([' ', '\t', ':']).next()?;
    let digits = token.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let backend = &token[..token.len() - digits.len()];
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let backend = match backend {
        "HIP" => "ROCm",
        b if is_gpu_backend(b) => b,
        _ => return None,
    };
    Some((token.to_string(), backend.to_string()))
}

/// `ggml_cuda_init: failed to initialize ROCm: no ROCm-capable device is detected`
fn parse_init_error(body: &str) -> Option<InitError> {
    let at = body.find("failed to initialize ")?;
    if !(body[..at].contains("ggml_cuda_init") || body[..at].contains("ggml_init_cublas")) {
        return None;
    }
    let rest = &body[at + "failed to initialize ".len()..];
    let (backend, message) = rest.split_once(':')?;
    Some(InitError {
        backend: backend.trim().to_string(),
        message: message.trim().to_string(),
        line: body.trim().to_string(),
    })
}

/// `ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no` (printed until build 7601).
fn parse_init_flag(body: &str) -> Option<(&'static str, bool)> {
    if !(body.contains("ggml_cuda_init:") || body.contains("ggml_init_cublas:")) {
        return None;
    }
    for (needle, key) in [
        ("GGML_CUDA_FORCE_MMQ:", "FORCE_MMQ"),
        ("GGML_CUDA_FORCE_CUBLAS:", "FORCE_CUBLAS"),
    ] {
        if let Some((_, v)) = body.split_once(needle) {
            return match v.trim() {
                "yes" => Some((key, true)),
                "no" => Some((key, false)),
                _ => None,
            };
        }
    }
    None
}

/// `load_backend: loaded CUDA backend from /usr/lib/libggml-cuda.so`
fn parse_loaded_backend(body: &str) -> Option<String> {
    let (_, rest) = body.split_once("load_backend: loaded ")?;
    let name = rest.split_whitespace().next()?;
    rest.contains(" backend from ").then(|| name.to_string())
}

/// `  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes, VRAM: 143155 MiB` and its
/// relatives. The list of devices "without tensor cores" (`  Device 0: NVIDIA GeForce GTX 1660`)
/// has no fields and is not taken as a device line.
fn parse_device_line(body: &str, header_backend: Option<&str>) -> Option<DeviceLine> {
    let mut from = 0;
    let (index, rest) = loop {
        let rel = body[from..].find("Device ")?;
        let at = from + rel;
        from = at + "Device ".len();
        if at > 0 && !body[..at].ends_with([' ', '\t']) {
            continue;
        }
        let after = &body[from..];
        let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            continue;
        }
        let Some(rest) = after[digits.len()..].strip_prefix(": ") else {
            continue;
        };
        let Ok(index) = digits.parse::<u32>() else {
            continue;
        };
        break (index, rest);
    };
    let parts: Vec<&str> = rest.split(", ").collect();
    let mut d = DeviceLine {
        index,
        ..Default::default()
    };
    let mut i = parts.len();
    let mut known = 0;
    while i > 1 {
        let p = parts[i - 1].trim();
        if let Some(v) = p.strip_prefix("VMM: ") {
            d.vmm = match v.trim() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            };
        } else if let Some(v) = p.strip_prefix("Wave Size: ") {
            d.wave_size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("VRAM: ") {
            let mut w = v.split_whitespace();
            d.vram_mib = w.next().and_then(|n| n.parse().ok());
            if let Some((_, free)) = v.split_once('(') {
                d.vram_free_mib = free.split_whitespace().next().and_then(|n| n.parse().ok());
            }
        } else if let Some(v) = p.strip_prefix("compute capability ") {
            d.compute_capability = Some(v.trim().to_string());
        } else if let Some((arch, feats, id)) = gfx_field(p) {
            d.arch = Some(arch);
            d.arch_features = feats;
            d.arch_id = id;
        } else {
            break;
        }
        known += 1;
        i -= 1;
    }
    if known == 0 {
        return None;
    }
    d.name = parts[..i].join(", ").trim().to_string();
    if d.name.is_empty() {
        return None;
    }
    d.backend = match header_backend {
        Some(b) if CUDA_FAMILY.contains(&b) => b.to_string(),
        _ if d.arch.as_deref().is_some_and(|a| a.starts_with("gfx")) => "ROCm".into(),
        _ if d.name.starts_with("AMD ") || d.name.starts_with("Radeon") => "ROCm".into(),
        _ => "CUDA".into(),
    };
    if d.arch.is_none()
        && d.backend == "CUDA"
        && let Some(cc) = &d.compute_capability
        && let Some((maj, min)) = cc.split_once('.')
        && let (Ok(maj), Ok(min)) = (maj.parse::<u32>(), min.parse::<u32>())
    {
        d.arch = Some(format!("sm_{maj}{min}"));
    }
    Some(d)
}

/// `gfx1201 (0x1201)`, `gfx90a:sramecc+:xnack- (0x90a)`, or a bare `gfx1100`.
fn gfx_field(p: &str) -> Option<(String, Option<String>, Option<String>)> {
    if !p.starts_with("gfx") {
        return None;
    }
    let (name, id) = match p.split_once(" (") {
        Some((n, id)) => (n.trim(), Some(id.trim_end_matches(')').trim().to_string())),
        None => (p.trim(), None),
    };
    if name.contains(' ') {
        return None;
    }
    let (arch, feats) = match name.split_once(':') {
        Some((a, f)) => (a.to_string(), Some(f.to_string())),
        None => (name.to_string(), None),
    };
    if !arch[3..].chars().all(|c| c.is_ascii_alphanumeric()) || arch.len() < 5 {
        return None;
    }
    Some((arch, feats, id))
}

/// `ggml_vulkan: 0 = AMD Radeon Graphics (RADV GFX1151) (radv) | uma: 1 | ...` and the older
/// `Vulkan0: NVIDIA GeForce RTX 3060 Laptop GPU (NVIDIA) | uma: 0 | fp16: 1 | warp size: 32`.
fn parse_vulkan_device(body: &str) -> Option<DeviceLine> {
    if !body.contains("| uma: ") {
        return None;
    }
    let head = body.split(" | ").next()?;
    let (index, name) = if let Some((_, rest)) = head.split_once("ggml_vulkan: ") {
        let (n, name) = rest.split_once(" = ")?;
        (n.trim().parse().ok()?, name.trim())
    } else {
        let t = head.trim();
        let rest = t.strip_prefix("Vulkan")?;
        let (n, name) = rest.split_once(": ")?;
        (n.parse().ok()?, name.trim())
    };
    Some(DeviceLine {
        backend: "Vulkan".into(),
        index,
        name: name.to_string(),
        line: body.trim().to_string(),
        ..Default::default()
    })
}

/// `  CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)` (`--list-devices`) and
/// `  - CUDA0   : NVIDIA H200 (143155 MiB, 142629 MiB free)` (`device_info:` trace log).
fn parse_listed_device(body: &str) -> Option<ListedDevice> {
    let trimmed = body.trim_end();
    let (left, mem) = match trimmed.rsplit_once(" (") {
        Some((l, m)) if m.ends_with(" MiB free)") => (l, Some(m)),
        _ => (trimmed, None),
    };
    let mut from = 0;
    while let Some(rel) = left[from..].find(':') {
        let colon = from + rel;
        from = colon + 1;
        let before = left[..colon].trim_end();
        let token = before.rsplit([' ', '\t']).next().unwrap_or(before);
        let Some((backend, index)) = device_name(token) else {
            continue;
        };
        if !left[colon..].starts_with(": ") {
            continue;
        }
        // The token must start the line, or follow `- ` (device_info) or a log prefix.
        let lead = before[..before.len() - token.len()].trim_end();
        if !(lead.is_empty() || lead.ends_with('-') || lead.ends_with(':')) {
            continue;
        }
        let description = left[colon + 2..].trim().to_string();
        // Without a memory suffix only `--list-devices`-style lines count (GPU names).
        if mem.is_none()
            && (!is_gpu_backend(&backend) || description.contains(" | ") || index.is_none())
        {
            return None;
        }
        let (total_mib, free_mib) = match mem {
            Some(m) => {
                let m = m.trim_end_matches(')');
                let mut nums = m.split(',').map(|p| {
                    p.split_whitespace()
                        .next()
                        .and_then(|n| n.parse::<u64>().ok())
                });
                (nums.next().flatten(), nums.next().flatten())
            }
            None => (None, None),
        };
        let gpu = is_gpu_backend(&backend);
        let backend = if backend == "MTL" {
            "Metal".to_string()
        } else {
            backend
        };
        return Some(ListedDevice {
            name: token.to_string(),
            backend,
            index,
            description,
            total_mib,
            free_mib,
            gpu,
        });
    }
    None
}

/// `CUDA0` → (`CUDA`, Some(0)); `CPU` → (`CPU`, None).
fn device_name(token: &str) -> Option<(String, Option<u32>)> {
    let letters: String = token
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let digits = &token[letters.len()..];
    if !(digits.is_empty() || digits.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    if !(GPU_BACKENDS.contains(&letters.as_str()) || OTHER_BACKENDS.contains(&letters.as_str())) {
        return None;
    }
    Some((letters, digits.parse().ok()))
}

/// Backend feature strings, as `llama_print_system_info()` prints them: `<Reg> : K = V | K = V | `.
/// Also found without the `system_info:` prefix (bindings print the string alone).
fn parse_registries(body: &str) -> Vec<Registry> {
    let mut out: Vec<Registry> = Vec::new();
    let mut current: Option<Registry> = None;
    for piece in body.split('|') {
        let piece = piece.trim();
        if let Some((left, kv)) = piece.split_once(" : ") {
            let name = left.rsplit([' ', '\t']).next().unwrap_or(left).trim();
            if let Some((k, v)) = key_value(kv)
                && registry_name(name)
            {
                if let Some(r) = current.take() {
                    out.push(r);
                }
                current = Some(Registry {
                    name: name.to_string(),
                    features: vec![Feature { key: k, value: v }],
                    line: String::new(),
                });
                continue;
            }
        }
        if let (Some(r), Some((k, v))) = (current.as_mut(), key_value(piece)) {
            r.features.push(Feature { key: k, value: v });
        }
    }
    if let Some(r) = current {
        out.push(r);
    }
    out
}

fn registry_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && (is_gpu_backend(name)
            || OTHER_BACKENDS.contains(&name)
            || name.chars().any(|c| c.is_ascii_lowercase()))
}

/// `KEY = VALUE` with an upper-case key.
fn key_value(s: &str) -> Option<(String, String)> {
    let (k, v) = s.split_once(" = ")?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    Some((k.to_string(), v.trim().to_string()))
}

fn merge_registry(f: &mut BuildFacts, seen: &mut Seen, mut r: Registry, line: &str) {
    if let Some(existing) = seen
        .registries
        .get(&r.name)
        .and_then(|&i| f.registries.get_mut(i))
    {
        for feat in r.features {
            if seen.features.insert((r.name.clone(), feat.key.clone())) {
                existing.features.push(feat);
            }
        }
    } else {
        r.line = line.to_string();
        // The first line of a registry keeps its features as printed, repeats included.
        for feat in &r.features {
            seen.features.insert((r.name.clone(), feat.key.clone()));
        }
        seen.registries.insert(r.name.clone(), f.registries.len());
        f.registries.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_new_format_from_sdist() {
        let f = parse(
            "version: 0.6.0-dev (build 0, commit unknown)\nbuilt with GNU 13.3.0 for Linux x86_64\n",
        );
        assert_eq!(f.version.semver.as_deref(), Some("0.6.0-dev"));
        assert_eq!(f.version.reported_build, Some(0));
        assert_eq!(f.version.build, None);
        assert_eq!(f.version.commit, None);
        assert_eq!(f.version.compiler.as_deref(), Some("GNU 13.3.0"));
        assert_eq!(f.version.target.as_deref(), Some("Linux x86_64"));
    }

    #[test]
    fn version_new_format_with_build() {
        let f = parse("version: 0.3.0-dev (build 10788, commit e107984bc)");
        assert_eq!(f.version.build, Some(10788));
        assert_eq!(f.version.commit.as_deref(), Some("e107984bc"));
        assert_eq!(f.version.semver.as_deref(), Some("0.3.0-dev"));
    }

    #[test]
    fn version_old_format() {
        let f = parse("version: 8204 (7a99dc85e)\nbuilt with GNU 11.4.0 for Linux x86_64");
        assert_eq!(f.version.build, Some(8204));
        assert_eq!(f.version.commit.as_deref(), Some("7a99dc85e"));
        assert_eq!(f.version.semver, None);
        let f = parse("version: 6795 (unknown)");
        assert_eq!(f.version.build, Some(6795));
        assert_eq!(f.version.commit, None);
    }

    #[test]
    fn gguf_metadata_version_is_not_a_build() {
        let f = parse(
            "llama_model_loader: - kv   3:                            general.version str              = 2507\nRuntime Version:         1.1",
        );
        assert_eq!(f.version, VersionInfo::default());
    }

    #[test]
    fn build_lines_of_logs_and_bench() {
        let f = parse(
            "0.00.000.353 I build: 4526 (a94f3b272) with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu",
        );
        assert_eq!(f.version.build, Some(4526));
        assert_eq!(f.version.commit.as_deref(), Some("a94f3b272"));
        assert_eq!(
            f.version.compiler.as_deref(),
            Some("cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0")
        );
        assert_eq!(f.version.target.as_deref(), Some("x86_64-linux-gnu"));
        let f = parse("main: build = 968 (acfc547)");
        assert_eq!(f.version.build, Some(968));
        let f = parse("build: 4f63cd70 (6431)");
        assert_eq!(f.version.build, Some(6431));
        assert_eq!(f.version.commit.as_deref(), Some("4f63cd70"));
        assert_eq!(f.version.source.as_deref(), Some("bench"));
    }

    #[test]
    fn version_line_wins_over_log_line() {
        let f = parse("build: 4f63cd70 (6431)\nversion: 6432 (abcdef12)\nmain: build = 10 (abcd)");
        assert_eq!(f.version.build, Some(6432));
    }

    #[test]
    fn log_prefix_is_stripped() {
        assert_eq!(
            strip_log_prefix("0.00.187.745 I   Device 0: X"),
            "  Device 0: X"
        );
        assert_eq!(
            strip_log_prefix(
                "2026-07-07 06:42:38.509 [Info] (Process) 0.00.108.378 I system_info: n"
            ),
            "system_info: n"
        );
        assert_eq!(
            strip_log_prefix("  Device 0: NVIDIA H200, compute capability 9.0"),
            "  Device 0: NVIDIA H200, compute capability 9.0"
        );
        assert_eq!(strip_log_prefix("1.2.3"), "1.2.3");
    }

    #[test]
    fn cuda_device_line_current() {
        let f = parse(
            "0.00.228.599 I   Device 0: NVIDIA H200, compute capability 9.0, VMM: yes, VRAM: 143155 MiB",
        );
        let d = &f.devices[0];
        assert_eq!(d.backend, "CUDA");
        assert_eq!(d.name, "NVIDIA H200");
        assert_eq!(d.arch.as_deref(), Some("sm_90"));
        assert_eq!(d.compute_capability.as_deref(), Some("9.0"));
        assert_eq!(d.vmm, Some(true));
        assert_eq!(d.vram_mib, Some(143155));
    }

    #[test]
    fn hip_device_line_with_wave_size() {
        let f = parse(
            "ggml_cuda_init: found 1 ROCm devices (Total VRAM: 32624 MiB):\n  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: no, Wave Size: 32, VRAM: 32624 MiB",
        );
        let d = &f.devices[0];
        assert_eq!(d.backend, "ROCm");
        assert_eq!(d.arch.as_deref(), Some("gfx1201"));
        assert_eq!(d.arch_id.as_deref(), Some("0x1201"));
        assert_eq!(d.vmm, Some(false));
        assert_eq!(d.wave_size, Some(32));
        assert_eq!(d.vram_mib, Some(32624));
        assert_eq!(f.inits[0].total_vram_mib, Some(32624));
        assert_eq!(f.gpu_backend(), Some("ROCm"));
    }

    #[test]
    fn hip_arch_with_target_features() {
        let f = parse(
            "  Device 0: AMD Instinct MI210, gfx90a:sramecc+:xnack- (0x90a), VMM: no, Wave Size: 64",
        );
        assert_eq!(f.devices[0].arch.as_deref(), Some("gfx90a"));
        assert_eq!(
            f.devices[0].arch_features.as_deref(),
            Some("sramecc+:xnack-")
        );
        assert_eq!(f.devices[0].backend, "ROCm");
    }

    #[test]
    fn oldest_device_line_without_vmm() {
        let f = parse(
            "ggml_init_cublas: found 1 CUDA devices:\n  Device 0: Tesla V100-PCIE-16GB, compute capability 7.0",
        );
        assert_eq!(f.devices[0].arch.as_deref(), Some("sm_70"));
        assert_eq!(f.devices[0].vmm, None);
        assert_eq!(f.inits[0].count, 1);
        assert_eq!(f.inits[0].total_vram_mib, None);
    }

    #[test]
    fn tensor_core_notice_is_not_a_device() {
        let f = parse(
            "The following devices will have suboptimal performance due to a lack of tensor cores:\n  Device 0: NVIDIA GeForce GTX 1660",
        );
        assert!(f.devices.is_empty());
    }

    #[test]
    fn listed_devices_both_forms() {
        let f = parse(
            "Available devices:\n  CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)\n0.00.443.841 I cmn  common_param:   - CUDA1   : NVIDIA H200 (143155 MiB, 142629 MiB free)\n0.00.443.856 I cmn  common_param:   - CPU     : Intel(R) Xeon(R) Processor (257811 MiB, 257811 MiB free)",
        );
        assert_eq!(f.listed.len(), 3);
        assert_eq!(f.listed[0].name, "CUDA0");
        assert_eq!(f.listed[0].index, Some(0));
        assert_eq!(f.listed[0].total_mib, Some(143155));
        assert_eq!(f.listed[0].free_mib, Some(142629));
        assert_eq!(f.listed[1].name, "CUDA1");
        assert!(!f.listed[2].gpu);
        assert_eq!(f.backends, vec!["CUDA"]);
    }

    #[test]
    fn listed_device_name_with_parentheses() {
        let f =
            parse("  Vulkan0: Radeon 8060S Graphics (RADV GFX1151) (91136 MiB, 90974 MiB free)");
        assert_eq!(
            f.listed[0].description,
            "Radeon 8060S Graphics (RADV GFX1151)"
        );
        assert_eq!(f.listed[0].total_mib, Some(91136));
        assert_eq!(f.gpu_backend(), Some("Vulkan"));
    }

    #[test]
    fn cpu_only_list() {
        let f = parse("Available devices:\n  (none)\n");
        assert!(f.list_none);
        assert!(f.cpu_only());
        assert_eq!(f.gpu_backend(), None);
    }

    #[test]
    fn registries_with_archs_and_flags() {
        let f = parse(
            "system_info: n_threads = 6 (n_threads_batch = 6) / 6 | CUDA : ARCHS = 500,610,700,750,800 | FORCE_MMQ = 1 | NO_PEER_COPY = 1 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | AVX = 1 | ",
        );
        assert_eq!(f.registries.len(), 2);
        assert_eq!(f.cuda_archs(), Some(vec![500, 610, 700, 750, 800]));
        assert_eq!(f.feature_flag("FORCE_MMQ"), Some(true));
        assert_eq!(f.feature_flag("NO_PEER_COPY"), Some(true));
        assert_eq!(f.feature_flag("FORCE_CUBLAS"), Some(false));
        assert_eq!(f.vmm_compiled().0, Some(true));
        assert!(f.system_info_seen);
    }

    #[test]
    fn rocm_no_vmm_registry() {
        let f = parse("system_info: ... | ROCm : NO_VMM = 1 | PEER_MAX_BATCH_SIZE = 128 | ...");
        assert_eq!(f.vmm_compiled().0, Some(false));
        assert_eq!(f.gpu_backend(), Some("ROCm"));
        assert_eq!(f.cuda_archs(), None);
    }

    #[test]
    fn old_system_info_has_no_registries() {
        let f = parse(
            "system_info: n_threads = 3 / 6 | AVX = 1 | AVX2 = 1 | BLAS = 1 | SSE3 = 1 | VSX = 0 | ",
        );
        assert!(f.registries.is_empty());
        assert!(f.system_info_seen);
        assert_eq!(f.vmm_compiled().0, None);
    }

    #[test]
    fn vmm_yes_device_line_means_compiled_in() {
        let f = parse("  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes");
        assert_eq!(f.vmm_compiled().0, Some(true));
        let f = parse(
            "  Device 0: AMD Radeon RX 9070, gfx1201 (0x1201), VMM: no, Wave Size: 32, VRAM: 16304 MiB",
        );
        assert_eq!(f.vmm_compiled().0, None);
    }

    #[test]
    fn init_error_and_flags() {
        let f = parse(
            "ggml_cuda_init: failed to initialize ROCm: no ROCm-capable device is detected\nggml_cuda_init: GGML_CUDA_FORCE_MMQ:    yes\nggml_cuda_init: GGML_CUDA_FORCE_CUBLAS: no",
        );
        assert_eq!(f.init_errors[0].backend, "ROCm");
        assert_eq!(
            f.init_errors[0].message,
            "no ROCm-capable device is detected"
        );
        assert_eq!(f.init_force_mmq, Some(true));
        assert_eq!(f.init_force_cublas, Some(false));
        assert_eq!(f.gpu_backend(), Some("ROCm"));
    }

    #[test]
    fn vulkan_lines() {
        let f = parse(
            "ggml_vulkan: Found 1 Vulkan devices:\nggml_vulkan: 0 = NVIDIA GeForce RTX 2060 (NVIDIA) | uma: 0 | fp16: 1 | bf16: 1 | warp size: 32\nAvailable devices:\n  Vulkan0: NVIDIA GeForce RTX 2060 (6144 MiB, 5136 MiB free)",
        );
        assert_eq!(f.gpu_backend(), Some("Vulkan"));
        assert_eq!(f.devices[0].backend, "Vulkan");
        assert_eq!(f.devices[0].name, "NVIDIA GeForce RTX 2060 (NVIDIA)");
        assert_eq!(f.listed.len(), 1);
    }

    #[test]
    fn garbage_gives_nothing() {
        let f = parse("hello world\n\u{0}\u{1}binary junk: : | = |\nAVX = 1 | x : y\n");
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(f.gpu_backend(), None);
    }

    #[test]
    fn truncated_system_info_keeps_what_is_there() {
        let f = parse(
            "system_info: n_threads = 12 (n_threads_batch = 12) / 24 | ROCm : NO_VMM = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | LLAM",
        );
        let r = f.cuda_registry().unwrap();
        assert_eq!(r.get("NO_VMM"), Some("1"));
        assert_eq!(r.get("PEER_MAX_BATCH_SIZE"), Some("128"));
    }
}
