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

/// The code of a source file: comments and `#[cfg(test)]` modules (or single items) left out.
fn code_of(text: &str) -> String {
    let mut out = String::new();
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
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The modules `text` names through `crate::`, outside comments and `#[cfg(test)]` modules.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let code = code_of(text);
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `gpuprobe_crate::`, not ours
        }
        for path in use_tree(&code[i + "crate::".len()..]) {
            if let Some(first) = path.into_iter().next() {
                out.insert(first);
            }
        }
    }
    out
}

/// The paths a use tree starting at `s` names: `a::b` is one path, `{a, b::{c, d}}` three
/// (`a`, `b::c`, `b::d`), across lines. Stops at the first character that cannot continue it.
fn use_tree(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &str, at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let b = s.as_bytes();
        let skip_ws = |at: &mut usize| {
            while *at < b.len() && b[*at].is_ascii_whitespace() {
                *at += 1;
            }
        };
        let mut path = prefix.to_vec();
        loop {
            skip_ws(at);
            if *at < b.len() && b[*at] == b'{' {
                *at += 1;
                loop {
                    tree(s, at, &path, out);
                    skip_ws(at);
                    match b.get(*at) {
                        Some(b',') => *at += 1,
                        Some(b'}') => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                    skip_ws(at);
                    if b.get(*at) == Some(&b'}') {
                        *at += 1;
                        return;
                    }
                }
            }
            let start = *at;
            while *at < b.len()
                && (b[*at].is_ascii_alphanumeric() || b[*at] == b'_' || b[*at] == b'*')
            {
                *at += 1;
            }
            if *at > start {
                path.push(s[start..*at].to_string());
            }
            if s[*at..].starts_with("::") {
                *at += 2;
                continue;
            }
            // `x as y`: the alias is not a path.
            skip_ws(at);
            if s[*at..].starts_with("as ") {
                *at += 3;
                skip_ws(at);
                while *at < b.len() && (b[*at].is_ascii_alphanumeric() || b[*at] == b'_') {
                    *at += 1;
                }
            }
            if path.len() > prefix.len() {
                out.push(path);
            }
            return;
        }
    }
    let mut out = Vec::new();
    tree(s, &mut 0, &[], &mut out);
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

// ---- the import graph between check-build's modules -----------------------------------------

/// A module of `src/check_build/` by its path below `check_build` (`[]` is `mod.rs` itself,
/// `["judge"]` is `judge.rs`, `["a", "b"]` is `a/b.rs`).
type ModPath = Vec<String>;

/// The module a file below `src/check_build/` holds.
fn module_path(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().expect("a file name");
    if file != "mod.rs" {
        parts.push(file.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The modules of `modules` that the code of module `from` imports through `super::` or
/// `crate::check_build::`: each path goes to the deepest module it names, so `super::Finding`
/// (an item of the parent) is an import of the parent. A parent imports the children it declares.
fn module_imports(from: &ModPath, text: &str, modules: &BTreeSet<ModPath>) -> BTreeSet<ModPath> {
    let code = code_of(text);
    let mut out = BTreeSet::new();
    let mut bases: Vec<(usize, ModPath, &str)> = Vec::new();
    for (i, _) in code.match_indices("crate::check_build::") {
        bases.push((i, Vec::new(), &code[i + "crate::check_build::".len()..]));
    }
    for (i, _) in code.match_indices("super::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // the second `super::` of `super::super::`, read with the first
        }
        let mut base = from.clone();
        let mut rest = &code[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            if base.pop().is_none() {
                break; // above check_build: not this graph
            }
            rest = r;
        }
        if rest.starts_with("super::") {
            continue;
        }
        bases.push((i, base, rest));
    }
    for (_, base, rest) in bases {
        for path in use_tree(rest) {
            let mut to = base.clone();
            for seg in path {
                to.push(seg);
                if !modules.contains(&to) {
                    to.pop();
                    break;
                }
            }
            if &to != from {
                out.insert(to);
            }
        }
    }
    // `mod child;` / `pub mod child;`: the parent holds it.
    for line in code.lines() {
        let l = line.trim();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        if let Some(name) = l.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')) {
            let mut child = from.clone();
            child.push(name.trim().to_string());
            out.insert(child);
        }
    }
    out
}

fn check_build_graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src/check_build/") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let path_of = |p: &Path| module_path(p.strip_prefix(dir).expect("under check_build"));
    let modules: BTreeSet<ModPath> = files.iter().map(|p| path_of(p)).collect();
    let name = |m: &ModPath| {
        if m.is_empty() {
            "mod".to_string()
        } else {
            m.join("::")
        }
    };
    let mut graph = BTreeMap::new();
    for p in &files {
        let from = path_of(p);
        let text = std::fs::read_to_string(p).expect("read a source file");
        let to = module_imports(&from, &text, &modules);
        graph.insert(name(&from), to.iter().map(name).collect());
    }
    graph
}

/// The stage of each module `mod.rs` declares: the number of the `// N. ...` comment above it.
fn stages(mod_rs: &str) -> BTreeMap<String, u32> {
    let mut stage = None;
    let mut out = BTreeMap::new();
    for line in mod_rs.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("// ")
            && let Some((n, _)) = rest.split_once(". ")
            && let Ok(n) = n.parse::<u32>()
        {
            stage = Some(n);
        }
        let decl = line.strip_prefix("pub ").unwrap_or(line);
        if let Some(name) = decl.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')) {
            out.insert(name.to_string(), stage.unwrap_or(0));
        }
    }
    out
}

/// Imports of a module from one of a later stage (`a (2) imports b (3)`), sub-modules judged by
/// the stage of the child of `mod.rs` they are in.
fn later_stage_imports(
    graph: &BTreeMap<String, BTreeSet<String>>,
    stage: &BTreeMap<String, u32>,
) -> Vec<String> {
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_string();
    let mut out = Vec::new();
    for (from, to) in graph.iter().filter(|(m, _)| *m != "mod") {
        for t in to.iter().filter(|t| *t != "mod" && top(t) != top(from)) {
            let (a, b) = (stage.get(&top(from)), stage.get(&top(t)));
            if let (Some(a), Some(b)) = (a, b)
                && b > a
            {
                out.push(format!("{from} ({a}) imports {t} ({b})"));
            }
        }
    }
    out
}

#[test]
fn check_build_modules_form_a_pipeline_without_cycles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/check_build");
    let graph = check_build_graph(&dir);
    // The judge reads the explanations; an empty graph means the parse broke.
    assert!(
        graph
            .get("judge")
            .is_some_and(|to| to.contains("attribute")),
        "{graph:?}"
    );
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between modules of src/check_build/: {found:?} (each module's imports: {graph:?})"
    );
    let mod_rs = std::fs::read_to_string(dir.join("mod.rs")).expect("read mod.rs");
    let stage = stages(&mod_rs);
    let unstaged: Vec<&String> = graph
        .keys()
        .filter(|m| *m != "mod" && !stage.contains_key(m.split("::").next().unwrap_or(m)))
        .collect();
    assert!(
        unstaged.is_empty(),
        "modules declared under no `// N. stage` comment in src/check_build/mod.rs: {unstaged:?}"
    );
    let later = later_stage_imports(&graph, &stage);
    assert!(
        later.is_empty(),
        "check-build modules importing a later stage of the pipeline: {later:?}"
    );
}

#[test]
fn a_check_build_cycle_is_caught() {
    let modules: BTreeSet<ModPath> = [vec![], vec!["a"], vec!["b"], vec!["c"], vec!["c", "d"]]
        .into_iter()
        .map(|m| m.into_iter().map(String::from).collect())
        .collect();
    let path = |s: &str| -> ModPath {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split("::").map(String::from).collect()
        }
    };
    let imports = |from: &str, text: &str| -> BTreeSet<String> {
        module_imports(&path(from), text, &modules)
            .iter()
            .map(|m| m.join("::"))
            .collect()
    };
    // a → b; b → a (in a group spread over lines) and the parent (an item of mod.rs); c::d → b
    // and c; a test module's imports and comments do not count.
    let a = "use super::b::X;\n// super::c is only a comment\n#[cfg(test)]\nmod tests {\n    use super::super::c;\n}\n";
    let b = "use super::{\n    a::{self, Y},\n    Finding,\n};\n";
    let d = "use crate::check_build::b;\nuse super::super::b::Z;\nfn f() { super::g(); }\n";
    let root = "pub mod a;\nmod b;\npub mod c;\n";
    assert_eq!(imports("a", a), BTreeSet::from(["b".to_string()]));
    assert_eq!(
        imports("b", b),
        BTreeSet::from(["a".to_string(), String::new()])
    );
    assert_eq!(
        imports("c::d", d),
        BTreeSet::from(["b".to_string(), "c".to_string()])
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("mod", root, ""),
        ("a", a, "a"),
        ("b", b, "b"),
        ("c::d", d, "c::d"),
    ]
    .into_iter()
    .map(|(name, text, from)| {
        let to = module_imports(&path(from), text, &modules)
            .iter()
            .map(|m| {
                if m.is_empty() {
                    "mod".to_string()
                } else {
                    m.join("::")
                }
            })
            .collect();
        (name.to_string(), to)
    })
    .collect();
    assert_eq!(
        cycles(&graph),
        vec![vec!["a".to_string(), "b".to_string(), "mod".to_string()]]
    );
    // Stages: a (1) importing b (2) is an import of a later stage.
    let stage = stages("// 1. Read.\npub mod a;\n// 2. Explain.\nmod b;\npub mod c;\n");
    assert_eq!(stage.get("c"), Some(&2));
    let later = later_stage_imports(&graph, &stage);
    assert_eq!(later, vec!["a (1) imports b (2)".to_string()]);
}
