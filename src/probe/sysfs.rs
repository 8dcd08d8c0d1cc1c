//! Discovery without any GPU runtime: AMD from the kernel's KFD topology and DRM sysfs, NVIDIA
//! from `/proc/driver/nvidia/gpus`. The root is injectable (`GPUPROBE_SYSFS_ROOT`) for tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const ROOT_ENV: &str = "GPUPROBE_SYSFS_ROOT";

pub fn root() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// One AMD GPU node of the KFD topology, in HIP device order (CPU nodes skipped).
#[derive(Debug, Clone, PartialEq)]
pub struct KfdGpu {
    pub node: u32,
    pub arch: String,
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

/// `gfx_target_version` 120001 → `gfx1201`; 90010 → `gfx90a`; 0 → None (a CPU node).
pub fn gfx_name(v: u64) -> Option<String> {
    if v == 0 {
        return None;
    }
    let major = v / 10000;
    let minor = (v / 100) % 100;
    let step = v % 100;
    Some(format!("gfx{major}{minor:x}{step:x}"))
}

pub fn kfd_gpus(root: &Path) -> Vec<KfdGpu> {
    let nodes_dir = root.join("sys/class/kfd/kfd/topology/nodes");
    let Ok(entries) = std::fs::read_dir(&nodes_dir) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            Some((
                e.file_name().to_string_lossy().parse::<u32>().ok()?,
                e.path(),
            ))
        })
        .collect();
    nodes.sort();
    let mut out = Vec::new();
    for (node, dir) in nodes {
        let Ok(text) = std::fs::read_to_string(dir.join("properties")) else {
            continue;
        };
        let p = parse_properties(&text);
        let gtv = p.get("gfx_target_version").copied().unwrap_or(0);
        let simd = p.get("simd_count").copied().unwrap_or(0);
        // CPU nodes have no gfx target; ROCm and ollama skip them the same way.
        let Some(arch) = gfx_name(gtv).filter(|_| simd > 0) else {
            continue;
        };
        let pci = match (p.get("domain"), p.get("location_id")) {
            (Some(d), Some(l)) => Some(format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                d,
                l >> 8,
                (l >> 3) & 0x1f,
                l & 7
            )),
            (None, Some(l)) => Some(format!(
                "0000:{:02x}:{:02x}.{:x}",
                l >> 8,
                (l >> 3) & 0x1f,
                l & 7
            )),
            _ => None,
        };
        let mut gpu = KfdGpu {
            node,
            arch,
            gfx_target_version: gtv,
            simd_count: simd,
            wave_size: p.get("wave_front_size").map(|w| *w as u32),
            vram_total_bytes: None,
            vram_used_bytes: None,
            pci_bus_id: pci,
            device_id: p.get("device_id").copied(),
            cpu_cores: p.get("cpu_cores_count").copied().unwrap_or(0),
            product_name: None,
        };
        if let Some(minor) = p.get("drm_render_minor") {
            let dev = root.join(format!("sys/class/drm/renderD{minor}/device"));
            let read_u64 = |f: &str| {
                std::fs::read_to_string(dev.join(f))
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
            };
            gpu.vram_total_bytes = read_u64("mem_info_vram_total");
            gpu.vram_used_bytes = read_u64("mem_info_vram_used");
            gpu.product_name = std::fs::read_to_string(dev.join("product_name"))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
        }
        out.push(gpu);
    }
    out
}

/// One NVIDIA GPU from `/proc/driver/nvidia/gpus/<bus>/information` (present with the kernel module).
#[derive(Debug, Clone, PartialEq)]
pub struct NvidiaProcGpu {
    pub model: String,
    pub pci_bus_id: String,
}

pub fn nvidia_proc_gpus(root: &Path) -> Vec<NvidiaProcGpu> {
    let dir = root.join("proc/driver/nvidia/gpus");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<NvidiaProcGpu> = entries
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("information")).ok()?;
            let field = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .map(|v| v.trim_start_matches(':').trim().to_string())
            };
            Some(NvidiaProcGpu {
                model: field("Model").unwrap_or_else(|| "NVIDIA GPU".into()),
                pci_bus_id: field("Bus Location")
                    .unwrap_or_else(|| e.file_name().to_string_lossy().to_string())
                    .to_ascii_lowercase(),
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
        assert_eq!(gfx_name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_name(90006).as_deref(), Some("gfx906"));
        assert_eq!(gfx_name(110501).as_deref(), Some("gfx1151"));
        assert_eq!(gfx_name(100306).as_deref(), Some("gfx1036"));
        assert_eq!(gfx_name(0), None);
    }
}
