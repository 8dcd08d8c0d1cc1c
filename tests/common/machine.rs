//! A scratch machine for tests that drive `gpuprobe` on fake trees: a copy of a fixture tree
//! under `GPUPROBE_SYSFS_ROOT` and a sealed environment (no toolchain, no quirk files, no GPU
//! variables from the developer's shell), plus helpers to change the tree.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_gpuprobe");

pub fn fixture(machine: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(machine)
}

pub fn fake_probe(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-probes")
        .join(format!("{name}.sh"))
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &target).unwrap();
        } else if t.is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

pub fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn gid_of(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().gid()
}

/// A scratch machine: a copy of a fixture tree (or an empty one) and a clean environment with no
/// toolchain, no quirk files and no GPU variables from the developer's shell.
pub struct Machine {
    dir: TempDir,
    env: Vec<(String, String)>,
    unset: Vec<String>,
}

impl Machine {
    pub fn from(fixture_name: Option<&str>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuprobe-host")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        for d in ["home", "bin", "rocm", "cache"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        if let Some(f) = fixture_name {
            copy_tree(&fixture(f), &dir.path().join("root"));
        }
        Machine {
            dir,
            env: Vec::new(),
            unset: Vec::new(),
        }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The machine's `bin` (fake tools) first on PATH, then the system's.
    pub fn with_bin_on_path(self) -> Self {
        let p = format!("{}:/usr/bin:/bin", self.path("bin").display());
        self.env("PATH", &p)
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Plays user 1000 in group 44 (video) only; names the fake device nodes' group `render`.
    pub fn playing_a_user_without_render(self) -> Self {
        let root = self.root();
        write(
            &root.join("proc/self/status"),
            "Name:\tgpuprobe\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t44 \n",
        );
        let gid = gid_of(&root.join("dev/kfd"));
        write(
            &root.join("etc/group"),
            &format!("video:x:44:\nrender:x:{gid}:\nann:x:1000:\n"),
        );
        write(
            &root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/sh\n",
        );
        chmod(&root.join("dev/kfd"), 0o660);
        for e in std::fs::read_dir(root.join("dev/dri")).unwrap().flatten() {
            chmod(&e.path(), 0o660);
        }
        self
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("HOME", self.path("home"))
            .env("PATH", self.path("bin"))
            .env("ROCM_PATH", self.path("rocm"))
            .env("HIP_PATH", self.path("rocm"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("GPUPROBE_SYSFS_ROOT", self.root())
            .env("GPUPROBE_LIBCUDA", self.path("no-libcuda.so.1"))
            .env("NO_COLOR", "1")
            .timeout(Duration::from_secs(300));
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for k in &self.unset {
            c.env_remove(k);
        }
        c
    }

    pub fn unset(mut self, k: &str) -> Self {
        self.unset.push(k.into());
        self
    }

    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command().args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn detect(&self, extra: &[&str]) -> (Value, String) {
        let mut args = vec!["detect", "--json", "--cycles", "3", "--timeout", "30"];
        args.extend_from_slice(extra);
        let (code, out, err) = self.run(&args);
        assert_eq!(code, 0, "detect exited {code}\n{out}\n{err}");
        (
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}")),
            err,
        )
    }

    pub fn table(&self, extra: &[&str]) -> String {
        let mut args = vec!["detect", "--cycles", "3"];
        args.extend_from_slice(extra);
        let (code, out, err) = self.run(&args);
        assert_eq!(code, 0, "{out}\n{err}");
        out
    }

    /// A script in the machine's `bin` (on its PATH).
    pub fn tool(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path(&format!("bin/{name}"));
        write(&p, &format!("#!/bin/sh\n{body}\n"));
        chmod(&p, 0o755);
        p
    }
}

/// A fake hipcc: `--version` answers like ROCm 6.0's; it rejects gfx942 the way clang does and
/// otherwise "builds" the probe by writing a wrapper around a fake probe program rewritten to
/// gfx90a. (It compiles nothing: it exists to inject the one failure.)
pub fn fake_hipcc_rejecting_gfx942(m: &Machine) {
    let probe = m.path("bin/fake-probe-gfx90a");
    write(
        &probe,
        &format!(
            "#!/bin/sh\n\"{}\" \"$@\" | sed -e 's/gfx1201/gfx90a/g' -e 's/AMD Radeon AI PRO R9700/AMD Instinct MI210/g'\n",
            fake_probe("pass-gfx1201").display()
        ),
    );
    chmod(&probe, 0o755);
    m.tool(
        "hipcc",
        &format!(
            r#"case "$*" in
  *--version*) echo "HIP version: 6.0.32830-fake"; exit 0 ;;
  *gfx942*) echo "clang: error: invalid target ID 'gfx942'" >&2; exit 1 ;;
esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
cp "{}" "$out" && chmod +x "$out""#,
            probe.display()
        ),
    );
}
