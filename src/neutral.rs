//! Making untrusted text inert, one function per place it can land.
//!
//! Everything gpuprobe prints comes partly from outside: report files, quirk files, program
//! output, paths, environment variables. Each output format gets its text through exactly one of
//! these functions, so a hostile value (a newline that ends a shell comment, a second key for
//! `$GITHUB_OUTPUT`, a `${{ }}` expression in a workflow, a terminal escape sequence) stays data.
//!
//! The functions never fail: what cannot be represented is shown escaped (`\n`, `\x1b`,
//! `\u{2028}`), which is visible, one line, and carries no meaning in any of the formats.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters that end a line somewhere (shells, YAML 1.1, terminals, editors) or change how
/// text is shown: C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the
/// bidirectional controls that reorder what a reader sees.
pub fn is_hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fffe}'
                | '\u{ffff}'
        )
        || is_invisible(c)
}

/// Characters that show as nothing (zero-width spaces and joiners, invisible operators, the
/// soft hyphen, tag characters): text holding them reads as something it is not.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'..='\u{2064}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_where(s: &str, hostile: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hostile) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hostile(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of plain text: every control character (newline and tab included) shown escaped.
/// For fields of tables, comments, notes and error messages.
pub fn inline(s: &str) -> Cow<'_, str> {
    escape_where(s, is_hostile)
}

/// Text for a terminal that may span lines: newlines and tabs stay, every other control
/// character (escape sequences, carriage returns, bells, C1 controls) is shown escaped.
pub fn terminal(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c != '\n' && c != '\t' && is_hostile(c))
}

/// Whitespace the Actions runner trims before looking for `::` (.NET `String.TrimStart()`, i.e.
/// `Char.IsWhiteSpace`), plus characters some .NET versions counted as whitespace: a superset
/// only makes more lines count as commands, which are then broken.
fn runner_trims(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{180e}' | '\u{200b}' | '\u{feff}')
}

/// Text that lands in a CI log (gpuprobe's stdout and stderr under GitHub Actions): no line of it
/// is a workflow command. The runner reads a line (lines end at `\n` or `\r`) as a command when,
/// after leading whitespace, it starts with `::` (`::set-output name=x::v`, `::add-mask::v`,
/// `::stop-commands::t`), or when `##[` occurs anywhere in it (`##[add-mask]v`). A `\` goes before
/// such a leading `::`, and every `##[` becomes `##\[`; the text stays readable.
pub fn ci_log(s: &str) -> Cow<'_, str> {
    if !s.contains("::") && !s.contains("##[") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split_inclusive(['\n', '\r']) {
        let rest = line.trim_start_matches(runner_trims);
        if rest.starts_with("::") {
            out.push_str(&line[..line.len() - rest.len()]);
            out.push('\\');
            out.push_str(rest);
        } else {
            out.push_str(line);
        }
    }
    if out.contains("##[") {
        out = out.replace("##[", "##\\[");
    }
    if out == s {
        return Cow::Borrowed(s);
    }
    Cow::Owned(out)
}

/// What gpuprobe prints for people (stdout text, every stderr message): [`terminal`] text that is
/// also [`ci_log`]-safe, because that output is read in terminals and in CI logs alike.
pub fn printed(s: &str) -> Cow<'_, str> {
    match terminal(s) {
        Cow::Borrowed(b) => ci_log(b),
        Cow::Owned(o) => Cow::Owned(ci_log(&o).into_owned()),
    }
}

/// A JSON document (serde_json's output) made safe to print without changing its value: the
/// characters a terminal or reader would act on or hide (DEL, C1 controls, line separators, bidi
/// and zero-width characters), which serde_json leaves raw, become `\uXXXX` escapes, and `##[`
/// becomes `##\u005b`. Both only occur inside strings (outside them JSON has only brackets,
/// punctuation, literals and ASCII whitespace), where they are valid JSON escapes for the same
/// characters. Never the terminal neutraliser: its `\x1b`-style escapes would change values.
pub fn json(doc: &str) -> Cow<'_, str> {
    let hostile = |c: char| is_hostile(c) && !matches!(c, '\n' | '\r' | '\t');
    if !doc.chars().any(hostile) && !doc.contains("##[") {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + 16);
    for c in doc.chars() {
        if hostile(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", u);
            }
        } else {
            out.push(c);
        }
    }
    if out.contains("##[") {
        out = out.replace("##[", "##\\u005b");
    }
    Cow::Owned(out)
}

/// The text of a `#` comment in a shell script or YAML file: never more than one line.
pub fn comment(s: &str) -> Cow<'_, str> {
    inline(s)
}

/// A word for POSIX sh, single-quoted unless it is made only of characters that are never
/// special; control characters are shown escaped (a valid plan never holds one).
pub fn sh_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-=./:,+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", inline(s).replace('\'', r"'\''"))
}

/// True when `s` survives unquoted command substitution (`cmake $(gpuprobe ... --format args)`)
/// as exactly one word with exactly this text: no field splitting, no pathname expansion.
pub fn is_plain_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-=./:,;+@%".contains(c))
}

/// Breaks every GitHub Actions expression opener in `s` while keeping the value: `${{` becomes
/// `${{ '${{' }}`, an expression that evaluates to the literal text `${{`.
fn break_expressions(s: &str) -> Cow<'_, str> {
    if s.contains("${{") {
        Cow::Owned(s.replace("${{", "${{ '${{' }}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// A YAML double-quoted scalar whose value, after GitHub evaluates expressions, is `s`.
pub fn yaml_quoted(s: &str) -> String {
    let s = break_expressions(s);
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_hostile(c) => {
                let n = c as u32;
                if n <= 0xff {
                    let _ = write!(out, "\\x{n:02x}");
                } else {
                    let _ = write!(out, "\\u{n:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text at an unquoted place in a YAML template (a comment, part of a plain scalar): one line,
/// no expression. Quoting values is [`yaml_quoted`]'s job.
pub fn yaml_text(s: &str) -> String {
    break_expressions(&inline(s)).into_owned()
}

/// A `$GITHUB_OUTPUT` (or `$GITHUB_ENV`) entry for a one-line value: `key=value`, the value's
/// control characters shown escaped, so it can never start a second entry.
pub fn github_line(key: &str, value: &str) -> String {
    format!("{}={}\n", github_key(key), inline(value))
}

/// A multi-line `$GITHUB_OUTPUT` entry: `key<<DELIM`, the lines, `DELIM`. The delimiter is a line
/// that the value does not contain; carriage returns and other controls are shown escaped (the
/// runner on Windows splits lines at `\r\n`).
pub fn github_block(key: &str, value: &str) -> String {
    let value = terminal(value);
    let mut delim = "GPUPROBE_EOF".to_string();
    while value.lines().any(|l| l == delim) {
        delim.push('_');
    }
    format!("{}<<{delim}\n{value}\n{delim}\n", github_key(key))
}

/// Output names are gpuprobe's own; anything else is replaced so that no name can carry `=`,
/// `<<` or a newline.
fn github_key(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The message of a workflow command (`::warning title=...::MESSAGE`), one line as the runner
/// reads it: `%`, CR and LF percent-encoded, other controls shown escaped.
pub fn annotation(s: &str) -> String {
    let s = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    inline(&s).into_owned()
}

/// Plain text inside Markdown (a table cell or list item of the step summary): one line, with
/// the characters that start Markdown or HTML structure backslash-escaped.
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in inline(s).chars() {
        if "\\`*_[]<>|#!~&".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A Markdown code span holding `s` verbatim (one line): fenced with one more backtick than the
/// longest run inside it.
pub fn markdown_code(s: &str) -> String {
    let s = inline(s);
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// Writes one message line to stderr as [`terminal`] text: the one way gpuprobe talks on stderr
/// (notes, warnings, errors), so a path, quirk text or device name in a message cannot send
/// escape sequences to the terminal. Failure to write to stderr is ignored, as `eprintln!` would
/// panic instead.
pub fn eprintln(text: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(printed(text).as_bytes());
    let _ = err.write_all(b"\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_text_is_one_line() {
        assert_eq!(inline("sm_90\n$(touch x)"), "sm_90\\n$(touch x)");
        assert_eq!(inline("a\u{1b}[31mred"), "a\\x1b[31mred");
        assert_eq!(inline("a\u{2028}b\u{85}c"), "a\\u{2028}b\\u{85}c");
        assert!(matches!(inline("plain text"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_text_keeps_lines_but_not_escapes() {
        assert_eq!(terminal("a\n\tb\u{1b}]0;x\u{7}"), "a\n\tb\\x1b]0;x\\x07");
        assert_eq!(terminal("over\rwrite"), "over\\rwrite");
    }

    #[test]
    fn sh_words_are_quoted_when_needed() {
        assert_eq!(sh_word("-DGGML_HIP=ON"), "-DGGML_HIP=ON");
        assert_eq!(sh_word("a b"), "'a b'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("x\ny"), "'x\\ny'");
    }

    #[test]
    fn yaml_values_are_quoted_and_expression_free() {
        assert_eq!(yaml_quoted("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(yaml_quoted("x\ny"), r#""x\x0ay""#);
        assert_eq!(yaml_quoted("l\u{2028}s"), r#""l\u2028s""#);
        assert_eq!(
            yaml_quoted("${{ secrets.T }}"),
            r#""${{ '${{' }} secrets.T }}""#
        );
        assert_eq!(yaml_text("a\n${{ x }}"), "a\\n${{ '${{' }} x }}");
    }

    #[test]
    fn github_entries_cannot_add_keys() {
        assert_eq!(github_line("k", "a\nb=c"), "k=a\\nb=c\n");
        let b = github_block("env", "A=1\nGPUPROBE_EOF\nB=2\r");
        assert_eq!(
            b,
            "env<<GPUPROBE_EOF_\nA=1\nGPUPROBE_EOF\nB=2\\r\nGPUPROBE_EOF_\n"
        );
        assert_eq!(github_line("a=b\nc", "v"), "a_b_c=v\n");
    }

    #[test]
    fn markdown_is_escaped() {
        assert_eq!(markdown("a|b\n<img>"), "a\\|b\\\\n\\<img\\>");
        assert_eq!(markdown_code("-DA=`x`"), "`` -DA=`x` ``");
        assert_eq!(markdown_code("x"), "`x`");
    }

    #[test]
    fn ci_log_lines_are_never_commands() {
        assert_eq!(ci_log("::set-output name=a::b"), "\\::set-output name=a::b");
        assert_eq!(ci_log("x\n  ::add-mask::v"), "x\n  \\::add-mask::v");
        assert_eq!(ci_log("a\r::error::e"), "a\r\\::error::e");
        assert_eq!(ci_log("\u{3000}::warning::w"), "\u{3000}\\::warning::w");
        assert_eq!(ci_log("text ##[add-mask]v"), "text ##\\[add-mask]v");
        assert_eq!(ci_log("###[x]"), "###\\[x]");
        assert_eq!(ci_log("a::b ## [c]"), "a::b ## [c]");
        assert!(matches!(ci_log("a::b"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_keeps_its_value_and_loses_hostile_characters() {
        let v = serde_json::json!({"k": "a\u{7f}b\u{9b}c\u{2028}d\u{202e}e\u{200b}f\u{e0041}g ##[add-mask]x\n::x"});
        let doc = serde_json::to_string_pretty(&v).unwrap();
        let safe = json(&doc);
        assert!(!safe.chars().any(|c| is_hostile(c) && c != '\n'), "{safe}");
        assert!(!safe.contains("##["), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn zero_width_characters_are_shown() {
        assert_eq!(terminal("a\u{200b}b\u{2060}c"), "a\\u{200b}b\\u{2060}c");
    }

    #[test]
    fn plain_words_survive_unquoted_expansion() {
        assert!(is_plain_word("-DGPU_TARGETS=gfx1100;gfx1201"));
        assert!(!is_plain_word("-DX=a b"));
        assert!(!is_plain_word("-DX=*"));
        assert!(!is_plain_word(""));
    }
}
