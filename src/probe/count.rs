//! Counting GPUs without loading a driver, so every device child can start at once (issue #13).
//!
//! The count is a guess the children correct: each child's `hello` carries the driver's own
//! count, the parent drops children for devices the driver does not show, and starts the missing
//! ones late when the guess was short (only then is there a serial step).

use crate::host::HostView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `/proc/driver/nvidia/gpus` (the NVIDIA kernel module).
    Procfs,
    /// PCI display controllers of the vendor under `/sys/bus/pci/devices`.
    PciSysfs,
    /// The KFD topology (`/sys/class/kfd`).
    Kfd,
    /// Nothing on disk said: wait for the first child's `hello`.
    Hello,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Procfs => "procfs",
            Source::PciSysfs => "pci-sysfs",
            Source::Kfd => "kfd",
            Source::Hello => "hello",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub devices: u32,
    pub source: Source,
}

const NVIDIA_PCI_VENDOR: &str = "0x10de";

/// NVIDIA GPUs the CUDA driver will show: the kernel module's list (`procfs_visible` of its
/// `procfs_total` GPUs are visible, the visible-devices variables applied), else PCI display
/// devices limited by `CUDA_VISIBLE_DEVICES`, else nothing (wait for the first `hello`).
pub fn nvidia(
    h: &HostView,
    procfs_total: usize,
    procfs_visible: usize,
    cuda_visible_devices: Option<&str>,
) -> Count {
    if procfs_total > 0 {
        return Count {
            devices: procfs_visible as u32,
            source: Source::Procfs,
        };
    }
    match pci_display_devices(h, NVIDIA_PCI_VENDOR) {
        0 => Count {
            devices: 0,
            source: Source::Hello,
        },
        n => Count {
            devices: limit(n, cuda_visible_devices),
            source: Source::PciSysfs,
        },
    }
}

/// At most as many devices as a `*_VISIBLE_DEVICES` list names before the first entry the
/// runtime would stop at (empty, or a negative number).
fn limit(n: u32, visible: Option<&str>) -> u32 {
    let Some(v) = visible else { return n };
    let listed = v
        .split(',')
        .map(str::trim)
        .take_while(|e| !e.is_empty() && !e.starts_with('-'))
        .count() as u32;
    n.min(listed)
}

/// PCI functions of `vendor` whose class is a display controller (VGA 0x0300 or 3D 0x0302).
fn pci_display_devices(h: &HostView, vendor: &str) -> u32 {
    let dir = "/sys/bus/pci/devices";
    let Some(entries) = h.list(dir) else {
        return 0;
    };
    let read = |e: &str, f: &str| {
        h.read(&format!("{dir}/{e}/{f}"))
            .map(|s| s.trim().to_ascii_lowercase())
            .unwrap_or_default()
    };
    entries
        .iter()
        .filter(|e| {
            read(e, "vendor") == vendor
                && matches!(read(e, "class").get(..6), Some("0x0300") | Some("0x0302"))
        })
        .count() as u32
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn procfs_first_then_pci_then_hello() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let h = || HostView::at_root(r.to_path_buf());
        assert_eq!(nvidia(&h(), 0, 0, None).source, Source::Hello);
        // Two NVIDIA 3D controllers, one NVIDIA audio function, one other vendor's VGA.
        for (bdf, vendor, class) in [
            ("0000:19:00.0", "0x10de", "0x030200"),
            ("0000:1a:00.0", "0x10de", "0x030200"),
            ("0000:19:00.1", "0x10de", "0x040300"),
            ("0000:03:00.0", "0x1002", "0x030000"),
        ] {
            write(
                r,
                &format!("sys/bus/pci/devices/{bdf}/vendor"),
                &format!("{vendor}\n"),
            );
            write(
                r,
                &format!("sys/bus/pci/devices/{bdf}/class"),
                &format!("{class}\n"),
            );
        }
        assert_eq!(
            nvidia(&h(), 0, 0, None),
            Count {
                devices: 2,
                source: Source::PciSysfs
            }
        );
        assert_eq!(nvidia(&h(), 0, 0, Some("1")).devices, 1);
        // The kernel module's list wins, with the visible-devices selection already applied.
        assert_eq!(
            nvidia(&h(), 3, 2, None),
            Count {
                devices: 2,
                source: Source::Procfs
            }
        );
    }

    #[test]
    fn visible_devices_limit_the_count() {
        assert_eq!(limit(8, Some("0,1")), 2);
        assert_eq!(limit(8, Some("GPU-abc,GPU-def,GPU-123")), 3);
        assert_eq!(limit(2, Some("0,1,2,3")), 2);
        // The runtime stops at the first invalid entry.
        assert_eq!(limit(8, Some("1,-1,2")), 1);
        assert_eq!(limit(8, Some("")), 0);
        assert_eq!(limit(8, None), 8);
    }
}
