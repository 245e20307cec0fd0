//! The module graph inside each crate has no loops: no two modules use each other, directly or through
//! others (issue 12). A loop makes neither module readable alone and grows with every feature built
//! on top; the layering between crates is Cargo's to enforce, this checks the layering inside them.
//!
//! A module is one source file (`lib.rs` is the crate root, `a/b.rs` is `a::b`). An edge `a → b` is a
//! path in `a`'s code (comments and `#[cfg(test)]` sections left out) that names `b` or an item of it:
//! `crate::b::…`, `super::…` from a child, `b::…` after `mod b;`, or an item the root re-exports from
//! `b` (`crate::Item` after `pub use b::Item`). Items defined in `lib.rs` itself are leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's modules: path (`"transfer::conn"`) → the file's code without comments and tests.
type Sources = BTreeMap<String, String>;

fn read_crate(src: &Path) -> Sources {
    let mut out = Sources::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.insert(module_path(src, &path), code_only(&text));
            }
        }
    }
    out
}

fn module_path(src: &Path, file: &Path) -> String {
    let rel: PathBuf = file
        .strip_prefix(src)
        .expect("file under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        return String::new();
    }
    parts.join("::")
}

/// The code of a file: line comments removed, and everything from a `#[cfg(test)]` line on (the house
/// style keeps unit tests at the end of the file).
fn code_only(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            // A `//` inside a string literal (a URL) is rare in paths that matter; an odd count of
            // quotes before it marks that case, and the line is kept whole.
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every path that starts with `prefix::` in `code`, with `{…}` groups expanded: `crate::{a, b::{c}}`
/// gives `a`, `b::c`.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let needle = format!("{prefix}::");
    let mut rest = code;
    while let Some(i) = rest.find(&needle) {
        let before = rest[..i].chars().next_back();
        let at = &rest[i + needle.len()..];
        rest = at;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        expand(at, "", &mut out);
    }
    out
}

/// Reads one path (possibly a `{…}` group) at the start of `s`, appending full paths to `out`.
fn expand(s: &str, base: &str, out: &mut Vec<String>) {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand_item(&group[start..i], base, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_item(&group[start..i], base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    expand_item(s, base, out);
}

fn expand_item(s: &str, base: &str, out: &mut Vec<String>) {
    let s = s.trim_start();
    let ident_end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let ident = &s[..ident_end];
    if ident.is_empty() {
        return;
    }
    let full = if base.is_empty() {
        ident.to_string()
    } else {
        format!("{base}::{ident}")
    };
    if let Some(next) = s[ident_end..].strip_prefix("::") {
        expand(next, &full, out);
    } else {
        out.push(full);
    }
}

/// The module a path names: the longest prefix of it that is a module, if any.
fn module_of(path: &str, modules: &Sources) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|p| modules.contains_key(p))
}

/// Names the crate root re-exports (`pub use a::b::Item;` and groups) → the module they come from.
fn reexports(modules: &Sources) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let root = modules.get("").map(String::as_str).unwrap_or("");
    for stmt in root.split(';') {
        let Some(at) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let mut paths = Vec::new();
        expand(at.trim_start_matches("crate::"), "", &mut paths);
        for p in paths {
            if let (Some(m), Some(name)) = (module_of(&p, modules), p.rsplit("::").next()) {
                out.insert(name.to_string(), m);
            }
        }
    }
    out
}

fn edges(modules: &Sources) -> BTreeMap<String, BTreeSet<String>> {
    let reexported = reexports(modules);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (me, code) in modules {
        if me.is_empty() {
            continue;
        }
        let mut targets = Vec::new();
        for p in paths_after(code, "crate") {
            match module_of(&p, modules) {
                Some(m) => targets.push(m),
                None => targets.extend(reexported.get(&p).cloned()),
            }
        }
        let parent = me.rsplit_once("::").map_or("", |(p, _)| p);
        for p in paths_after(code, "super") {
            let full = if parent.is_empty() {
                p
            } else {
                format!("{parent}::{p}")
            };
            targets.push(module_of(&full, modules).unwrap_or_else(|| parent.to_string()));
        }
        for child in modules.keys().filter_map(|k| {
            k.strip_prefix(me.as_str())
                .and_then(|r| r.strip_prefix("::"))
                .filter(|r| !r.contains("::"))
        }) {
            if !paths_after(code, child).is_empty() {
                targets.push(format!("{me}::{child}"));
            }
        }
        let set = out.entry(me.clone()).or_default();
        for t in targets {
            if !t.is_empty() && t != *me {
                set.insert(t);
            }
        }
    }
    out
}

/// The loops of a graph, each as the modules of one strongly connected component (Tarjan's algorithm).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_crate_has_modules_that_use_each_other() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut found = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&crates)
        .expect("read crates/")
        .map(|e| e.expect("an entry").path())
        .collect();
    names.sort();
    for dir in names {
        // crates/cli keeps its modules at its top (no src/).
        let src = if dir.join("src").is_dir() {
            dir.join("src")
        } else {
            dir.clone()
        };
        let modules = read_crate(&src);
        for component in loops(&edges(&modules)) {
            found.push(format!("{}: {}", dir.display(), component.join(" ⇄ ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that use each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_direct_indirect_and_parent_child_loops() {
    let sources = |files: &[(&str, &str)]| -> Sources {
        files
            .iter()
            .map(|(m, c)| (m.to_string(), code_only(c)))
            .collect()
    };
    let direct = sources(&[
        ("", "mod a; mod b; pub use a::Thing;"),
        ("a", "use crate::b::{self, Other};"),
        ("b", "fn f() -> crate::Thing { todo!() }"),
    ]);
    assert_eq!(loops(&edges(&direct)), vec![vec!["a", "b"]]);
    let three = sources(&[
        ("", "mod a; mod b; mod c;"),
        ("a", "use crate::{b::X, c};"),
        ("b", "use crate::c::Y;"),
        (
            "c",
            "// use crate::a::Z; is a comment\nfn g() { crate::a::z() }",
        ),
    ]);
    assert_eq!(loops(&edges(&three)), vec![vec!["a", "b", "c"]]);
    let family = sources(&[
        ("", "mod t;"),
        ("t", "mod conn; fn f() { conn::open() }"),
        ("t::conn", "use super::Shared;"),
    ]);
    assert_eq!(loops(&edges(&family)), vec![vec!["t", "t::conn"]]);
    let clean = sources(&[
        ("", "mod a; mod b; pub const NAME: &str = \"x\";"),
        (
            "a",
            "use crate::{NAME, b};\n#[cfg(test)]\nmod tests { use crate::a; }",
        ),
        ("b", "use crate::NAME;"),
    ]);
    assert!(loops(&edges(&clean)).is_empty());
}
