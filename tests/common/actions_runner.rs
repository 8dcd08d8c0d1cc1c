//! How the GitHub Actions runner finds workflow commands in a step's output, restated from its
//! source (github.com/actions/runner: src/Runner.Common/ActionCommand.cs, TryParseV2 and
//! TryParse; src/Runner.Worker/ActionCommandManager.cs, TryProcessCommand) so that tests can ask
//! whether a printed text would make the runner act:
//!
//! * the output is read line by line (.NET `ReadLine`: a line ends at `\r\n`, `\r` or `\n`);
//! * V2: after `String.TrimStart()` (every `Char.IsWhiteSpace` character) the line starts with
//!   `::`, and a second `::` follows; the command name runs from after the first `::` to the
//!   first space or the second `::`;
//! * V1: `##[` anywhere in the line, a `]` after it; the name runs from after `##[` to the
//!   first space or the `]`;
//! * the name is looked up case-insensitively among the registered commands, which grow at run
//!   time (`::stop-commands::TOKEN` registers TOKEN), so here any non-empty name counts.

/// `Char.IsWhiteSpace`: U+0009-U+000D, U+0020, U+0085, U+00A0 and the Unicode space, line and
/// paragraph separators (Zs, Zl, Zp).
fn dotnet_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

fn runner_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['\r', '\n']) {
        lines.push(&rest[..i]);
        let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[i + skip..];
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

fn v2(line: &str) -> Option<String> {
    let m = line.trim_start_matches(dotnet_whitespace);
    let body = m.strip_prefix("::")?;
    let end = body.find("::")?;
    let info = &body[..end];
    let name = info.split(' ').next().unwrap_or("");
    (!name.is_empty()).then(|| name.to_string())
}

fn v1(line: &str) -> Option<String> {
    let at = line.find("##[")?;
    let body = &line[at + 3..];
    let end = body.find(']')?;
    let name = body[..end].split(' ').next().unwrap_or("");
    (!name.is_empty()).then(|| name.to_string())
}

/// The workflow commands the runner would read in `text`, one `(line, name)` per command line.
pub fn commands(text: &str) -> Vec<(String, String)> {
    runner_lines(text)
        .into_iter()
        .filter_map(|l| v2(l).or_else(|| v1(l)).map(|n| (l.to_string(), n)))
        .collect()
}

#[test]
fn the_model_reads_what_the_runner_reads() {
    let found = |t: &str| commands(t).into_iter().map(|(_, n)| n).collect::<Vec<_>>();
    assert_eq!(found("::set-output name=a::b"), ["set-output"]);
    assert_eq!(found("x\r  \u{3000}::add-mask::v"), ["add-mask"]);
    assert_eq!(found("log ##[stop-commands]tok"), ["stop-commands"]);
    assert_eq!(found("a ::error::x\n::nope\n##[x"), Vec::<String>::new());
}
