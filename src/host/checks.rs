//! Host checks: what stops a GPU from being usable on this host, each with its fix. Device nodes
//! and their permissions for this user (`/dev/kfd`, `/dev/dri/renderD*`, `/dev/nvidia*`), kernel
//! modules, KFD against DRM (an AMD GPU that KFD does not list), containers and WSL, the
//! visible-device variables, and the toolkit against the driver.
//!
//! Checks only read (through the [`HostView`]) and compare; they never open a device.

use super::{HostView, Node, NodeKind};
use crate::host::sysfs::{self, DrmGpu, Kfd};
use crate::report::{Backend, BackendState, CheckLevel, HostCheck, Report, Visibility};

const AMD: u64 = 0x1002;
const NVIDIA: u64 = 0x10de;

/// Where gpuprobe runs: a container (and which), WSL, or a plain host.
#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    pub container: Option<String>,
    pub wsl: bool,
}

pub fn environment(h: &HostView) -> Environment {
    let container = if h.node("/.dockerenv").is_some() {
        Some("docker".to_string())
    } else if h.node("/run/.containerenv").is_some() {
        Some("podman".to_string())
    } else if let Some(c) = h.env("container").filter(|c| !c.is_empty()) {
        Some(c)
    } else {
        h.read("/proc/1/cgroup").and_then(|t| {
            ["kubepods", "docker", "containerd", "lxc", "libpod"]
                .into_iter()
                .find(|k| t.contains(k))
                .map(str::to_string)
        })
    };
    let wsl = h.env("WSL_DISTRO_NAME").is_some()
        || h.read("/proc/version")
            .is_some_and(|v| v.to_ascii_lowercase().contains("microsoft"));
    Environment { container, wsl }
}

/// Display-class PCI devices (class 0x03xxxx) of `vendor`, by address.
fn pci_gpus(h: &HostView, vendor: u64) -> Vec<String> {
    let dir = "/sys/bus/pci/devices";
    h.list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| {
            let hex = |f: &str| {
                h.read(&format!("{dir}/{d}/{f}"))
                    .and_then(|t| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
            };
            hex("class").is_some_and(|c| c >> 16 == 0x03) && hex("vendor") == Some(vendor)
        })
        .collect()
}

fn module_loaded(h: &HostView, name: &str) -> bool {
    h.node(&format!("/sys/module/{name}")).is_some()
}

fn mode_text(n: &Node) -> String {
    let bit = |b: u32, c: char| if n.mode & b != 0 { c } else { '-' };
    let kind = match n.kind {
        NodeKind::Char => 'c',
        NodeKind::Block => 'b',
        NodeKind::Dir => 'd',
        _ => '-',
    };
    let perms: String = [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        bit(0o100, 'x'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        bit(0o010, 'x'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        bit(0o001, 'x'),
    ]
    .iter()
    .collect();
    format!(
        "{kind}{perms} uid {} group {}",
        n.uid,
        n.group.clone().unwrap_or_else(|| format!("gid {}", n.gid))
    )
}

/// The check for a device node this user must open read-write.
fn node_access(
    h: &HostView,
    env: &Environment,
    path: &str,
    what: &str,
    ids: (&str, &str),
    container_fix: &str,
) -> Option<HostCheck> {
    let (missing_id, no_access_id) = ids;
    let Some(node) = h.node(path) else {
        let (detail, fix) = match &env.container {
            Some(c) => (
                format!("{path} does not exist in this {c} container: {what} cannot be reached from it"),
                container_fix.to_string(),
            ),
            None => (
                format!("{path} does not exist although the kernel driver lists the GPU: {what} cannot be opened"),
                "check the kernel log (`sudo dmesg | grep -i -e amdgpu -e kfd -e nvidia`) and that udev created the device nodes (`ls -l /dev/kfd /dev/dri`)".to_string(),
            ),
        };
        return Some(
            HostCheck::new(
                missing_id,
                CheckLevel::Error,
                format!("{path} is missing"),
                detail,
            )
            .fix(fix),
        );
    };
    if node.access {
        return None;
    }
    let id = h.identity();
    let group = node.group.clone();
    let gname = group.clone().unwrap_or_else(|| format!("gid {}", node.gid));
    let fix = if id.listed_in.contains(&node.gid) && !id.in_group(node.gid) {
        format!(
            "you are listed in group {gname}, but this session started before that: log out and back in (or run `newgrp {gname}`)"
        )
    } else if let Some(c) = &env.container {
        // By number: Docker looks a group name up in the image, which may not define it (or
        // give the name another id); the node's gid is the host's.
        format!(
            "start the {c} container with the node's group id: `--group-add {}` (a group name is looked up in the image; this is the id the node has here), or run it as a user in that group",
            node.gid
        )
    } else if node.mode & 0o060 == 0o060 {
        format!(
            "add yourself to group {gname}: `sudo usermod -aG {gname} $USER`, then log out and back in"
        )
    } else {
        format!(
            "{path} is not group-writable ({}); restore the distribution's udev rules (ROCm expects group render, mode 0660) or ask the administrator",
            mode_text(&node)
        )
    };
    Some(
        HostCheck::new(
            no_access_id,
            CheckLevel::Error,
            format!("this user cannot open {path}"),
            format!(
                "{path} is {}; this process (uid {}, groups {}) may not read and write it, so {what} fails to initialise (ROCm reports it as \"Unable to open /dev/kfd read-write\" or a misleading out-of-resources error)",
                mode_text(&node),
                id.uid,
                if id.groups.is_empty() {
                    "none".to_string()
                } else {
                    id.groups
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                }
            ),
        )
        .fix(fix),
    )
}

// The groups go by number: `--group-add render` fails to start a container whose image does
// not define `render`, and the id that matters is the host's.
const AMD_CONTAINER_FIX: &str = "on the host, start the container with the AMD devices and the group id of /dev/kfd (render; a group name is looked up in the image, which often lacks it): `docker run --device=/dev/kfd --device=/dev/dri --group-add $(stat -c %g /dev/kfd) ...` (podman: the same --device options and `--group-add keep-groups`)";
const NVIDIA_CONTAINER_FIX: &str = "start the container with the NVIDIA devices: `docker run --gpus all ...` (NVIDIA Container Toolkit), or pass --device /dev/nvidiactl --device /dev/nvidia-uvm --device /dev/nvidia0";

fn amd_checks(h: &HostView, env: &Environment, out: &mut Vec<HostCheck>) {
    let kfd: Kfd = sysfs::kfd(h);
    let drm: Vec<DrmGpu> = sysfs::drm_amd_gpus(h);
    let pci = if env.wsl {
        Vec::new()
    } else {
        pci_gpus(h, AMD)
    };
    let amdgpu = module_loaded(h, "amdgpu");
    if !pci.is_empty() && !amdgpu && drm.is_empty() && !kfd.present {
        out.push(
            HostCheck::new(
                "amdgpu-not-loaded",
                CheckLevel::Error,
                "the amdgpu kernel driver is not loaded",
                format!(
                    "PCI shows {} AMD GPU(s) ({}) but no amdgpu module is loaded: neither ROCm nor any other GPU API can use them",
                    pci.len(),
                    pci.join(", ")
                ),
            )
            .fix("load it (`sudo modprobe amdgpu`) and read `sudo dmesg | grep amdgpu`; a `nomodeset` or `modprobe.blacklist=amdgpu` on the kernel command line, or a blacklist in /etc/modprobe.d, keeps it out"),
        );
    }
    if (amdgpu || !drm.is_empty()) && !kfd.present && !env.wsl {
        out.push(
            HostCheck::new(
                "kfd-missing",
                CheckLevel::Error,
                "the kernel has no KFD (the ROCm compute interface)",
                format!(
                    "amdgpu is loaded{} but {} does not exist: this kernel was built without KFD (CONFIG_HSA_AMD), so ROCm cannot use any AMD GPU",
                    if drm.is_empty() {
                        String::new()
                    } else {
                        format!(" and drives {} GPU(s)", drm.len())
                    },
                    h.shown("/sys/class/kfd")
                ),
            )
            .fix("use a kernel with CONFIG_HSA_AMD=y (distribution kernels have it) or AMD's amdgpu-dkms driver"),
        );
    }
    if kfd.present && kfd.gpus.is_empty() && !drm.is_empty() {
        out.push(kfd_no_gpu_node(&drm));
    }
    if !kfd.gpus.is_empty() {
        out.extend(amd_node_checks(h, env, &kfd));
    }
}

/// KFD lists only CPU nodes while DRM drives AMD GPUs: ROCm sees no GPU.
fn kfd_no_gpu_node(drm: &[DrmGpu]) -> HostCheck {
    let targets = crate::profiles::bundled_targets().ok();
    let list: Vec<String> = drm
        .iter()
        .map(|d| {
            format!(
                "renderD{} {}{}",
                d.render_minor,
                match (&d.arch, &d.gc_ip) {
                    (Some(a), Some(gc)) => format!(
                        "{a} (from DRM IP discovery, GC {gc}: a fallback, not KFD's answer)"
                    ),
                    (None, Some(gc)) => format!("GC {gc} (not in gpuprobe's table)"),
                    _ => "(architecture unknown: no IP discovery)".into(),
                },
                d.pci_bus_id
                    .as_deref()
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    let apu = drm.iter().any(|d| {
        d.arch
            .as_deref()
            .and_then(|a| targets.as_ref()?.get(a))
            .is_some_and(|t| t.apu)
    });
    HostCheck::new(
        "kfd-no-gpu-node",
        CheckLevel::Warning,
        "KFD lists no GPU, but DRM shows an AMD GPU",
        format!(
            "the KFD topology has only CPU nodes while DRM shows {}: ROCm, and llama.cpp's HIP backend, see no GPU{}",
            list.join("; "),
            if apu {
                " (an APU whose generation this kernel's KFD does not support yet)"
            } else {
                ""
            }
        ),
    )
    .fix("run a newer kernel or AMD's amdgpu-dkms driver that supports this GPU in KFD; `sudo dmesg | grep -i kfd` says \"not supported in kfd\" when that is the cause. Vulkan builds of llama.cpp can use the GPU meanwhile")
}

/// With KFD GPUs: access to /dev/kfd and their render nodes, and AMD's own kernel driver.
fn amd_node_checks(h: &HostView, env: &Environment, kfd: &Kfd) -> Vec<HostCheck> {
    let mut checks = Vec::new();
    if let Some(c) = node_access(
        h,
        env,
        "/dev/kfd",
        "ROCm",
        ("kfd-device-missing", "kfd-no-access"),
        AMD_CONTAINER_FIX,
    ) {
        checks.push(c);
    }
    let mut minors: Vec<u32> = kfd.gpus.iter().filter_map(|g| g.render_minor).collect();
    minors.dedup();
    for m in minors {
        let path = format!("/dev/dri/renderD{m}");
        if let Some(c) = node_access(
            h,
            env,
            &path,
            "the GPU's render node",
            ("render-node-missing", "render-node-no-access"),
            AMD_CONTAINER_FIX,
        ) {
            checks.push(c);
        }
    }
    if let Some(v) = h.read("/sys/module/amdgpu/version") {
        checks.push(HostCheck::new(
            "amdgpu-dkms",
            CheckLevel::Note,
            "AMD's amdgpu-dkms kernel driver is installed",
            format!(
                "amdgpu module version {}; its pairing with the installed ROCm user space is not checked by gpuprobe (AMD supports each kernel driver with ROCm releases around its own)",
                v.trim()
            ),
        ));
    }
    checks
}

fn nvidia_checks(h: &HostView, env: &Environment, report: &Report, out: &mut Vec<HostCheck>) {
    let proc_gpus = sysfs::nvidia_proc_gpus(h);
    let pci = if env.wsl {
        Vec::new()
    } else {
        pci_gpus(h, NVIDIA)
    };
    let nvidia = module_loaded(h, "nvidia") || !proc_gpus.is_empty();
    if !pci.is_empty() && !nvidia {
        let nouveau = module_loaded(h, "nouveau");
        out.push(
            HostCheck::new(
                "nvidia-not-loaded",
                CheckLevel::Error,
                "NVIDIA's kernel driver is not loaded",
                format!(
                    "PCI shows {} NVIDIA GPU(s) ({}) but the nvidia module is not loaded{}: CUDA cannot use them",
                    pci.len(),
                    pci.join(", "),
                    if nouveau { " (the open-source nouveau driver has them)" } else { "" }
                ),
            )
            .fix(if nouveau {
                "install NVIDIA's driver (its packages blacklist nouveau) and reboot"
            } else {
                "install NVIDIA's driver (e.g. `sudo ubuntu-drivers install`, or your distribution's nvidia-driver package) or load it: `sudo modprobe nvidia`"
            }),
        );
    }
    if proc_gpus.is_empty() {
        return;
    }
    let cuda = report.backends.iter().find(|b| b.backend == Backend::Cuda);
    let cuda_failed = cuda.is_some_and(|b| b.status == BackendState::Error);
    let module = h
        .read("/proc/driver/nvidia/version")
        .and_then(|t| t.lines().next().map(str::to_string));
    if cuda.is_some_and(|b| b.status == BackendState::NoDriver) && !env.wsl {
        out.push(
            HostCheck::new(
                "nvidia-userspace-missing",
                CheckLevel::Error,
                "NVIDIA's kernel module is loaded but its user-space driver is missing",
                format!(
                    "the kernel module is there ({}) but libcuda.so.1, the driver's user-space part that every CUDA program loads, was not found{}",
                    module.as_deref().unwrap_or("/proc/driver/nvidia exists"),
                    if env.container.is_some() {
                        " in this container"
                    } else {
                        ""
                    }
                ),
            )
            .fix(if env.container.is_some() {
                "start the container with the NVIDIA Container Toolkit (`docker run --gpus all ...`), which mounts the driver's libraries"
            } else {
                "install the user-space package of the same driver version as the kernel module (e.g. libnvidia-compute-<branch> on Debian/Ubuntu, the nvidia-driver package's libraries elsewhere)"
            }),
        );
    }
    // Outside a container the nodes appear on first use; check them where CUDA needs them now.
    if (env.container.is_some() || cuda_failed || h.node("/dev/nvidiactl").is_some())
        && let Some(c) = node_access(
            h,
            env,
            "/dev/nvidiactl",
            "CUDA",
            ("nvidia-device-missing", "nvidia-device-no-access"),
            NVIDIA_CONTAINER_FIX,
        )
    {
        out.push(c);
    }
    if cuda_failed && !module_loaded(h, "nvidia_uvm") {
        out.push(
            HostCheck::new(
                "nvidia-uvm-not-loaded",
                CheckLevel::Warning,
                "the nvidia-uvm module is not loaded",
                "CUDA initialisation failed and nvidia_uvm is not loaded; without it cuInit fails (often as CUDA_ERROR_UNKNOWN)",
            )
            .fix("`sudo modprobe nvidia-uvm` (nvidia-modprobe loads it on first use only when it may)"),
        );
    }
}

fn toolkit_checks(h: &HostView, report: &Report, out: &mut Vec<HostCheck>) {
    let Some(driver) = super::toolkit::driver_cuda(report) else {
        return;
    };
    let Some(nvcc) = h.tool("nvcc") else {
        return;
    };
    let Some(v) = crate::host::toolchain::parse_nvcc_version(&nvcc.version_output) else {
        return;
    };
    let module = super::toolkit::driver_module(report);
    if let Some(m) = super::toolkit::cuda_vs_driver(
        &format!("the nvcc found here ({}) builds with", nvcc.path),
        &v,
        &driver,
        module.as_deref(),
    ) {
        out.push(
            HostCheck::new(
                "cuda-toolkit-newer-than-driver",
                m.level,
                "the CUDA toolkit is newer than the driver",
                m.message,
            )
            .fix(m.fix),
        );
    }
}

fn visibility_checks(report: &Report, out: &mut Vec<HostCheck>) {
    for v in &report.visibility {
        let vars = v.variables.join(" ");
        let gpu_word = v.backend.vendor().gpu_word();
        let prefix = v.backend.llama_name();
        let visible = v.devices.iter().filter(|d| d.visible.is_some()).count();
        if visible == 0 && !v.devices.is_empty() {
            let names: Vec<&str> = v
                .variables
                .iter()
                .map(|s| s.split('=').next().unwrap_or(""))
                .collect();
            out.push(
                HostCheck::new(
                    "visible-devices-hide-all",
                    CheckLevel::Error,
                    format!("{} hides every {gpu_word}", names.join(" and ")),
                    format!(
                        "{vars}: none of the {} {gpu_word}(s) on this machine is visible, so llama.cpp's {} backend finds no device{}",
                        v.devices.len(),
                        v.backend.name(),
                        if v.notes.is_empty() { String::new() } else { format!(" ({})", v.notes.join("; ")) }
                    ),
                )
                .fix(format!(
                    "unset {} or list devices that exist (indices 0 to {})",
                    names.join(" and "),
                    v.devices.len() - 1
                )),
            );
            continue;
        }
        let mut lines: Vec<String> = v
            .devices
            .iter()
            .map(|d| {
                let what = format!(
                    "GPU {} ({}{}{})",
                    d.physical,
                    d.name,
                    if d.arch.is_empty() || !crate::report::arch_known(&d.arch) {
                        String::new()
                    } else {
                        format!(" {}", d.arch)
                    },
                    d.pci_bus_id
                        .as_deref()
                        .map(|p| format!(", {p}"))
                        .unwrap_or_default()
                );
                match d.visible {
                    Some(i) => format!("{prefix}{i} = {what}"),
                    None => format!("{what} is hidden"),
                }
            })
            .collect();
        lines.extend(v.notes.iter().cloned());
        let invalid = v.notes.iter().any(|n| n.contains("names no device"));
        let changed = v.devices.iter().any(|d| d.visible != Some(d.physical));
        out.push(
            HostCheck::new(
                "visible-devices",
                if invalid { CheckLevel::Warning } else { CheckLevel::Note },
                if changed {
                    format!("{vars} changes which {gpu_word}s programs see")
                } else if vars.is_empty() {
                    format!("visible-device variables leave every {gpu_word} visible")
                } else {
                    format!("{vars} leaves every {gpu_word} visible, in order")
                },
                format!(
                    "{visible} of {} {gpu_word}(s) visible, renumbered from 0 in the listed order ({}): {}",
                    v.devices.len(),
                    v.basis,
                    lines.join("; ")
                ),
            )
            .fix("plans cover only the visible GPUs; unset the variable to plan for all of them"),
        );
    }
}

/// The HIP version a `hip_version.h` states (`MAJOR.MINOR.PATCH`), if it states one.
fn hip_header_version(text: &str) -> Option<String> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some(name))
                .then(|| w.next()?.parse::<u64>().ok())
                .flatten()
        })
    };
    Some(format!(
        "{}.{}.{}",
        field("HIP_VERSION_MAJOR")?,
        field("HIP_VERSION_MINOR")?,
        field("HIP_VERSION_PATCH")?
    ))
}

/// A distribution's HIP headers in /usr/include next to a ROCm install elsewhere (/opt/rocm*,
/// ROCM_PATH). The compiler searches /usr/include too, so a HIP build of llama.cpp can take
/// headers from both HIP versions and fail to compile (llama.cpp#16320, #15196: Ubuntu's
/// libamdhip64-dev beside ROCm 6.4.3 in /opt; removing the distribution's packages fixed both).
/// A distribution ROCm that lives in /usr itself (ROCM_PATH=/usr) is no such pair.
fn hip_header_checks(h: &HostView, out: &mut Vec<HostCheck>) {
    const DIST: &str = "/usr/include/hip/hip_version.h";
    let Some(dist_text) = h.read(DIST) else {
        return;
    };
    let dist = hip_header_version(&dist_text);
    let mut roots: Vec<String> = h
        .env("ROCM_PATH")
        .into_iter()
        .map(|p| p.trim_end_matches('/').to_string())
        .filter(|p| p.starts_with('/') && p != "/usr" && !p.is_empty())
        .collect();
    for name in h.list("/opt").unwrap_or_default() {
        if name == "rocm" || name.starts_with("rocm-") {
            roots.push(format!("/opt/{name}"));
        }
    }
    roots.sort();
    roots.dedup();
    let installs: Vec<(String, Option<String>)> = roots
        .into_iter()
        .filter_map(|r| {
            let text = h.read(&format!("{r}/include/hip/hip_version.h"))?;
            Some((r, hip_header_version(&text)))
        })
        .collect();
    if installs.is_empty() {
        return;
    }
    let differs = installs
        .iter()
        .any(|(_, v)| dist.is_none() || v.is_none() || *v != dist);
    let word = |v: &Option<String>| v.clone().unwrap_or_else(|| "version unknown".into());
    let listed: Vec<String> = installs
        .iter()
        .map(|(r, v)| format!("{} (HIP {})", h.shown(r), word(v)))
        .collect();
    out.push(
        HostCheck::new(
            "hip-headers-shadowed",
            if differs { CheckLevel::Warning } else { CheckLevel::Note },
            "a distribution's HIP headers sit in /usr/include beside a ROCm install",
            format!(
                "{} (HIP {}) is not part of the ROCm install at {}: it comes from a distribution package (on Debian and Ubuntu libamdhip64-dev). The compiler searches /usr/include as well, so a HIP build of llama.cpp can mix headers of two HIP versions and fail to compile (llama.cpp#16320, #15196){}",
                h.shown(DIST),
                word(&dist),
                listed.join(", "),
                if differs { "" } else { "; the versions agree here, so this is only a risk for a later upgrade of either" }
            ),
        )
        .fix("remove the distribution's HIP development packages (Debian/Ubuntu: `sudo apt remove libamdhip64-dev libhipblas-dev librocblas-dev librocsolver-dev`, or whichever of them `dpkg -S /usr/include/hip` names), then configure llama.cpp again in an empty build directory"),
    );
}

/// Every host check for `report` (whose backends and visibility are already filled).
pub fn run(h: &HostView, report: &Report, amd: bool, nvidia: bool) -> Vec<HostCheck> {
    let env = environment(h);
    let mut out = Vec::new();
    if let Some(c) = &env.container {
        out.push(HostCheck::new(
            "container",
            CheckLevel::Note,
            format!("running in a container ({c})"),
            "GPUs are usable here only if the container was started with their device nodes and groups",
        ));
    }
    if env.wsl {
        let dxg = h.node("/dev/dxg").is_some();
        out.push(
            HostCheck::new(
                "wsl",
                if dxg { CheckLevel::Note } else { CheckLevel::Warning },
                "running under WSL 2",
                format!(
                    "GPUs reach WSL through /dev/dxg{}, not through /dev/kfd or /dev/nvidia*: NVIDIA's CUDA works with the Windows driver (libcuda.so from /usr/lib/wsl/lib); ROCm needs AMD's WSL runtime, and VMM reservations behave differently (quirk {})",
                    if dxg { "" } else { ", which is missing here" },
                    crate::quirks::ids::VMM_RESERVE_FAILS
                ),
            )
            .fix(if dxg {
                "nothing to fix; keep the Windows GPU driver current"
            } else {
                "update WSL (`wsl --update` in Windows) and the Windows GPU driver"
            }),
        );
    }
    if amd {
        amd_checks(h, &env, &mut out);
        hip_header_checks(h, &mut out);
    }
    if nvidia {
        nvidia_checks(h, &env, report, &mut out);
        toolkit_checks(h, report, &mut out);
    }
    visibility_checks(report, &mut out);
    out
}

/// Orders checks for people: errors first, then warnings, then information (stable otherwise).
pub fn sort(checks: &mut [HostCheck]) {
    checks.sort_by_key(|c| std::cmp::Reverse(c.level));
}

/// A visibility entry in the report's terms: one (name, arch, pci) per physical device and its
/// visible index.
pub fn visibility(
    backend: Backend,
    sel: &super::visible::Selection,
    devices: Vec<(String, String, Option<String>)>,
    map: &[Option<u32>],
    basis: &str,
) -> Visibility {
    Visibility {
        backend,
        variables: sel
            .applied
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        devices: devices
            .into_iter()
            .enumerate()
            .map(|(i, (name, arch, pci))| crate::report::VisibleDevice {
                physical: i as u32,
                visible: map.get(i).copied().flatten(),
                name,
                arch,
                pci_bus_id: pci,
            })
            .collect(),
        basis: basis.to_string(),
        notes: sel.notes.clone(),
    }
}
