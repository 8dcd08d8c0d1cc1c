//! `args`: the `-D` flags of one group on one line, unquoted, for `cmake $(gpuprobe ...)`.
//! Values never contain spaces; `;` separates lists and is not special after expansion.

use crate::plan::Group;

pub fn render(group: &Group) -> String {
    group.cmake_args().join(" ") + "\n"
}
