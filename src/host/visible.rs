//! Visible-device variables, applied the way the runtimes apply them, so that the device list a
//! plan uses is the one llama.cpp will see.
//!
//! * HIP (ROCm's ROCclr, `rocclr/device/rocm/rocdevice.cpp`, `Device::init`): the list is
//!   `HIP_VISIBLE_DEVICES` when non-empty, else `CUDA_VISIBLE_DEVICES`; an empty value counts as
//!   unset. Entries are decimal indices (exactly as `to_string` prints them) or `GPU-<uuid>`; the
//!   first invalid entry ends the list; a repeated entry is skipped; the listed order is the new
//!   numbering. `GPU_DEVICE_ORDINAL` is read for OpenCL only, not for HIP.
//! * `ROCR_VISIBLE_DEVICES` is applied first, by the ROCm runtime under HIP, to the KFD GPU order;
//!   gpuprobe parses it with the same rules (indices or UUIDs, in the listed order).
//! * CUDA (programming guide, "CUDA Environment Variables"): indices or UUIDs (`GPU-...`, prefixes
//!   allowed); only the entries before the first invalid one count, in the listed order; an empty
//!   value hides every device. Indices follow `CUDA_DEVICE_ORDER` (fastest first by default).
//!
//! What is computed here is a prediction from the variables. When a probe ran, the runtime's own
//! device list (matched by PCI bus id) is the measurement and wins.

use super::HostView;
use crate::report::Backend;

/// The variables that decide which devices a backend's programs see, in the order they apply.
pub const HIP_VARS: &[&str] = &[
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
];
pub const CUDA_VARS: &[&str] = &["CUDA_VISIBLE_DEVICES"];

/// Which physical devices (by their index in discovery order) a program sees, in its order.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Physical indices, in the order the runtime numbers them (position = new index).
    pub order: Vec<usize>,
    /// (name, value) of the variables that took effect.
    pub applied: Vec<(String, String)>,
    /// What else a person should know: ignored variables, invalid entries, assumptions.
    pub notes: Vec<String>,
}

impl Selection {
    fn all(n: usize) -> Self {
        Selection {
            order: (0..n).collect(),
            applied: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// True when a variable hid or reordered something.
    pub fn changes_anything(&self, n: usize) -> bool {
        self.order != (0..n).collect::<Vec<_>>()
    }

    /// The visible index of physical device `i`.
    pub fn visible_index(&self, i: usize) -> Option<u32> {
        self.order.iter().position(|p| *p == i).map(|p| p as u32)
    }
}

/// Applies one list to `candidates` (physical indices with their UUIDs), returning the kept ones
/// in order and notes about entries that were ignored.
fn apply_list(
    name: &str,
    value: &str,
    candidates: &[(usize, Option<String>)],
) -> (Vec<usize>, Vec<String>) {
    let mut kept: Vec<usize> = Vec::new();
    let mut notes = Vec::new();
    let entries: Vec<&str> = value.split(',').collect();
    for (pos, raw) in entries.iter().enumerate() {
        let pick = if raw.contains("GPU-") || raw.starts_with("MIG-") {
            let want = raw.to_ascii_lowercase();
            candidates.iter().position(|(_, u)| {
                u.as_deref()
                    .is_some_and(|u| u.to_ascii_lowercase().starts_with(&want))
            })
        } else {
            raw.parse::<usize>()
                .ok()
                .filter(|i| i.to_string() == *raw && *i < candidates.len())
        };
        let Some(p) = pick else {
            let rest = entries.len() - pos - 1;
            notes.push(format!(
                "{name}: entry `{raw}` names no device ({} to choose from){}: the runtime ignores it{}",
                candidates.len(),
                if raw.contains("GPU-") { " by UUID" } else { "" },
                if rest > 0 {
                    format!(" and the {rest} entr{} after it", if rest == 1 { "y" } else { "ies" })
                } else {
                    String::new()
                }
            ));
            break;
        };
        let physical = candidates[p].0;
        if kept.contains(&physical) {
            notes.push(format!(
                "{name}: `{raw}` repeats a device already listed; it is skipped"
            ));
            continue;
        }
        kept.push(physical);
    }
    (kept, notes)
}

/// What HIP programs (llama.cpp's HIP backend) see of `uuids.len()` KFD GPUs.
pub fn hip(h: &HostView, uuids: &[Option<String>]) -> Selection {
    let n = uuids.len();
    let mut sel = Selection::all(n);
    let mut candidates: Vec<(usize, Option<String>)> = uuids.iter().cloned().enumerate().collect();
    if let Some(v) = h.env("ROCR_VISIBLE_DEVICES") {
        let (kept, notes) = apply_list("ROCR_VISIBLE_DEVICES", &v, &candidates);
        candidates = kept.iter().map(|i| (*i, uuids[*i].clone())).collect();
        sel.applied.push(("ROCR_VISIBLE_DEVICES".into(), v));
        sel.notes.extend(notes);
    }
    let hip_var = h.env("HIP_VISIBLE_DEVICES").filter(|v| !v.is_empty());
    let cuda_var = h.env("CUDA_VISIBLE_DEVICES");
    let chosen = match (&hip_var, &cuda_var) {
        (Some(v), Some(c)) => {
            sel.notes.push(format!(
                "CUDA_VISIBLE_DEVICES={c} is ignored by HIP programs because HIP_VISIBLE_DEVICES is set"
            ));
            Some(("HIP_VISIBLE_DEVICES", v.clone()))
        }
        (Some(v), None) => Some(("HIP_VISIBLE_DEVICES", v.clone())),
        (None, Some(c)) if !c.is_empty() => Some(("CUDA_VISIBLE_DEVICES", c.clone())),
        (None, Some(_)) => {
            sel.notes.push(
                "CUDA_VISIBLE_DEVICES is set but empty: HIP treats that as unset (CUDA would hide every device)"
                    .into(),
            );
            None
        }
        (None, None) => None,
    };
    if let Some((name, v)) = chosen {
        let (kept, notes) = apply_list(name, &v, &candidates);
        candidates = kept.iter().map(|i| (*i, uuids[*i].clone())).collect();
        sel.applied.push((name.into(), v));
        sel.notes.extend(notes);
    }
    if let Some(v) = h.env("GPU_DEVICE_ORDINAL") {
        sel.notes.push(format!(
            "GPU_DEVICE_ORDINAL={v} does not change what HIP programs see (ROCm reads it for OpenCL only)"
        ));
    }
    sel.order = candidates.into_iter().map(|(i, _)| i).collect();
    sel
}

/// What CUDA programs see of the GPUs in `uuids` (PCI bus order, as `/proc/driver/nvidia` lists
/// them); `models` tells whether the order assumption matters.
pub fn cuda(h: &HostView, uuids: &[Option<String>], models: &[String]) -> Selection {
    let n = uuids.len();
    let mut sel = Selection::all(n);
    let Some(v) = h.env("CUDA_VISIBLE_DEVICES") else {
        return sel;
    };
    let candidates: Vec<(usize, Option<String>)> = uuids.iter().cloned().enumerate().collect();
    if v.is_empty() {
        sel.order.clear();
        sel.notes
            .push("CUDA_VISIBLE_DEVICES is set but empty: CUDA programs see no GPU".into());
    } else {
        let (kept, notes) = apply_list("CUDA_VISIBLE_DEVICES", &v, &candidates);
        sel.order = kept;
        sel.notes.extend(notes);
        let mixed = models.windows(2).any(|w| w[0] != w[1]);
        let pci_order = h.env("CUDA_DEVICE_ORDER").as_deref() == Some("PCI_BUS_ID");
        if mixed && !pci_order && v.split(',').any(|e| e.parse::<u32>().is_ok()) {
            sel.notes.push(
                "indices were read in PCI bus order; CUDA numbers the fastest GPU first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so with different GPUs the indices may mean others".into(),
            );
        }
    }
    sel.applied.push(("CUDA_VISIBLE_DEVICES".into(), v));
    sel
}

/// The visible index of each physical device: measured, by PCI bus id, when the runtime reported
/// a bus id for every device it saw; else predicted from the variables. Returns the basis too.
pub fn mapping(
    sel: &Selection,
    physical_pci: &[Option<String>],
    measured_pci: Option<&[Option<String>]>,
) -> (Vec<Option<u32>>, &'static str) {
    let norm = |p: &str| p.trim().to_ascii_lowercase();
    if let Some(m) = measured_pci
        && !m.is_empty()
        && m.iter().all(Option::is_some)
    {
        let map: Vec<Option<u32>> = physical_pci
            .iter()
            .map(|p| {
                let p = norm(p.as_deref()?);
                m.iter()
                    .position(|x| x.as_deref().map(norm).as_deref() == Some(p.as_str()))
                    .map(|i| i as u32)
            })
            .collect();
        // Every device the runtime saw must be one of ours, or the match says nothing.
        if map.iter().flatten().count() == m.len() {
            return (map, "measured");
        }
    }
    (
        (0..physical_pci.len())
            .map(|i| sel.visible_index(i))
            .collect(),
        "predicted",
    )
}

/// The variables that apply to `backend`, for messages.
pub fn vars_of(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Hip => HIP_VARS,
        Backend::Cuda => CUDA_VARS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Inputs;

    fn view(env: &[(&str, &str)]) -> HostView {
        let mut i = Inputs::default();
        for (k, v) in env {
            i.env.insert(k.to_string(), Some(v.to_string()));
        }
        HostView::replay(i, "test")
    }

    fn none(n: usize) -> Vec<Option<String>> {
        vec![None; n]
    }

    #[test]
    fn hip_visible_devices_selects_and_renumbers() {
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "1")]), &none(2));
        assert_eq!(s.order, vec![1]);
        assert_eq!(s.visible_index(1), Some(0));
        assert_eq!(s.visible_index(0), None);
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "2,0")]), &none(3));
        assert_eq!(s.order, vec![2, 0], "the listed order is the new numbering");
    }

    #[test]
    fn rocr_applies_first_and_hip_indexes_what_is_left() {
        let s = hip(
            &view(&[
                ("ROCR_VISIBLE_DEVICES", "1,2,3"),
                ("HIP_VISIBLE_DEVICES", "0"),
            ]),
            &none(4),
        );
        assert_eq!(s.order, vec![1], "HIP's 0 is ROCr's first visible GPU");
        assert_eq!(s.applied.len(), 2);
    }

    #[test]
    fn invalid_entries_end_the_list_and_are_explained() {
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "1,5,0")]), &none(2));
        assert_eq!(s.order, vec![1]);
        assert!(s.notes[0].contains("`5` names no device"), "{:?}", s.notes);
        assert!(
            s.notes[0].contains("and the 1 entry after it"),
            "{:?}",
            s.notes
        );
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "01")]), &none(2));
        assert!(s.order.is_empty(), "`01` is not how the runtime writes 1");
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "-1")]), &none(2));
        assert!(s.order.is_empty());
    }

    #[test]
    fn hip_prefers_its_own_variable_and_ignores_empty_and_gpu_device_ordinal() {
        let s = hip(
            &view(&[("HIP_VISIBLE_DEVICES", "0"), ("CUDA_VISIBLE_DEVICES", "1")]),
            &none(2),
        );
        assert_eq!(s.order, vec![0]);
        assert!(
            s.notes
                .iter()
                .any(|n| n.contains("CUDA_VISIBLE_DEVICES=1 is ignored"))
        );
        let s = hip(&view(&[("CUDA_VISIBLE_DEVICES", "1")]), &none(2));
        assert_eq!(s.order, vec![1], "HIP honours CUDA_VISIBLE_DEVICES");
        let s = hip(&view(&[("HIP_VISIBLE_DEVICES", "")]), &none(2));
        assert_eq!(s.order, vec![0, 1], "empty counts as unset in HIP");
        let s = hip(&view(&[("GPU_DEVICE_ORDINAL", "1")]), &none(2));
        assert_eq!(s.order, vec![0, 1]);
        assert!(s.notes[0].contains("OpenCL only"));
    }

    #[test]
    fn uuids_select_devices() {
        let uuids = vec![
            Some("GPU-a1b2c3d4e5f60718".to_string()),
            Some("GPU-0011223344556677".to_string()),
        ];
        let s = hip(
            &view(&[("ROCR_VISIBLE_DEVICES", "GPU-0011223344556677")]),
            &uuids,
        );
        assert_eq!(s.order, vec![1]);
        let s = cuda(&view(&[("CUDA_VISIBLE_DEVICES", "GPU-a1b2")]), &uuids, &[]);
        assert_eq!(s.order, vec![0], "CUDA takes UUID prefixes");
    }

    #[test]
    fn cuda_empty_hides_everything_and_repeats_are_skipped() {
        let s = cuda(&view(&[("CUDA_VISIBLE_DEVICES", "")]), &none(2), &[]);
        assert!(s.order.is_empty());
        let s = cuda(&view(&[("CUDA_VISIBLE_DEVICES", "1,1,0")]), &none(2), &[]);
        assert_eq!(s.order, vec![1, 0]);
        assert!(s.notes[0].contains("repeats"));
        let s = cuda(&view(&[]), &none(2), &[]);
        assert!(!s.changes_anything(2) && s.applied.is_empty());
    }

    #[test]
    fn cuda_index_order_caveat_only_for_mixed_gpus() {
        let models = vec!["NVIDIA H200".to_string(), "NVIDIA T4".to_string()];
        let s = cuda(&view(&[("CUDA_VISIBLE_DEVICES", "1")]), &none(2), &models);
        assert!(s.notes.iter().any(|n| n.contains("fastest GPU first")));
        let same = vec!["NVIDIA H200".to_string(); 2];
        let s = cuda(&view(&[("CUDA_VISIBLE_DEVICES", "1")]), &none(2), &same);
        assert!(s.notes.is_empty());
    }
}
