//! How check-build compiles the regexes of its data (log signatures, the open world's rules).

use regex::{Regex, RegexBuilder};

/// Every pattern matches regardless of case: the same message is printed in several
/// capitalisations across llama.cpp eras, wrappers and operating systems. The size limit bounds
/// what a row can cost.
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(1 << 22)
        .build()
}

/// Whether a line is a comment (a saved file's header, a Markdown heading of a pasted report)
/// rather than program output. A preprocessor diagnostic that a compiler or a reporter prints
/// at the start of a line (`#error -- unsupported GNU version!`, nvcc's host-compiler check) is
/// output, not a comment.
pub fn is_comment(line: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix('#') else {
        return false;
    };
    let begins = |w: &str| {
        rest.get(..w.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(w))
    };
    !(begins("error") || begins("warning"))
}

#[cfg(test)]
mod tests {
    use super::is_comment;

    #[test]
    fn headers_are_comments_and_preprocessor_diagnostics_are_not() {
        assert!(is_comment("# source: https://example.org/1"));
        assert!(is_comment("## Relevant log output"));
        assert!(is_comment("#0  0x00007f ggml_abort ()"));
        assert!(!is_comment(
            "#error -- unsupported GNU version! gcc versions later than 13"
        ));
        assert!(!is_comment(" #error -- unsupported GNU version!"));
        assert!(!is_comment("#warning deprecated"));
        assert!(!is_comment("CUDA error: out of memory"));
    }
}
