//! GPU architectures that a build or load error names in its own line (`compute_120`,
//! `.target 'sm_121'`, `CUDA arch <= 750`, `GPU arch : gfx906`, `found for: gfx1152`), and what
//! the target table knows about building them: which toolkit versions can, and why.

use crate::targets::{Target, TargetTable};

/// Target names (`sm_120`, `gfx1152`) named in `line`, in order, without duplicates.
pub fn named(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |n: String| {
        if !out.contains(&n) {
            out.push(n);
        }
    };
    for (marker, cuda) in [
        ("compute_", true),
        ("sm_", true),
        ("arch <= ", true),
        ("gfx", false),
    ] {
        let mut rest = line;
        while let Some(i) = rest.find(marker) {
            // `gfx` and `sm_` must start a word: `libggml` is not a target.
            let starts_word = i == 0
                || !rest[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            rest = &rest[i + marker.len()..];
            if !starts_word {
                continue;
            }
            let token: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if cuda {
                let digits: String = token.chars().take_while(|c| c.is_ascii_digit()).collect();
                // `arch <= 750` counts in tenths: 750 is sm_75.
                let digits = if marker == "arch <= " && digits.len() >= 3 && digits.ends_with('0') {
                    digits[..digits.len() - 1].to_string()
                } else {
                    digits
                };
                if digits.len() >= 2 {
                    push(format!("sm_{digits}"));
                }
            } else if token.len() >= 3 && token.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                push(format!("gfx{}", token.to_lowercase()));
            }
        }
    }
    out
}

fn describe(t: &Target) -> String {
    let kit = t.toolkit_name();
    let range = match (&t.toolkit.min, &t.toolkit.max) {
        (Some(min), Some(max)) => format!("{kit} {min} to {max}.x"),
        (Some(min), None) => format!("{kit} {min} or later"),
        (None, Some(max)) => format!("{kit} {max}.x or older"),
        (None, None) => format!("any {kit} llama.cpp accepts"),
    };
    let note = t
        .toolkit_note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!("{} is built by {range}{note}", t.name)
}

/// One sentence per known target named in `line`: the toolkit versions that build it.
pub fn toolkit_sentences(line: &str, targets: &TargetTable) -> Vec<String> {
    named(line)
        .iter()
        .filter_map(|n| targets.get(n))
        .map(|t| format!("{}.", describe(t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_spellings_errors_use() {
        assert_eq!(
            named("nvcc fatal : Unsupported gpu architecture 'compute_120'"),
            ["sm_120"]
        );
        assert_eq!(
            named("error : Feature '.block_scale' not supported on .target ‘sm_121’"),
            ["sm_121"]
        );
        assert_eq!(
            named("common.cuh:112: ggml was not compiled with any CUDA arch <= 750"),
            ["sm_75"]
        );
        assert_eq!(
            named(
                "rocBLAS error: Cannot read x/TensileLibrary.dat: No such file or directory for GPU arch : gfx906"
            ),
            ["gfx906"]
        );
        assert_eq!(
            named(
                "No compatible code objects found for: gfx1152, value of HIP_FORCE_SPIRV_CODEOBJECT: 0"
            ),
            ["gfx1152"]
        );
        // Not a target: a word that merely contains the marker, or detection garbage.
        assert!(named("libggml-base.so and compute_No CUDA devices found.").is_empty());
    }

    #[test]
    fn toolkit_ranges_come_from_the_target_table() {
        let k = crate::profiles::Knowledge::bundled().expect("bundled knowledge");
        let s = toolkit_sentences("Unsupported gpu architecture 'compute_120'", &k.targets);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].starts_with("sm_120 is built by CUDA 12.8"), "{s:?}");
        assert!(toolkit_sentences("compute_999", &k.targets).is_empty());
    }
}
