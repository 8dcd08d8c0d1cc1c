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
