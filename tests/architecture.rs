//! The layout of `src/` as a rule, not a wish: the hub's message types are a leaf, and no import
//! cycle spans more than one folder (an actor's files may call each other; two actors, or an
//! actor and the core, may not depend on each other both ways).
//!
//! The import graph is read from the sources: every `crate::…`, `super::…` and `self::…` path
//! outside comments and test modules is an edge from its file to the file of the module it
//! names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, by its path relative to `src/`.
fn sources() -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
}

/// The module path of a file: `hub/coordinator/mod.rs` -> `[hub, coordinator]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its `#[cfg(test)]` module (tests may
/// reach anywhere).
fn code_of(src: &str) -> String {
    let mut code = String::new();
    for line in src.lines() {
        if line.trim_start() == "#[cfg(test)]" {
            break;
        }
        let line = line.split("//").next().unwrap_or("");
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The paths a file names: `crate::a::b::C` -> `[a, b, C]`, `super::x` relative to it. A
/// `use crate::{a, b::c}` group names each of its items.
fn named_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut paths = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        let start_ok = i == 0 || !ident(bytes[i - 1]);
        let (base, skip) = if start_ok && rest.starts_with("crate::") {
            (Vec::new(), 7)
        } else if start_ok && rest.starts_with("super::") {
            (module[..module.len().saturating_sub(1)].to_vec(), 7)
        } else if start_ok && rest.starts_with("self::") {
            (module.to_vec(), 6)
        } else {
            i += 1;
            continue;
        };
        i += skip;
        let mut base = base;
        let mut segs = Vec::new();
        loop {
            if i < bytes.len() && bytes[i] == '{' {
                // A group: each item is a path from here.
                let end = bytes[i..]
                    .iter()
                    .position(|c| *c == '}')
                    .map_or(bytes.len(), |p| i + p);
                let group: String = bytes[i + 1..end].iter().collect();
                for item in group.split(',') {
                    let mut path = base.clone();
                    path.extend(segs.iter().cloned());
                    path.extend(
                        item.trim()
                            .split("::")
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty() && s.chars().all(ident)),
                    );
                    paths.push(path);
                }
                i = end;
                break;
            }
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            if start == i {
                break;
            }
            let seg: String = bytes[start..i].iter().collect();
            if seg == "super" {
                base.pop();
            } else {
                segs.push(seg);
            }
            if bytes.get(i) == Some(&':') && bytes.get(i + 1) == Some(&':') {
                i += 2;
            } else {
                break;
            }
        }
        let mut path = base;
        path.extend(segs);
        paths.push(path);
    }
    paths
}

/// The import graph between files.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let by_module: BTreeMap<Vec<String>, String> = files
        .keys()
        .map(|rel| (module_of(rel), rel.clone()))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, src) in &files {
        let module = module_of(rel);
        let targets = edges.entry(rel.clone()).or_default();
        for path in named_paths(&module, &code_of(src)) {
            // The longest prefix that is a file is the module the path lives in.
            let target = (1..=path.len())
                .rev()
                .find_map(|n| by_module.get(&path[..n]));
            if let Some(target) = target {
                if target != rel {
                    targets.insert(target.clone());
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one file (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
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
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

fn folder(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

#[test]
fn no_import_cycle_spans_more_than_one_folder() {
    let edges = graph();
    assert!(
        edges.len() > 50,
        "the sources were not found ({} files)",
        edges.len()
    );
    let spanning: Vec<Vec<String>> = cycles(&edges)
        .into_iter()
        .filter(|c| c.iter().any(|f| folder(f) != folder(&c[0])))
        .collect();
    assert!(
        spanning.is_empty(),
        "import cycles across folders: {spanning:#?}"
    );
}

#[test]
fn the_hubs_messages_are_a_leaf() {
    let edges = graph();
    for (file, targets) in &edges {
        if !file.starts_with("hub/protocol/") {
            continue;
        }
        for target in targets {
            assert!(
                !target.starts_with("hub/") || target.starts_with("hub/protocol/"),
                "{file} imports {target}: the protocol must not import the hub's actors"
            );
        }
    }
}

#[test]
fn the_core_does_no_io_and_knows_no_actor() {
    let edges = graph();
    for (file, targets) in &edges {
        if !file.starts_with("core/") {
            continue;
        }
        for target in targets {
            let allowed = ["core/", "model/", "config/"];
            assert!(
                allowed.iter().any(|a| target.starts_with(a)),
                "{file} imports {target}: the core imports only the core, the model and config"
            );
        }
    }
}

#[test]
fn the_analysis_sees_a_cycle_when_there_is_one() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.insert("hub/a/mod.rs".into(), ["hub/b/mod.rs".into()].into());
    edges.insert("hub/b/mod.rs".into(), ["hub/a/mod.rs".into()].into());
    edges.insert("hub/c.rs".into(), BTreeSet::new());
    assert_eq!(
        cycles(&edges),
        vec![vec!["hub/a/mod.rs".to_owned(), "hub/b/mod.rs".to_owned()]]
    );
    let module = module_of("hub/coordinator/relay.rs");
    let paths = named_paths(
        &module,
        "use super::messaging::{self, answer_call};\nuse crate::cluster::wire::{RequestId, WireMsg};",
    );
    assert!(paths.contains(&vec![
        "hub".into(),
        "coordinator".into(),
        "messaging".into()
    ]));
    assert!(paths.contains(&vec!["cluster".into(), "wire".into(), "WireMsg".into()]));
}
