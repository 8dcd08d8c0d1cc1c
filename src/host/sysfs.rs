//! Discovery without any GPU runtime: AMD from the kernel's KFD topology and DRM sysfs, NVIDIA
//! from `/proc/driver/nvidia/gpus`. Everything is read through a [`HostView`], so a fake tree
//! (`GPUPROBE_SYSFS_ROOT`) or a dump (`GPUPROBE_REPLAY`) stands in for the machine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::host::HostView;
use crate::report::UNKNOWN_ARCH;

pub use crate::host::ROOT_ENV;

pub const KFD_NODES: &str = "/sys/class/kfd/kfd/topology/nodes";
const AMD_VENDOR: u64 = 0x1002;

/// The root from `GPUPROBE_SYSFS_ROOT`, or `/`.
pub fn root() -> PathBuf {
    crate::host::live_root()
}

/// Where a GPU's architecture name came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchSource {
    /// KFD's `gfx_target_version`: what ROCm itself uses.
    Kfd,
    /// DRM's IP-discovery table (GC version, `profiles/amd-gc-ip.toml`): a fallback.
    IpDiscovery { gc: String },
    /// Neither said.
    Unknown,
}

impl ArchSource {
    pub fn is_fallback(&self) -> bool {
        !matches!(self, ArchSource::Kfd)
    }
}

/// One AMD GPU node of the KFD topology, in HIP device order (CPU nodes skipped).
#[derive(Debug, Clone, PartialEq)]
pub struct KfdGpu {
    pub node: u32,
    pub arch: String,
    pub arch_source: ArchSource,
    pub gfx_target_version: u64,
    pub simd_count: u64,
    pub wave_size: Option<u32>,
    pub vram_total_bytes: Option<u64>,
    pub vram_used_bytes: Option<u64>,
    pub pci_bus_id: Option<String>,
    pub device_id: Option<u64>,
    /// The node also has CPU cores (an APU exposed as one node), or the DRM device says so.
    pub cpu_cores: u64,
    pub product_name: Option<String>,
    pub render_minor: Option<u32>,
    /// KFD's `unique_id`; ROCm's device UUID is `GPU-` and its 16 hex digits.
    pub unique_id: Option<u64>,
}

impl KfdGpu {
    /// The UUID ROCm shows for this GPU (`ROCR_VISIBLE_DEVICES=GPU-...`).
    pub fn uuid(&self) -> Option<String> {
        self.unique_id.map(|u| format!("GPU-{u:016x}"))
    }
}

/// The KFD topology: whether the kernel exposes it at all, and its GPU nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Kfd {
    pub present: bool,
    pub gpus: Vec<KfdGpu>,
}

/// `key value` lines of a KFD `properties` file.
pub fn parse_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

/// `gfx_target_version` 120001 → `gfx1201`; 90010 → `gfx90a`; 90402 → `gfx942`; 0 → None (a
/// CPU node). Major in decimal, minor and stepping one hex digit each, as LLVM names targets.
pub fn gfx_name(v: u64) -> Option<String> {
    if v == 0 {
        return None;
    }
    let major = v / 10000;
    let minor = (v / 100) % 100;
    let step = v % 100;
    if minor > 15 || step > 15 {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{step:x}"))
}

#[derive(Debug, Deserialize)]
struct GcTable {
    gc: Vec<GcEntry>,
}

#[derive(Debug, Deserialize)]
struct GcEntry {
    ip: String,
    gfx_target_version: u64,
}

const GC_TABLE: &str = include_str!("../../profiles/amd-gc-ip.toml");

fn gc_table() -> &'static BTreeMap<String, u64> {
    static TABLE: OnceLock<BTreeMap<String, u64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Compiled in and covered by a test; an unreadable table only loses the fallback.
        toml::from_str::<GcTable>(GC_TABLE)
            .map(|t| {
                t.gc.into_iter()
                    .map(|e| (e.ip, e.gfx_target_version))
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// The target of a GC IP version from DRM's IP discovery (`9.4.3` → `gfx942`), as the kernel
/// maps it; None for a version the table does not know.
pub fn arch_from_gc(ip: &str) -> Option<String> {
    gfx_name(*gc_table().get(ip)?)
}

/// `major.minor.revision` of the graphics core behind render node `minor`.
pub fn gc_ip(h: &HostView, minor: u32) -> Option<String> {
    let base = format!("/sys/class/drm/renderD{minor}/device/ip_discovery/die/0");
    // `GC` is a link the driver adds to the numbered hardware-id folder (GC_HWID = 11).
    for dir in ["GC", "11"] {
        let at = |f: &str| h.read_parsed::<u32>(&format!("{base}/{dir}/0/{f}"));
        if let (Some(a), Some(b), Some(c)) = (at("major"), at("minor"), at("revision")) {
            return Some(format!("{a}.{b}.{c}"));
        }
    }
    None
}

fn pci_from_location(domain: Option<u64>, location: u64) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        domain.unwrap_or(0),
        location >> 8,
        (location >> 3) & 0x1f,
        location & 7
    )
}

pub fn kfd(h: &HostView) -> Kfd {
    let Some(names) = h.list(KFD_NODES) else {
        return Kfd {
            present: false,
            gpus: Vec::new(),
        };
    };
    let mut nodes: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
    nodes.sort();
    let mut gpus = Vec::new();
    for node in nodes {
        let Some(text) = h.read(&format!("{KFD_NODES}/{node}/properties")) else {
            continue;
        };
        let p = parse_properties(&text);
        let gtv = p.get("gfx_target_version").copied().unwrap_or(0);
        let simd = p.get("simd_count").copied().unwrap_or(0);
        // CPU nodes have no SIMDs; ROCm and ollama skip them the same way.
        if simd == 0 {
            continue;
        }
        let render_minor = p.get("drm_render_minor").map(|m| *m as u32);
        let (arch, arch_source) = match gfx_name(gtv) {
            Some(a) => (a, ArchSource::Kfd),
            // A GPU node without gfx_target_version (older kernels): ask IP discovery.
            None => match render_minor.and_then(|m| gc_ip(h, m)) {
                Some(gc) => match arch_from_gc(&gc) {
                    Some(a) => (a, ArchSource::IpDiscovery { gc }),
                    None => (UNKNOWN_ARCH.into(), ArchSource::IpDiscovery { gc }),
                },
                None => (UNKNOWN_ARCH.into(), ArchSource::Unknown),
            },
        };
        let mut gpu = KfdGpu {
            node,
            arch,
            arch_source,
            gfx_target_version: gtv,
            simd_count: simd,
            wave_size: p.get("wave_front_size").map(|w| *w as u32),
            vram_total_bytes: None,
            vram_used_bytes: None,
            pci_bus_id: p
                .get("location_id")
                .map(|l| pci_from_location(p.get("domain").copied(), *l)),
            device_id: p.get("device_id").copied(),
            cpu_cores: p.get("cpu_cores_count").copied().unwrap_or(0),
            product_name: None,
            render_minor,
            unique_id: p.get("unique_id").copied().filter(|u| *u != 0),
        };
        if let Some(minor) = render_minor {
            let d = drm_device(h, minor);
            gpu.vram_total_bytes = d.vram_total_bytes;
            gpu.vram_used_bytes = d.vram_used_bytes;
            gpu.product_name = d.product_name;
        }
        gpus.push(gpu);
    }
    Kfd {
        present: true,
        gpus,
    }
}

pub fn kfd_gpus(h: &HostView) -> Vec<KfdGpu> {
    kfd(h).gpus
}

/// An AMD GPU as DRM shows it (one render node), whatever KFD says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DrmGpu {
    pub render_minor: u32,
    pub device_id: Option<u64>,
    pub pci_bus_id: Option<String>,
    pub vram_total_bytes: Option<u64>,
    pub vram_used_bytes: Option<u64>,
    pub product_name: Option<String>,
    /// The graphics core's IP version (`11.5.1`) and the target it maps to.
    pub gc_ip: Option<String>,
    pub arch: Option<String>,
}

fn hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn drm_device(h: &HostView, minor: u32) -> DrmGpu {
    let dev = format!("/sys/class/drm/renderD{minor}/device");
    let pci = h.read(&format!("{dev}/uevent")).and_then(|u| {
        u.lines()
            .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
            .map(|s| s.trim().to_ascii_lowercase())
    });
    DrmGpu {
        render_minor: minor,
        device_id: h.read(&format!("{dev}/device")).and_then(|t| hex(&t)),
        pci_bus_id: pci,
        vram_total_bytes: h.read_parsed(&format!("{dev}/mem_info_vram_total")),
        vram_used_bytes: h.read_parsed(&format!("{dev}/mem_info_vram_used")),
        product_name: h
            .read(&format!("{dev}/product_name"))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        gc_ip: None,
        arch: None,
    }
}

/// Render nodes (`renderD128`...) under `/sys/class/drm`, by minor.
pub fn render_minors(h: &HostView) -> Vec<u32> {
    let mut v: Vec<u32> = h
        .list("/sys/class/drm")
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("renderD")?.parse().ok())
        .collect();
    v.sort();
    v
}

/// Every AMD GPU DRM shows, with its architecture from IP discovery (a fallback for when KFD
/// does not list it).
pub fn drm_amd_gpus(h: &HostView) -> Vec<DrmGpu> {
    render_minors(h)
        .into_iter()
        .filter(|m| {
            h.read(&format!("/sys/class/drm/renderD{m}/device/vendor"))
                .and_then(|t| hex(&t))
                == Some(AMD_VENDOR)
        })
        .map(|m| {
            let mut d = drm_device(h, m);
            d.gc_ip = gc_ip(h, m);
            d.arch = d.gc_ip.as_deref().and_then(arch_from_gc);
            d
        })
        .collect()
}

/// One NVIDIA GPU from `/proc/driver/nvidia/gpus/<bus>/information` (present with the kernel module).
#[derive(Debug, Clone, PartialEq)]
pub struct NvidiaProcGpu {
    pub model: String,
    pub pci_bus_id: String,
    pub uuid: Option<String>,
}

pub fn nvidia_proc_gpus(h: &HostView) -> Vec<NvidiaProcGpu> {
    let dir = "/proc/driver/nvidia/gpus";
    let Some(entries) = h.list(dir) else {
        return Vec::new();
    };
    let mut out: Vec<NvidiaProcGpu> = entries
        .iter()
        .filter_map(|e| {
            let text = h.read(&format!("{dir}/{e}/information"))?;
            let field = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .map(|v| v.trim_start_matches(':').trim().to_string())
            };
            Some(NvidiaProcGpu {
                model: field("Model").unwrap_or_else(|| "NVIDIA GPU".into()),
                pci_bus_id: field("Bus Location")
                    .unwrap_or_else(|| e.clone())
                    .to_ascii_lowercase(),
                uuid: field("GPU UUID").filter(|u| u.starts_with("GPU-")),
            })
        })
        .collect();
    out.sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names_from_target_versions() {
        assert_eq!(gfx_name(120001).as_deref(), Some("gfx1201"));
        // Cases other tools got wrong: the stepping is one hex digit (never "gfx9010"), and
        // MI300X's 90402 is gfx942 (never "gfx943", its GC IP version).
        assert_eq!(gfx_name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_name(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_name(90008).as_deref(), Some("gfx908"));
        assert_eq!(gfx_name(90006).as_deref(), Some("gfx906"));
        assert_eq!(gfx_name(90012).as_deref(), Some("gfx90c"));
        assert_eq!(gfx_name(110501).as_deref(), Some("gfx1151"));
        assert_eq!(gfx_name(100306).as_deref(), Some("gfx1036"));
        assert_eq!(gfx_name(120500).as_deref(), Some("gfx1250"));
        assert_eq!(gfx_name(0), None);
        assert_eq!(gfx_name(91600), None, "a minor above 15 is not a target");
    }

    #[test]
    fn gc_ip_versions_map_as_the_kernel_maps_them() {
        let cases = [
            ("9.4.2", "gfx90a"),
            ("9.4.3", "gfx942"),
            ("9.4.4", "gfx942"),
            ("9.4.1", "gfx908"),
            ("9.4.0", "gfx906"),
            ("10.1.10", "gfx1010"),
            ("10.3.6", "gfx1036"),
            ("10.3.7", "gfx1036"),
            ("11.0.3", "gfx1101"),
            ("11.0.1", "gfx1103"),
            ("11.0.4", "gfx1103"),
            ("11.5.1", "gfx1151"),
            ("12.0.1", "gfx1201"),
            ("12.1.0", "gfx1250"),
        ];
        for (ip, want) in cases {
            assert_eq!(arch_from_gc(ip).as_deref(), Some(want), "GC {ip}");
        }
        assert_eq!(
            arch_from_gc("13.0.0"),
            None,
            "unknown versions are not guessed"
        );
        assert!(gc_table().len() >= 30, "the table parsed");
    }

    #[test]
    fn pci_ids_from_kfd_location() {
        assert_eq!(pci_from_location(None, 768), "0000:03:00.0");
        assert_eq!(
            pci_from_location(Some(1), (0xc5 << 8) | (2 << 3) | 1),
            "0001:c5:02.1"
        );
    }
}
