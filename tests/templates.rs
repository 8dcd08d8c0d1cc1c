//! `templates/package.sh` and `templates/self-check.sh` are inlined into different workflow steps,
//! so each carries its own copy of what the base system provides. They must agree: a library the
//! packer leaves out as "base" that the self-check does not accept as base fails every release.

const PACKAGE: &str = include_str!("../templates/package.sh");
const SELF_CHECK: &str = include_str!("../templates/self-check.sh");

/// The words of the shell assignment `NAME="..."` (which may span lines) in `script`.
fn words_of(script: &str, name: &str) -> Vec<String> {
    let start = format!("\n{name}=\"");
    let at = script
        .find(&start)
        .unwrap_or_else(|| panic!("no {name}=\"...\" in the script"))
        + start.len();
    let end = script[at..]
        .find('"')
        .unwrap_or_else(|| panic!("{name} is not closed"));
    let mut w: Vec<String> = script[at..at + end]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    w.sort();
    w
}

#[test]
fn packer_and_self_check_agree_on_what_the_system_provides() {
    for name in ["LINUX_BASE", "LINUX_STATED", "WINDOWS_BASE"] {
        let packed = words_of(PACKAGE, name);
        assert!(!packed.is_empty(), "{name} is empty in package.sh");
        assert_eq!(
            packed,
            words_of(SELF_CHECK, name),
            "{name} differs between templates/package.sh and templates/self-check.sh"
        );
    }
}
