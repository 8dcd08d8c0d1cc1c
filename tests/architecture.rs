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

// ---- the import graph between top-level modules ---------------------------------------------

use std::collections::{BTreeMap, BTreeSet};

/// Cycles the graph is known to have, each a sorted list of modules, with the reason it is still
/// there; none now. A cycle that disappears must leave this list too.
const KNOWN_CYCLES: &[&[&str]] = &[];

/// The top-level module a file of `src/` belongs to (`src/quirks/ids.rs` → `quirks`).
fn top_module(rel: &Path) -> String {
    let first = rel.components().next().expect("a path under src/");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// The modules `text` names through `crate::`, outside comments and `#[cfg(test)]` modules.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let code = line.split("//").next().unwrap_or("");
        if code.trim() == "#[cfg(test)]" {
            // Skip the test module (or the single item) this attribute guards.
            let indent = &line[..line.len() - line.trim_start().len()];
            if let Some(next) = lines.next()
                && next.trim_end().ends_with('{')
            {
                let close = format!("{indent}}}");
                for l in lines.by_ref() {
                    if l == close {
                        break;
                    }
                }
            }
            continue;
        }
        for (i, _) in code.match_indices("crate::") {
            if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue; // `gpuprobe_crate::`, not ours
            }
            let rest = &code[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}` (one line) names a and b.
                let group = group.split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

/// Every top-level module of `src/` and the top-level modules it imports.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src/") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let modules: BTreeSet<String> = files
        .iter()
        .map(|p| top_module(p.strip_prefix(src).expect("under src/")))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &files {
        let from = top_module(p.strip_prefix(src).expect("under src/"));
        let text = std::fs::read_to_string(p).expect("read a source file");
        let to = graph.entry(from.clone()).or_default();
        for m in crate_paths(&text) {
            if m != from && modules.contains(&m) {
                to.insert(m);
            }
        }
    }
    graph
}

/// The cycles of `graph`: each set of two or more modules that all reach one another, sorted.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reached {
        let mut cycle: Vec<String> = reached
            .iter()
            .filter(|(n, rn)| r.contains(**n) && rn.contains(*m))
            .map(|(n, _)| (*n).clone())
            .collect();
        cycle.sort();
        if cycle.len() > 1 && !out.contains(&cycle) {
            out.push(cycle);
        }
    }
    out
}

#[test]
fn top_level_modules_import_one_another_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = import_graph(&src);
    // The pipeline's modules import one another; an empty graph means the parse broke.
    assert!(
        graph.get("resolve").is_some_and(|to| to.contains("quirks")),
        "{graph:?}"
    );
    let found = cycles(&graph);
    let known: Vec<Vec<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<&Vec<String>> = found.iter().filter(|c| !known.contains(c)).collect();
    assert!(
        new.is_empty(),
        "import cycles between top-level modules of src/: {new:?} (each module's `crate::` paths: {graph:?})"
    );
    let gone: Vec<&Vec<String>> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        gone.is_empty(),
        "these known cycles are gone: remove them from KNOWN_CYCLES: {gone:?}"
    );
}

#[test]
fn an_import_cycle_is_caught() {
    let text_a = "use crate::b::X;\n// crate::c is only a comment\n";
    let text_b = "use crate::{a, error};\nfn f() { crate::a::g(); }\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n";
    assert_eq!(crate_paths(text_a), BTreeSet::from(["b".to_string()]));
    assert_eq!(
        crate_paths(text_b),
        BTreeSet::from(["a".to_string(), "error".to_string()])
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["a", "error"]),
        ("c", vec!["a"]),
        ("error", vec![]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
}
