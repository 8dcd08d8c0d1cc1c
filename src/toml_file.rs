//! TOML files read with errors that name the file, the line and the field: the parser every data
//! file (profiles, user quirk files, measured records, toolkits) goes through. Its own module so
//! that the modules holding those tables need not import each other.

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Parses TOML into `T`; errors carry `origin:line`, the field and the message.
pub fn parse_toml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        let field = line.and_then(|l| key_on_line(text, l));
        let message = e.message().trim().to_string();
        let message = match field {
            Some(f) if !message.contains(&f) => format!("field `{f}`: {message}"),
            _ => message,
        };
        Error::Input {
            input: origin.to_string(),
            line,
            message,
            fix: "correct the file (see the comments at the top of the bundled profiles/ file of the same kind)".into(),
        }
    })
}

pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line - 1)?;
    let (key, _) = l.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// Finds the line where `[[quirk]]` record `id` is declared, for semantic errors.
pub fn line_of_id(text: &str, id: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim();
            l.starts_with("id") && l.contains(&format!("\"{id}\""))
        })
        .map(|i| i + 1)
}
