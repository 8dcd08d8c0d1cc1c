//! `args`: the `-D` flags of one group on one line, unquoted, for `cmake $(gpuprobe ...)`.
//!
//! Unquoted command substitution splits words and expands globs, and no quoting survives it, so
//! every word must be one that passes through unchanged ([`is_plain_word`]); a plan holding any
//! other value (only possible through a hand-written quirk file or report) is refused here rather
//! than printed so that it would split into extra cmake arguments. A HIP plan's line ends with
//! the HIP compiler found here ([`Configure`]), as llama.cpp's docs set it through `HIPCXX`.

use crate::error::{Error, Result};
use crate::neutral::{inline, is_plain_word};
use crate::plan::Group;

use super::Configure;

pub fn render(group: &Group, configure: &Configure) -> Result<String> {
    let mut args = group.cmake_args();
    args.extend(configure.cmake_args());
    if let Some(bad) = args.iter().find(|a| !is_plain_word(a)) {
        return Err(Error::input(
            "--format args",
            format!(
                "`{}` cannot be passed through unquoted `$(...)` as one word (it holds a space, glob or other special character)",
                inline(bad)
            ),
            "use --format shell or json, and check the quirk file or report that produced this value",
        ));
    }
    Ok(args.join(" ") + "\n")
}
