//! ARCHITECTURE.md is a map; a map that names files which no longer exist misleads. Every path it
//! names under `src/`, `profiles/`, `probes/`, `tests/`, `scripts/` or `schemas/` must exist, and
//! the README must link it.

use std::path::Path;

const ROOTS: &[&str] = &[
    "src/",
    "profiles/",
    "probes/",
    "tests/",
    "scripts/",
    "schemas/",
];

/// Every `code span` in the text that starts with one of the repository's folders.
fn named_paths(text: &str) -> Vec<String> {
    // Fences are three backticks: drop them so spans pair up.
    let prose: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n");
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .filter(|span| ROOTS.iter().any(|r| span.starts_with(r)))
        .map(|span| span.trim_end_matches(['.', ',', ':', ';']).to_string())
        .collect()
}

#[test]
fn every_path_named_in_architecture_md_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let paths = named_paths(&text);
    // The map names the pipeline's modules and data files; far fewer means the parse broke.
    assert!(
        paths.len() >= 30,
        "only {} paths found: {paths:?}",
        paths.len()
    );
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !p.contains('*') && !root.join(p.as_str()).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
    let globbed: Vec<&String> = paths.iter().filter(|p| p.contains('*')).collect();
    assert!(globbed.is_empty(), "name files, not patterns: {globbed:?}");
}

#[test]
fn a_missing_path_is_caught() {
    let paths = named_paths("see `src/resolve.rs`, `src/no_such_module.rs` and `Plan`");
    assert_eq!(paths, ["src/resolve.rs", "src/no_such_module.rs"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(!root.join(&paths[1]).exists());
}

#[test]
fn readme_links_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let layout = readme
        .split("## Layout")
        .nth(1)
        .expect("README has a Layout section");
    assert!(
        layout.contains("(ARCHITECTURE.md)"),
        "README's Layout section must link ARCHITECTURE.md"
    );
}
