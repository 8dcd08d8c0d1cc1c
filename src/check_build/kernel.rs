//! Kernel log blocks: amdgpu's GPU page-fault reports, decoded.
//!
//! amdgpu prints a fault as a `[gfxhub] page fault` line followed by the faulting process, the
//! page address, the `(GC)VM_L2_PROTECTION_FAULT_STATUS` word and (on most kernels) its fields.
//! The status word's layout is the same from GFX9 to GFX12: MORE_FAULTS bit 0, WALKER_ERROR bits
//! 1-3, PERMISSION_FAULTS bits 4-7, MAPPING_ERROR bit 8, the UTCL2 client id bits 9-16, RW bit 18
//! (1 = write), VMID bits 20-23 (it agrees with the printed fields in every public capture the
//! tests use). A follow-on fault prints the word as 0 (already cleared); such blocks are counted
//! but not decoded.

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// PERMISSION_FAULTS set, no MAPPING_ERROR. On gfx10 and later an access to an unmapped
    /// address (even 0x0) reports this too, so it says nothing about whether the page was mapped.
    Permission,
    /// The address could not be translated (MAPPING_ERROR set): not mapped, or freed.
    Mapping,
}

/// One decoded fault report.
#[derive(Debug, Clone, Default, Serialize, PartialEq, JsonSchema)]
pub struct AmdFault {
    /// `gfxhub` or `mmhub`.
    pub hub: String,
    /// PCI address of the GPU (`0000:03:00.0`).
    pub pci: Option<String>,
    pub process: Option<String>,
    pub address: Option<u64>,
    /// The status word as printed.
    pub status: Option<u32>,
    pub kind: Option<FaultKind>,
    pub permission_faults: Option<u32>,
    pub mapping_error: Option<bool>,
    pub walker_error: Option<u32>,
    /// A write (RW = 1) or a read.
    pub write: Option<bool>,
    /// `TCP (0x8)` as printed, or the id from the status word.
    pub client: Option<String>,
    /// 0-based line indices of the block within its input.
    #[serde(skip)]
    pub lines: Vec<usize>,
}

const MAX_BLOCK: usize = 12;

fn re(p: &str) -> Regex {
    // The patterns are literals of this module; a typo fails every test that decodes a fault.
    Regex::new(p).unwrap_or_else(|e| panic!("kernel.rs regex {p}: {e}"))
}

/// Decodes the block of the fault whose first line is `lines[at]`. `anchors` recognise the first
/// line of a fault (to know where the next one starts).
pub fn decode_block(lines: &[String], at: usize, anchors: &[Regex]) -> AmdFault {
    let hub_re = re(r"\[(gfxhub|mmhub)[0-9]*\]");
    let pci_re = re(r"amdgpu ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9])");
    let mut f = AmdFault {
        hub: hub_re
            .captures(&lines[at])
            .map(|c| c[1].to_string())
            .unwrap_or_else(|| "gfxhub".into()),
        pci: pci_re.captures(&lines[at]).map(|c| c[1].to_string()),
        ..AmdFault::default()
    };
    let is_anchor = |l: &str| anchors.iter().any(|a| a.is_match(l));
    // Lines of the same GPU's report; other programs' lines (journalctl interleaves them) and
    // other GPUs' faults are not part of the block.
    let same_gpu = |l: &str| {
        l.contains("amdgpu")
            && match (&f.pci, pci_re.captures(l)) {
                (Some(p), Some(c)) => c[1].eq_ignore_ascii_case(p),
                _ => true,
            }
    };
    // Forward: up to the next fault line. Reverse (journalctl -r): back to the previous one.
    let forward: Vec<usize> = (at + 1..lines.len().min(at + 1 + MAX_BLOCK))
        .take_while(|n| !is_anchor(&lines[*n]))
        .filter(|n| same_gpu(&lines[*n]))
        .collect();
    let status_re = re(r"VM_L2_PROTECTION_FAULT_STATUS:\s*0x([0-9a-fA-F]+)");
    let has_status = |idx: &[usize]| idx.iter().any(|n| status_re.is_match(&lines[*n]));
    let block: Vec<usize> = if has_status(&forward) {
        forward
    } else {
        let back: Vec<usize> = (at.saturating_sub(MAX_BLOCK)..at)
            .rev()
            .take_while(|n| !is_anchor(&lines[*n]))
            .filter(|n| same_gpu(&lines[*n]))
            .collect();
        if has_status(&back) { back } else { forward }
    };
    let field_re =
        re(r"\b(MORE_FAULTS|WALKER_ERROR|PERMISSION_FAULTS|MAPPING_ERROR|RW):\s*0x([0-9a-fA-F]+)");
    let client_re = re(r"Faulty UTCL2 client ID:\s*(.+?)\s*$");
    let addr_re = re(r"page starting at address 0x([0-9a-fA-F]+)");
    let proc_re = re(r"(?:for process|[Pp]rocess) (\S+) pid [0-9]+");
    let mut printed = Printed::default();
    for n in std::iter::once(at).chain(block.iter().copied()) {
        let l = &lines[n];
        f.lines.push(n);
        if let Some(c) = status_re.captures(l) {
            f.status = u32::from_str_radix(&c[1], 16).ok();
        }
        if let Some(c) = client_re.captures(l) {
            f.client = Some(c[1].to_string());
        }
        if let Some(c) = addr_re.captures(l) {
            f.address = u64::from_str_radix(&c[1], 16).ok();
        }
        if f.process.is_none()
            && let Some(c) = proc_re.captures(l)
        {
            f.process = Some(c[1].to_string());
        }
        for c in field_re.captures_iter(l) {
            let v = u32::from_str_radix(&c[2], 16).ok();
            match &c[1] {
                "PERMISSION_FAULTS" => printed.permission = v,
                "MAPPING_ERROR" => printed.mapping = v,
                "WALKER_ERROR" => printed.walker = v,
                "RW" => printed.rw = v,
                _ => {}
            }
        }
    }
    f.lines.sort_unstable();
    f.classify(printed);
    f
}

/// The fields a fault block prints one by one (older kernels, or beside the status word).
#[derive(Default)]
struct Printed {
    permission: Option<u32>,
    mapping: Option<u32>,
    walker: Option<u32>,
    rw: Option<u32>,
}

impl AmdFault {
    /// The fault's kind, from the status word when it is printed and not zero, else from the
    /// fields printed one by one.
    fn classify(&mut self, printed: Printed) {
        match self.status.filter(|s| *s != 0) {
            Some(s) => {
                self.permission_faults = Some((s >> 4) & 0xf);
                self.mapping_error = Some((s >> 8) & 1 == 1);
                self.walker_error = Some((s >> 1) & 0x7);
                self.write = Some((s >> 18) & 1 == 1);
                if self.client.is_none() {
                    self.client = Some(format!("0x{:x}", (s >> 9) & 0xff));
                }
            }
            None if printed.permission.unwrap_or(0) != 0 || printed.mapping.unwrap_or(0) != 0 => {
                self.permission_faults = printed.permission;
                self.mapping_error = printed.mapping.map(|m| m != 0);
                self.walker_error = printed.walker;
                self.write = printed.rw.map(|r| r != 0);
            }
            None => {}
        }
        self.kind = match (self.mapping_error, self.permission_faults) {
            (Some(true), _) => Some(FaultKind::Mapping),
            (_, Some(p)) if p != 0 => Some(FaultKind::Permission),
            _ => None,
        };
    }

    /// One sentence: what kind of fault, which access, which client.
    pub fn describe(&self) -> String {
        let access = match self.write {
            Some(true) => "a write",
            Some(false) => "a read",
            None => "an access",
        };
        let client = self
            .client
            .as_deref()
            .map(|c| {
                let shader = if c.starts_with("TCP") {
                    ", a shader's memory access"
                } else {
                    ""
                };
                format!(" by client {}{shader}", super::text::neutralise(c))
            })
            .unwrap_or_default();
        let status = self
            .status
            .map(|s| format!("status 0x{s:08x}: "))
            .unwrap_or_default();
        match self.kind {
            Some(FaultKind::Permission) => format!(
                "{status}permission fault (PERMISSION_FAULTS 0x{:x}, no MAPPING_ERROR) on {access}{client}; on gfx10 and later an access to an unmapped address (even 0x0) reads this way too, so it does not tell a mapped page from an unmapped one",
                self.permission_faults.unwrap_or(0)
            ),
            Some(FaultKind::Mapping) => format!(
                "{status}mapping error (MAPPING_ERROR 1): the address could not be translated to a page, so {access}{client} hit memory that is not mapped (never mapped, or freed)"
            ),
            None => "the fault status was not printed or not latched (0x0), so its kind is unknown"
                .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn status_word_agrees_with_the_printed_fields() {
        // Status words and fields as printed in ROCm/amdgpu#150, #168 and getsolus/packages#7986.
        for (word, perm, map, walker, rw, cid) in [
            (0x0030_1031u32, 3, 0, 0, 0, 0x8),
            (0x0080_1030, 3, 0, 0, 0, 0x8),
            (0x0084_1B5B, 5, 1, 5, 1, 0xd),
            (0x0084_1051, 5, 0, 0, 1, 0x8),
        ] {
            let text = format!(
                "[1.0] amdgpu 0000:0e:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770)\n[1.0] amdgpu 0000:0e:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x{word:08X}\n"
            );
            let anchors = [re(r"\[gfxhub[0-9]*\] page fault")];
            let f = decode_block(&lines(&text), 0, &anchors);
            assert_eq!(f.permission_faults, Some(perm), "{word:x}");
            assert_eq!(f.mapping_error, Some(map == 1), "{word:x}");
            assert_eq!(f.walker_error, Some(walker), "{word:x}");
            assert_eq!(f.write, Some(rw == 1), "{word:x}");
            assert_eq!(f.client.as_deref(), Some(format!("0x{cid:x}").as_str()));
        }
    }
}
