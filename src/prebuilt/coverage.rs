//! Does an asset's compiled code run on a GPU: machine code for it (native), PTX the driver
//! must JIT-compile (NVIDIA), or code for another target loaded through an override (AMD)?

use schemars::JsonSchema;
use serde::Serialize;

/// How one GPU is covered by an asset, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum How {
    /// Machine code built for this GPU (or, NVIDIA, for an older GPU of the same major version).
    Native,
    /// Only PTX: the driver JIT-compiles it at first use (minutes, then cached), and only a
    /// driver at least as new as the asset's CUDA can.
    PtxJit,
    /// Only through `HSA_OVERRIDE_GFX_VERSION` (Linux ROCm; not supported by AMD).
    Override,
    /// Through Vulkan: any GPU with a Vulkan driver.
    Vulkan,
}

/// One GPU's coverage: how, and by which compiled entry (`86-real`, `90-virtual`, `gfx1100`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    pub how: How,
    pub code: String,
}

/// One entry of a CMAKE_CUDA_ARCHITECTURES list.
struct CudaEntry {
    cc: u32,
    sass: bool,
    ptx: bool,
    /// `a`/`f` suffix: machine code for exactly this architecture.
    specific: bool,
}

fn parse_entry(e: &str) -> Option<CudaEntry> {
    let (num, kind) = match e.split_once('-') {
        Some((n, k)) => (n, Some(k)),
        None => (e, None),
    };
    let specific = num.ends_with(['a', 'f']);
    let cc: u32 = num.trim_end_matches(['a', 'f']).parse().ok()?;
    let (sass, ptx) = match kind {
        None => (true, true),
        Some("real") => (true, false),
        Some("virtual") => (false, true),
        Some(_) => return None,
    };
    Some(CudaEntry {
        cc,
        sass,
        ptx,
        specific,
    })
}

/// `sm_90` → 90, `sm_120` → 120.
pub fn cc_of(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")?.parse().ok()
}

/// The best coverage of NVIDIA GPU `arch` (`sm_90`) by the list `archs`, None when nothing runs.
/// Machine code runs on GPUs of the same major version and an equal or higher minor (exactly the
/// same one for an `a` build); PTX is JIT-compiled for any GPU at least as new.
pub fn cuda(arch: &str, archs: &[String]) -> Option<Cover> {
    let cc = cc_of(arch)?;
    let entries: Vec<(&String, CudaEntry)> = archs
        .iter()
        .filter_map(|a| parse_entry(a).map(|e| (a, e)))
        .collect();
    let native = entries
        .iter()
        .filter(|(_, e)| {
            e.sass
                && if e.specific {
                    e.cc == cc
                } else {
                    e.cc / 10 == cc / 10 && e.cc <= cc
                }
        })
        .max_by_key(|(_, e)| e.cc);
    if let Some((code, _)) = native {
        return Some(Cover {
            how: How::Native,
            code: (*code).clone(),
        });
    }
    entries
        .iter()
        .filter(|(_, e)| e.ptx && e.cc <= cc)
        .max_by_key(|(_, e)| e.cc)
        .map(|(code, _)| Cover {
            how: How::PtxJit,
            code: (*code).clone(),
        })
}

/// The coverage of AMD GPU `arch` by `targets`: native, or through the override `via` (the target
/// it would run as), None otherwise.
pub fn amd(arch: &str, targets: &[String], via: Option<&str>) -> Option<Cover> {
    if targets.iter().any(|t| t == arch) {
        return Some(Cover {
            how: How::Native,
            code: arch.to_string(),
        });
    }
    let v = via?;
    targets.iter().any(|t| t == v).then(|| Cover {
        how: How::Override,
        code: v.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Vec<String> {
        s.split(';').map(String::from).collect()
    }

    #[test]
    fn machine_code_within_a_major_version_and_ptx_upward() {
        let list = l(
            "50-virtual;61-virtual;70-virtual;75-virtual;80-virtual;86-real;89-real;90-virtual;120a-real",
        );
        assert_eq!(cuda("sm_86", &list).unwrap().how, How::Native);
        assert_eq!(cuda("sm_89", &list).unwrap().code, "89-real");
        assert_eq!(
            cuda("sm_90", &list).unwrap(),
            Cover {
                how: How::PtxJit,
                code: "90-virtual".into()
            }
        );
        assert_eq!(cuda("sm_120", &list).unwrap().how, How::Native);
        // 120a machine code is for sm_120 only; sm_121 falls back to PTX.
        assert_eq!(cuda("sm_121", &list).unwrap().code, "90-virtual");
        assert_eq!(cuda("sm_61", &list).unwrap().code, "61-virtual");
        let cu13 = l("75-virtual;80-virtual;86-real;89-real;90-virtual;120a-real");
        assert_eq!(cuda("sm_61", &cu13), None);
        assert_eq!(cuda("sm_75", &l("52;61;70;75")).unwrap().how, How::Native);
    }

    #[test]
    fn amd_targets_are_exact_unless_overridden() {
        let t = l("gfx1100;gfx1030");
        assert_eq!(amd("gfx1100", &t, None).unwrap().how, How::Native);
        assert_eq!(amd("gfx1103", &t, None), None);
        assert_eq!(
            amd("gfx1103", &t, Some("gfx1100")).unwrap().how,
            How::Override
        );
    }
}
