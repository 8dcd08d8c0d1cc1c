//! Text from logs and programs is untrusted: before it reaches a terminal (or a quote in a
//! report that a terminal will show) it is made inert here, in one place.

/// Longest quoted line kept, in characters; the rest is cut with `…`.
pub const MAX_QUOTE: usize = 400;

/// `s` with every control character (C0, DEL, C1), the line separators and the bidirectional
/// controls that can reorder what a terminal shows, written as a visible escape (`\x1b`, `\t`,
/// `\u{202e}`): the project's one-line neutraliser ([`crate::neutral::inline`]). Escaping is
/// idempotent: neutralised text passes through unchanged.
pub fn neutralise(s: &str) -> String {
    crate::neutral::inline(s).into_owned()
}

/// `s` cut to `max` characters, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, neutralise};

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(neutralise("a\x1b[31mred\x07"), "a\\x1b[31mred\\x07");
        assert_eq!(neutralise("tab\there"), "tab\\there");
        assert_eq!(neutralise("cr\rlf\n"), "cr\\rlf\\n");
        assert_eq!(neutralise("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(neutralise("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(neutralise("plain: ünïcode"), "plain: ünïcode");
        assert_eq!(neutralise(&neutralise("a\x1bb")), "a\\x1bb");
        assert_eq!(clip(&"x".repeat(1000), 10).chars().count(), 11);
        assert_eq!(clip("short", 10), "short");
    }
}
