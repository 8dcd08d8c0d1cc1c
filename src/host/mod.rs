//! Everything gpuprobe reads about the machine, through one door: kernel files (KFD topology, DRM,
//! `/proc/driver/nvidia`, `/dev` nodes, module state), the user's identity, the environment,
//! toolkit version outputs, HIP probe builds and the probe children's raw output.
//!
//! Live, files are read under an injectable root (`GPUPROBE_SYSFS_ROOT`, default `/`), so a fake
//! tree stands in for a machine. With `detect --dump FILE` every answer is also recorded, and
//! `GPUPROBE_REPLAY=FILE` answers from such a record instead of the machine: a user's dump becomes
//! a test fixture that reproduces their report without their hardware.
//!
//! [`sysfs`] lists the GPUs the kernel shows (KFD, DRM, `/proc/driver/nvidia`) without a GPU
//! runtime; [`toolchain`] finds nvcc and the ROCm tools and reads their versions; [`checks`] turns
//! what was read into host findings (device access, modules, containers, WSL, visible-device
//! variables); [`visible`] applies the visible-device variables; [`toolkit`] compares a toolkit
//! with the driver; [`dump`] writes and loads the record.

pub mod checks;
pub mod dump;
pub mod sysfs;
pub mod toolchain;
pub mod toolkit;
pub mod visible;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::children::orchestrator::{self, Exit, Outcome};

/// Replay a dump written by `gpuprobe detect --dump FILE` instead of reading this machine.
pub const REPLAY_ENV: &str = "GPUPROBE_REPLAY";
/// The root under which kernel files are read (tests point it at a fake tree).
pub const ROOT_ENV: &str = "GPUPROBE_SYSFS_ROOT";

/// Files read through the view are small kernel attributes; anything larger is not what we want.
const MAX_FILE: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    File,
    Dir,
    Char,
    Block,
    Other,
}

/// A filesystem node as this process sees it: what it is, who owns it, and whether this process
/// may open it for reading and writing (what ROCm and CUDA need of `/dev/kfd`, render nodes and
/// `/dev/nvidia*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub kind: NodeKind,
    /// Permission bits (`0o660`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// The owning group's name from the machine's group database.
    pub group: Option<String>,
    /// Read and write allowed for this process (the kernel's answer on a live machine, so ACLs
    /// such as logind's seat access count; the permission bits against the identity in a fake tree).
    pub access: bool,
}

/// Who gpuprobe runs as. Numbers only: names would identify the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups of this process.
    pub groups: Vec<u32>,
    /// Groups whose entry in the group database lists this user: after a new login the process
    /// would have them. One of these missing from `groups` means "log out and in again".
    #[serde(default)]
    pub listed_in: Vec<u32>,
}

impl Identity {
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// A toolkit program found on this machine and what `--version` printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub path: String,
    pub version_output: String,
}

/// One attempt to build the HIP probe program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub archs: Vec<String>,
    /// The exact command, shell-quoted.
    pub command: String,
    pub ok: bool,
    pub status: BuildStatus,
    /// The compiler's last lines (its error, when it failed).
    pub output: Vec<String>,
}

/// How a HIP probe build ended, written in a dump as the words shown to people (`cached`,
/// `built`, `exit 1`, `killed by SIGSEGV`, `no result within 300 s`, `not started: ...`, `not in
/// the dump`); words that are none of these (a dump from another gpuprobe) are kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum BuildStatus {
    /// The probe for these targets was already in the cache.
    Cached,
    Built,
    /// The compiler exited with this code (0 when the finished probe could not be moved into
    /// the cache).
    Exit(i32),
    /// Killed by this signal (its name).
    Killed(String),
    /// No result within this many seconds.
    TimedOut(u64),
    /// The compiler was not run, and why (when known).
    NotStarted(Option<String>),
    /// A replayed dump has no build for these targets.
    NotInDump,
    Other(String),
}

impl std::fmt::Display for BuildStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildStatus::Cached => f.write_str("cached"),
            BuildStatus::Built => f.write_str("built"),
            BuildStatus::Exit(c) => write!(f, "exit {c}"),
            BuildStatus::Killed(s) => write!(f, "killed by {s}"),
            BuildStatus::TimedOut(s) => write!(f, "no result within {s} s"),
            BuildStatus::NotStarted(None) => f.write_str("not started"),
            BuildStatus::NotStarted(Some(why)) => write!(f, "not started: {why}"),
            BuildStatus::NotInDump => f.write_str("not in the dump"),
            BuildStatus::Other(s) => f.write_str(s),
        }
    }
}

impl From<&str> for BuildStatus {
    fn from(s: &str) -> Self {
        let timed_out = || {
            s.strip_prefix("no result within ")?
                .strip_suffix(" s")?
                .parse()
                .ok()
        };
        match s {
            "cached" => BuildStatus::Cached,
            "built" => BuildStatus::Built,
            "not started" => BuildStatus::NotStarted(None),
            "not in the dump" => BuildStatus::NotInDump,
            _ => {
                if let Some(c) = s.strip_prefix("exit ").and_then(|c| c.parse().ok()) {
                    BuildStatus::Exit(c)
                } else if let Some(sig) = s.strip_prefix("killed by ") {
                    BuildStatus::Killed(sig.to_string())
                } else if let Some(secs) = timed_out() {
                    BuildStatus::TimedOut(secs)
                } else if let Some(why) = s.strip_prefix("not started: ") {
                    BuildStatus::NotStarted(Some(why.to_string()))
                } else {
                    BuildStatus::Other(s.to_string())
                }
            }
        }
    }
}

impl From<String> for BuildStatus {
    fn from(s: String) -> Self {
        BuildStatus::from(s.as_str())
    }
}

impl From<BuildStatus> for String {
    fn from(s: BuildStatus) -> String {
        s.to_string()
    }
}

/// How a probe child ended, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum ChildExit {
    Code {
        code: i32,
    },
    Signal {
        signal: i32,
    },
    TimedOut,
    SpawnFailed {
        why: String,
    },
    /// Left after its `done` line, its exit not awaited.
    AfterDone,
}

/// What one probe child printed and how it ended: its raw protocol lines, the lines that were not
/// protocol, its stderr tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Child {
    pub events: Vec<Value>,
    #[serde(default)]
    pub garbage: Vec<String>,
    #[serde(default)]
    pub stderr_tail: Vec<String>,
    pub exit: ChildExit,
    pub elapsed_ms: u64,
}

impl Child {
    fn from_outcome(o: &Outcome) -> Self {
        Child {
            events: o.events.iter().map(|e| e.raw.clone()).collect(),
            garbage: o.garbage.clone(),
            stderr_tail: o.stderr_tail.clone(),
            exit: match &o.exit {
                Exit::Code(c) => ChildExit::Code { code: *c },
                Exit::AfterDone => ChildExit::AfterDone,
                Exit::Signal(s) => ChildExit::Signal { signal: *s },
                Exit::TimedOut => ChildExit::TimedOut,
                Exit::SpawnFailed(w) => ChildExit::SpawnFailed { why: w.clone() },
            },
            elapsed_ms: o.elapsed.as_millis() as u64,
        }
    }

    fn to_outcome(&self) -> Outcome {
        Outcome {
            events: self
                .events
                .iter()
                .filter_map(|v| crate::children::protocol::Received::from_value(v.clone()))
                .collect(),
            garbage: self.garbage.clone(),
            stderr_tail: self.stderr_tail.clone(),
            exit: match &self.exit {
                ChildExit::Code { code } => Exit::Code(*code),
                ChildExit::Signal { signal } => Exit::Signal(*signal),
                ChildExit::TimedOut => Exit::TimedOut,
                ChildExit::SpawnFailed { why } => Exit::SpawnFailed(why.clone()),
                ChildExit::AfterDone => Exit::AfterDone,
            },
            elapsed: Duration::from_millis(self.elapsed_ms),
        }
    }
}

/// Every answer the view gave, keyed by what was asked. `None` records "absent or unreadable",
/// so a replay knows the difference between "not there" and "not asked".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    /// The root files were read under (`/`, or a fake tree), as messages show it.
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default)]
    pub files: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub dirs: BTreeMap<String, Option<Vec<String>>>,
    #[serde(default)]
    pub nodes: BTreeMap<String, Option<Node>>,
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub identity: Option<Identity>,
    #[serde(default)]
    pub tools: BTreeMap<String, Option<Tool>>,
    /// HIP probe builds, keyed by the targets joined with `,`.
    #[serde(default)]
    pub builds: BTreeMap<String, Build>,
    /// Probe children, keyed `cuda device 0`, `hip peer 0 1`...
    #[serde(default)]
    pub children: BTreeMap<String, Child>,
}

enum Source {
    Live { root: PathBuf },
    Replay { inputs: Box<Inputs>, origin: String },
}

/// The machine as gpuprobe sees it. See the module documentation.
pub struct HostView {
    source: Source,
    /// Every answer given so far. The first answer to a question is the answer for the whole
    /// run (a VRAM counter read twice reads the same), so that a replay gives what the run gave.
    memo: Mutex<Inputs>,
    /// Whether `take_inputs` hands the answers out (for `--dump`).
    recording: bool,
}

impl std::fmt::Debug for HostView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::Live { root } => write!(f, "HostView(live {})", root.display())?,
            Source::Replay { origin, .. } => write!(f, "HostView(replay {origin})")?,
        }
        if self.recording {
            f.write_str(" recording")?;
        }
        Ok(())
    }
}

/// The root from `GPUPROBE_SYSFS_ROOT`, or `/`.
pub fn live_root() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

impl HostView {
    /// This machine, under `GPUPROBE_SYSFS_ROOT` when set.
    pub fn live() -> Self {
        Self::at_root(live_root())
    }

    pub fn at_root(root: PathBuf) -> Self {
        HostView {
            source: Source::Live { root },
            memo: Mutex::new(Inputs::default()),
            recording: false,
        }
    }

    pub fn replay(inputs: Inputs, origin: impl Into<String>) -> Self {
        HostView {
            source: Source::Replay {
                inputs: Box::new(inputs),
                origin: origin.into(),
            },
            memo: Mutex::new(Inputs::default()),
            recording: false,
        }
    }

    /// Also record every answer, for `take_inputs`.
    pub fn recording(mut self) -> Self {
        self.recording = true;
        self
    }

    pub fn is_replay(&self) -> bool {
        matches!(self.source, Source::Replay { .. })
    }

    /// True when reading the real machine (root `/`), where the kernel decides access.
    pub fn is_real_root(&self) -> bool {
        matches!(&self.source, Source::Live { root } if root == Path::new("/"))
    }

    /// What was recorded so far.
    pub fn take_inputs(&self) -> Inputs {
        if !self.recording {
            return Inputs::default();
        }
        self.memo
            .lock()
            .map(|mut i| std::mem::take(&mut *i))
            .unwrap_or_default()
    }

    /// How to name a path in messages: under the fake root where there is one (a replay names it
    /// as the machine that was dumped did).
    pub fn shown(&self, path: &str) -> String {
        let root = match &self.source {
            Source::Live { root } => root.display().to_string(),
            Source::Replay { inputs, .. } => inputs.root.clone().unwrap_or_else(|| "/".into()),
        };
        self.record(|i| i.root = Some(root.clone()));
        if root == "/" {
            path.to_string()
        } else {
            Path::new(&root)
                .join(path.trim_start_matches('/'))
                .display()
                .to_string()
        }
    }

    fn record(&self, f: impl FnOnce(&mut Inputs)) {
        if let Ok(mut i) = self.memo.lock() {
            f(&mut i);
        }
    }

    /// The answer given before (`get` on the memo), else `compute`'s, remembered with `put`.
    /// The lock is not held while computing: computing may ask other questions.
    fn memo<T: Clone>(
        &self,
        get: impl Fn(&Inputs) -> Option<T>,
        compute: impl FnOnce() -> T,
        put: impl FnOnce(&mut Inputs, T),
    ) -> T {
        if let Some(v) = self.memo.lock().ok().and_then(|i| get(&i)) {
            return v;
        }
        let v = compute();
        self.record(|i| put(i, v.clone()));
        v
    }

    fn replayed(&self) -> Option<&Inputs> {
        match &self.source {
            Source::Replay { inputs, .. } => Some(inputs),
            Source::Live { .. } => None,
        }
    }

    fn real_path(&self, path: &str) -> Option<PathBuf> {
        match &self.source {
            Source::Live { root } => Some(root.join(path.trim_start_matches('/'))),
            Source::Replay { .. } => None,
        }
    }

    /// A small text file (a kernel attribute), or None when absent or unreadable.
    pub fn read(&self, path: &str) -> Option<String> {
        self.memo(
            |i| i.files.get(path).cloned(),
            || match self.replayed() {
                Some(i) => i.files.get(path).cloned().flatten(),
                None => self.real_path(path).and_then(|p| read_bounded(&p)),
            },
            |i, v| {
                i.files.insert(path.to_string(), v);
            },
        )
    }

    /// The trimmed content of `path`, parsed.
    pub fn read_parsed<T: std::str::FromStr>(&self, path: &str) -> Option<T> {
        self.read(path)?.trim().parse().ok()
    }

    /// The names in a directory, sorted; None when it cannot be listed.
    pub fn list(&self, dir: &str) -> Option<Vec<String>> {
        self.memo(
            |i| i.dirs.get(dir).cloned(),
            || match self.replayed() {
                Some(i) => i.dirs.get(dir).cloned().flatten(),
                None => self.real_path(dir).and_then(|p| {
                    let mut v: Vec<String> = std::fs::read_dir(p)
                        .ok()?
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    v.sort();
                    Some(v)
                }),
            },
            |i, v| {
                i.dirs.insert(dir.to_string(), v);
            },
        )
    }

    /// What `path` is and whether this process may read and write it.
    pub fn node(&self, path: &str) -> Option<Node> {
        self.memo(
            |i| i.nodes.get(path).cloned(),
            || match self.replayed() {
                Some(i) => i.nodes.get(path).cloned().flatten(),
                None => self.live_node(path),
            },
            |i, v| {
                i.nodes.insert(path.to_string(), v);
            },
        )
    }

    fn live_node(&self, path: &str) -> Option<Node> {
        let real = self.real_path(path)?;
        let meta = std::fs::metadata(&real).ok()?;
        let (mode, uid, gid, kind) = node_facts(&meta);
        let access = if self.is_real_root() {
            kernel_allows_rw(&real)
        } else {
            let id = self.identity();
            mode_allows_rw(mode, uid, gid, &id)
        };
        Some(Node {
            kind,
            mode,
            uid,
            gid,
            group: self.group_name(gid),
            access,
        })
    }

    /// A group's name from `<root>/etc/group`.
    fn group_name(&self, gid: u32) -> Option<String> {
        let text = read_bounded(&self.real_path("/etc/group")?)?;
        group_entries(&text)
            .find(|(_, g, _)| *g == gid)
            .map(|(n, _, _)| n.to_string())
    }

    /// Who this process runs as: `<root>/proc/self/status` (this process itself on a live
    /// machine; a fake tree may carry one to play another user), and `<root>/etc/group`.
    pub fn identity(&self) -> Identity {
        self.memo(
            |i| i.identity.clone(),
            || match self.replayed() {
                Some(i) => i.identity.clone().unwrap_or(Identity {
                    uid: 0,
                    gid: 0,
                    groups: Vec::new(),
                    listed_in: Vec::new(),
                }),
                None => self.live_identity(),
            },
            |i, v| i.identity = Some(v),
        )
    }

    fn live_identity(&self) -> Identity {
        let status = self
            .real_path("/proc/self/status")
            .and_then(|p| read_bounded(&p))
            .or_else(|| read_bounded(Path::new("/proc/self/status")))
            .unwrap_or_default();
        let mut id = parse_status(&status);
        if let Some(groups) = self.real_path("/etc/group").and_then(|p| read_bounded(&p))
            && let Some(name) = self.user_name(id.uid)
        {
            id.listed_in = group_entries(&groups)
                .filter(|(_, _, members)| members.iter().any(|m| *m == name))
                .map(|(_, g, _)| g)
                .collect();
        }
        id
    }

    fn user_name(&self, uid: u32) -> Option<String> {
        let passwd = read_bounded(&self.real_path("/etc/passwd")?)?;
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2].parse() == Ok(uid)).then(|| f[0].to_string())
        })
    }

    /// An environment variable (values that are not UTF-8 count as unset).
    pub fn env(&self, name: &str) -> Option<String> {
        self.memo(
            |i| i.env.get(name).cloned(),
            || match self.replayed() {
                Some(i) => i.env.get(name).cloned().flatten(),
                None => std::env::var(name).ok(),
            },
            |i, v| {
                i.env.insert(name.to_string(), v);
            },
        )
    }

    /// `hipcc`, `nvcc` or `hipconfig`: where it is and what `--version` says.
    pub fn tool(&self, name: &str) -> Option<Tool> {
        self.memo(
            |i| i.tools.get(name).cloned(),
            || match self.replayed() {
                Some(i) => i.tools.get(name).cloned().flatten(),
                None => find_tool(name).and_then(|p| {
                    let out = version_output(&p)?;
                    Some(Tool {
                        path: p.display().to_string(),
                        version_output: out,
                    })
                }),
            },
            |i, v| {
                i.tools.insert(name.to_string(), v);
            },
        )
    }

    /// A HIP probe build for `archs`: replayed, or done by `build` and recorded.
    pub fn build(&self, archs: &[String], build: impl FnOnce() -> Build) -> Build {
        let key = archs.join(",");
        if let Some(b) = self
            .memo
            .lock()
            .ok()
            .and_then(|i| i.builds.get(&key).cloned())
        {
            return b;
        }
        let b = match self.replayed() {
            Some(i) => i.builds.get(&key).cloned().unwrap_or_else(|| Build {
                archs: archs.to_vec(),
                command: String::new(),
                ok: false,
                status: BuildStatus::NotInDump,
                output: vec![format!(
                    "the dump has no probe build for {key}: it was taken by a gpuprobe that built differently"
                )],
            }),
            None => build(),
        };
        self.record(|i| {
            i.builds.insert(key, b.clone());
        });
        b
    }

    /// In a replay, the recorded outcome of the child `key` (a spawn failure when the dump has
    /// none); None when live, where the caller runs the child and hands it to `record_child`.
    pub fn replayed_child(&self, key: &str) -> Option<Outcome> {
        let i = self.replayed()?;
        let o = match i.children.get(key) {
            Some(c) => c.to_outcome(),
            None => Outcome::spawn_failed(format!("the dump has no output of `{key}`")),
        };
        self.record_child(key, &o);
        Some(o)
    }

    /// In a replay, whether the dump holds the child `key`; None when live.
    pub fn replay_has_child(&self, key: &str) -> Option<bool> {
        self.replayed().map(|i| i.children.contains_key(key))
    }

    pub fn record_child(&self, key: &str, o: &Outcome) {
        self.record(|i| {
            i.children.insert(key.to_string(), Child::from_outcome(o));
        });
    }
}

/// `s` made inert for a terminal, on one line (see [`crate::neutral::inline`]).
pub fn printable(s: &str) -> String {
    crate::neutral::inline(s).into_owned()
}

fn read_bounded(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    // Device nodes and FIFOs can block or have side effects on read.
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(p)
        .ok()?
        .take(MAX_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(unix)]
fn node_facts(meta: &std::fs::Metadata) -> (u32, u32, u32, NodeKind) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let t = meta.file_type();
    let kind = if t.is_file() {
        NodeKind::File
    } else if t.is_dir() {
        NodeKind::Dir
    } else if t.is_char_device() {
        NodeKind::Char
    } else if t.is_block_device() {
        NodeKind::Block
    } else {
        NodeKind::Other
    };
    (meta.mode() & 0o7777, meta.uid(), meta.gid(), kind)
}

#[cfg(not(unix))]
fn node_facts(meta: &std::fs::Metadata) -> (u32, u32, u32, NodeKind) {
    let kind = if meta.is_file() {
        NodeKind::File
    } else if meta.is_dir() {
        NodeKind::Dir
    } else {
        NodeKind::Other
    };
    (0o666, 0, 0, kind)
}

/// The kernel's answer for this process (effective ids, ACLs included).
#[cfg(unix)]
fn kernel_allows_rw(p: &Path) -> bool {
    crate::process::may_read_write(p)
}

#[cfg(not(unix))]
fn kernel_allows_rw(_p: &Path) -> bool {
    true
}

/// Read+write by the permission bits, as the kernel decides without ACLs: owner, then group,
/// then others; root may do anything.
pub fn mode_allows_rw(mode: u32, uid: u32, gid: u32, id: &Identity) -> bool {
    let rw = |bits: u32| bits & 0o6 == 0o6;
    if id.uid == 0 {
        return true;
    }
    if id.uid == uid {
        return rw(mode >> 6);
    }
    if id.in_group(gid) {
        return rw(mode >> 3);
    }
    rw(mode)
}

/// `Uid:`, `Gid:` (effective ids) and `Groups:` of a `/proc/<pid>/status`.
fn parse_status(text: &str) -> Identity {
    let field = |name: &str| -> Vec<u32> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let uid = field("Uid:");
    let gid = field("Gid:");
    Identity {
        uid: uid.get(1).or(uid.first()).copied().unwrap_or(0),
        gid: gid.get(1).or(gid.first()).copied().unwrap_or(0),
        groups: field("Groups:"),
        listed_in: Vec::new(),
    }
}

/// (name, gid, members) of each `name:x:gid:a,b` line.
fn group_entries(text: &str) -> impl Iterator<Item = (&str, u32, Vec<&str>)> {
    text.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 3 {
            return None;
        }
        let members = f
            .get(3)
            .map(|m| m.split(',').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default();
        Some((f[0], f[2].parse().ok()?, members))
    })
}

fn find_tool(name: &str) -> Option<PathBuf> {
    match name {
        "nvcc" => crate::host::toolchain::find_nvcc(),
        other => crate::host::toolchain::find_rocm_tool(other),
    }
}

/// `TOOL --version`, stdout and stderr, with a timeout (a broken wrapper must not hang detect).
fn version_output(tool: &Path) -> Option<String> {
    let mut cmd = std::process::Command::new(tool);
    cmd.arg("--version");
    // hipcc switches to the NVIDIA platform when it sees nvcc on PATH.
    cmd.env("HIP_PLATFORM", "amd");
    let out = orchestrator::run(cmd, Duration::from_secs(30));
    if !matches!(out.exit, Exit::Code(_)) {
        return None;
    }
    let mut lines: Vec<String> = out
        .events
        .iter()
        .map(|e| e.raw.to_string())
        .chain(out.garbage)
        .collect();
    lines.extend(out.stderr_tail);
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(uid: u32, gid: u32, groups: &[u32]) -> Identity {
        Identity {
            uid,
            gid,
            groups: groups.to_vec(),
            listed_in: Vec::new(),
        }
    }

    #[test]
    fn permission_bits_decide_like_the_kernel() {
        // /dev/kfd as shipped by udev: crw-rw---- root:render(109).
        assert!(!mode_allows_rw(0o660, 0, 109, &id(1000, 1000, &[44])));
        assert!(mode_allows_rw(0o660, 0, 109, &id(1000, 1000, &[44, 109])));
        assert!(mode_allows_rw(0o660, 0, 109, &id(0, 0, &[])));
        // Older distributions: crw-rw-rw-.
        assert!(mode_allows_rw(0o666, 0, 109, &id(1000, 1000, &[])));
        // The owner bits win for the owner even when the group would allow.
        assert!(!mode_allows_rw(0o460, 1000, 109, &id(1000, 1000, &[109])));
    }

    #[test]
    fn the_first_answer_stands_for_the_whole_run_and_is_what_a_dump_holds() {
        let dir = std::env::temp_dir().join(format!("gpuprobe-view-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sys")).unwrap();
        std::fs::write(dir.join("sys/vram_used"), "100\n").unwrap();
        let h = HostView::at_root(dir.clone()).recording();
        assert_eq!(h.read_parsed::<u64>("/sys/vram_used"), Some(100));
        // The counter moves (a probe child allocated VRAM); this run keeps its first answer.
        std::fs::write(dir.join("sys/vram_used"), "900\n").unwrap();
        assert_eq!(h.read_parsed::<u64>("/sys/vram_used"), Some(100));
        assert_eq!(h.read("/sys/absent"), None);
        let inputs = h.take_inputs();
        assert_eq!(inputs.files["/sys/vram_used"].as_deref(), Some("100\n"));
        assert_eq!(inputs.files["/sys/absent"], None, "absence is recorded too");
        let r = HostView::replay(inputs, "test");
        assert_eq!(r.read_parsed::<u64>("/sys/vram_used"), Some(100));
        assert_eq!(r.read("/sys/never-asked"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn printable_escapes_control_characters() {
        assert_eq!(printable("ok\x1b[31mred\r\tx"), "ok\\x1b[31mred\\r\\tx");
    }

    #[test]
    fn proc_status_gives_effective_ids_and_groups() {
        let s = "Name:\tgpuprobe\nUid:\t1000\t1001\t1000\t1000\nGid:\t100\t100\t100\t100\nGroups:\t27 44 109 \n";
        let i = parse_status(s);
        assert_eq!((i.uid, i.gid), (1001, 100));
        assert_eq!(i.groups, vec![27, 44, 109]);
    }

    #[test]
    fn build_statuses_keep_their_words() {
        for words in [
            "cached",
            "built",
            "exit 1",
            "killed by SIGSEGV",
            "no result within 300 s",
            "not started",
            "not started: No such file or directory (os error 2)",
            "not in the dump",
            "exit soon",
        ] {
            let status = BuildStatus::from(words);
            assert_eq!(status.to_string(), words);
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(serde_json::from_str::<BuildStatus>(&json).unwrap(), status);
        }
        assert_eq!(BuildStatus::from("exit 1"), BuildStatus::Exit(1));
        assert_eq!(
            BuildStatus::from("no result within 300 s"),
            BuildStatus::TimedOut(300)
        );
        assert_eq!(
            BuildStatus::from("exit soon"),
            BuildStatus::Other("exit soon".into())
        );
    }
}
