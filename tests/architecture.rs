//! The layout of `src/` as a rule, not a wish (docs/architecture.md, "The layers").
//!
//! The import graph is read from the sources: every `crate::…`, `super::…` and `self::…` path
//! outside comments and string literals, in `use` trees with nested groups, `pub use`
//! re-exports (relative ones like `pub use handle::Hub;` too) and inline paths, `#[cfg(test)]`
//! code included. A crate-root name (`crate::StartResult`) is followed through `lib.rs` to the
//! module it comes from; `lib.rs` itself is the facade, not a node. `pub(in crate::x)` and
//! `$crate` are not edges.
//!
//! Two graphs come from it:
//! - between top-level nodes (a folder or a file of `src/`): each node has a rank in [`LAYERS`],
//!   and may import lower ranks, or its own rank as long as no cycle forms;
//! - between files: no import cycle spans two folders, the hub's messages are a leaf, the core
//!   does no IO.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The order of the layers: a node may import the nodes of a lower rank, or of its own rank
/// without a cycle. Quoted in docs/architecture.md ("The layers").
const LAYERS: &[(&str, u8)] = &[
    // the HTTP API; the simulator (they use everything, nothing uses them)
    ("admin", 7),
    ("sim", 7),
    // the Hub handle, ChildRef, the RemoteHub client; `recovery` re-exports
    ("api", 6),
    ("recovery", 6),
    // the actors, their messages (hub/protocol), HubShared, the reads
    ("hub", 5),
    // IO, and the hub's plug-ins
    ("storage", 4),
    ("cluster", 4),
    ("manifest", 4),
    ("kinds", 4),
    ("hooks", 4),
    ("events", 4),
    // pure decisions
    ("core", 3),
    // ProcessHub and its parts
    ("config", 2),
    // what a request carries and answers (options, results, errors, monitors, roles); counters,
    // which every layer pushes into and which read none
    ("types", 1),
    ("telemetry", 1),
    // ids, rows and their merge rules; the time of day; memory release
    ("model", 0),
    ("clock", 0),
    ("memory_release", 0),
];

// ---------------------------------------------------------------- reading the sources

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
                    .replace('\\', "/");
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

/// The top-level node a file belongs to: `hub/coordinator/mod.rs` -> `hub`, `events.rs` ->
/// `events`.
fn node_of_file(rel: &str) -> String {
    match rel.split_once('/') {
        Some((dir, _)) => dir.to_owned(),
        None => rel.trim_end_matches(".rs").to_owned(),
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The source with comments, string and char literals blanked to spaces (newlines kept, so
/// offsets and line numbers stay those of the file). Lifetimes are kept.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let n = b.len();
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let blank = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
    };
    let mut i = 0;
    while i < n {
        let c = b[i];
        if b[i..].starts_with(b"//") {
            let j = b[i..].iter().position(|&c| c == b'\n').map_or(n, |p| i + p);
            blank(&mut out, &b[i..j]);
            i = j;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j]);
            i = j;
        } else if c == b'r'
            && (i == 0
                || !is_ident(b[i - 1])
                || (b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2]))))
            && {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                b.get(i + 1 + hashes) == Some(&b'"')
            }
        {
            // A raw string: r"..", r#".."#, br"..".
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = i + 2 + hashes;
            let j = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(n, |p| body + p + close.len());
            blank(&mut out, &b[i..j]);
            i = j;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < n && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let j = (j + 1).min(n);
            blank(&mut out, &b[i..j]);
            i = j;
        } else if c == b'\'' {
            // A char literal ('a', '\n', '\u{1F600}', '"'), not a lifetime ('a).
            let len = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match len {
                Some(len) => {
                    blank(&mut out, &b[i..i + len]);
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps the other bytes as they were")
}

/// The index just past the bracket that closes the one at `i`.
fn match_close(code: &[u8], i: usize) -> usize {
    let mut stack = vec![];
    let mut j = i;
    while j < code.len() {
        match code[j] {
            b'{' => stack.push(b'}'),
            b'(' => stack.push(b')'),
            b'[' => stack.push(b']'),
            c if stack.last() == Some(&c) => {
                stack.pop();
                if stack.is_empty() {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    code.len()
}

/// One path of a use tree or of code, as written (`crate`, `super`, `self` kept), with the
/// offset it starts at and, for `use x as y`, the alias.
#[derive(Debug, Clone)]
struct Leaf {
    segs: Vec<String>,
    offset: usize,
    alias: Option<String>,
    glob: bool,
    /// Where the `use` statement holding it starts (its offset for a path in code).
    stmt: usize,
}

fn skip_ws(code: &[u8], mut i: usize) -> usize {
    while i < code.len() && code[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(code: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while j < code.len() && is_ident(code[j]) {
        j += 1;
    }
    (j > i && !code[i].is_ascii_digit()).then_some(j)
}

/// Parses the use tree (or path) at `i` under `prefix`, appending its leaves; returns the index
/// just past it. `a::{b, c::{d, self}}` gives `a::b`, `a::c::d`, `a::c`.
fn parse_tree(
    code: &[u8],
    i: usize,
    prefix: &[String],
    start: usize,
    out: &mut Vec<Leaf>,
) -> usize {
    let mut segs = prefix.to_vec();
    let mut i = skip_ws(code, i);
    loop {
        if code.get(i) == Some(&b'{') {
            let end = match_close(code, i);
            let (mut depth, mut last) = (0, i + 1);
            for k in i + 1..end - 1 {
                match code[k] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => {
                        parse_item(code, last, k, &segs, out);
                        last = k + 1;
                    }
                    _ => {}
                }
            }
            parse_item(code, last, end - 1, &segs, out);
            return end;
        }
        if code.get(i) == Some(&b'*') {
            out.push(Leaf {
                segs,
                offset: start,
                alias: None,
                glob: true,
                stmt: start,
            });
            return i + 1;
        }
        let Some(end) = ident_at(code, i) else {
            out.push(Leaf {
                segs,
                offset: start,
                alias: None,
                glob: false,
                stmt: start,
            });
            return i;
        };
        let seg = std::str::from_utf8(&code[i..end]).unwrap().to_owned();
        i = end;
        if seg == "self" && !segs.is_empty() {
            // `{self, ..}`: the path so far
        } else {
            segs.push(seg);
        }
        let j = skip_ws(code, i);
        if code[j..].starts_with(b"::") && !code[j..].starts_with(b"::<") {
            i = skip_ws(code, j + 2);
            continue;
        }
        let mut alias = None;
        if code[j..].starts_with(b"as") && ident_at(code, j) == Some(j + 2) {
            let k = skip_ws(code, j + 2);
            if let Some(e) = ident_at(code, k) {
                alias = Some(std::str::from_utf8(&code[k..e]).unwrap().to_owned());
                i = e;
            }
        }
        out.push(Leaf {
            segs,
            offset: start,
            alias,
            glob: false,
            stmt: start,
        });
        return i;
    }
}

/// One item of a group, `code[from..to]`.
fn parse_item(code: &[u8], from: usize, to: usize, prefix: &[String], out: &mut Vec<Leaf>) {
    let item = &code[..to];
    let at = skip_ws(item, from);
    if at < to {
        parse_tree(item, at, prefix, at, out);
    }
}

/// The leaves of every `use` statement (paths as written), and the spans those statements
/// cover.
fn use_statements(code: &[u8]) -> (Vec<Leaf>, Vec<(usize, usize)>) {
    let (mut leaves, mut spans) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(p) = find(code, b"use", i) {
        i = p + 3;
        let boundary_before = p == 0 || !(is_ident(code[p - 1]) || code[p - 1] == b'$');
        let boundary_after = code.get(p + 3).is_some_and(|c| c.is_ascii_whitespace());
        if !boundary_before || !boundary_after {
            continue;
        }
        let at = skip_ws(code, p + 3);
        if code[at..].starts_with(b"::") {
            continue; // `use ::std::..`: another crate
        }
        let first = leaves.len();
        let end = parse_tree(code, at, &[], at, &mut leaves);
        for leaf in &mut leaves[first..] {
            leaf.stmt = p;
        }
        spans.push((p, end));
        i = end.max(i);
    }
    (leaves, spans)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// The `crate::` / `super::` / `self::` paths in code outside `use` statements.
fn inline_paths(code: &[u8], spans: &[(usize, usize)]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for kw in [&b"crate::"[..], b"super::", b"self::"] {
        let mut i = 0;
        while let Some(p) = find(code, kw, i) {
            i = p + kw.len();
            if p > 0 && (is_ident(code[p - 1]) || matches!(code[p - 1], b'$' | b':')) {
                continue; // `$crate::`, `a::self::`, `my_crate::`
            }
            if spans.iter().any(|&(a, b)| a <= p && p < b) {
                continue;
            }
            let before = std::str::from_utf8(&code[p.saturating_sub(8)..p]).unwrap_or("");
            if before.trim_end().ends_with("(in") || before.trim_end().ends_with(" in") {
                continue; // `pub(in crate::hub)`: a visibility, not an import
            }
            parse_tree(code, p, &[], p, &mut out);
        }
    }
    out
}

/// The inline modules of a file (`mod tests { .. }`): their spans and names, outermost first.
fn inline_modules(code: &[u8]) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = find(code, b"mod", i) {
        i = p + 3;
        if (p > 0 && is_ident(code[p - 1]))
            || !code.get(p + 3).is_some_and(|c| c.is_ascii_whitespace())
        {
            continue;
        }
        let at = skip_ws(code, p + 3);
        let Some(end) = ident_at(code, at) else {
            continue;
        };
        let brace = skip_ws(code, end);
        if code.get(brace) == Some(&b'{') {
            let name = std::str::from_utf8(&code[at..end]).unwrap().to_owned();
            out.push((brace, match_close(code, brace), name));
        }
    }
    out
}

fn line_of(code: &str, offset: usize) -> usize {
    code[..offset].bytes().filter(|&c| c == b'\n').count() + 1
}

// ---------------------------------------------------------------- the graphs

/// One path named by a file, resolved from the crate root.
#[derive(Debug, Clone)]
struct Ref {
    file: String,
    line: usize,
    path: Vec<String>,
}

/// The crate as its sources read.
struct Crate {
    /// Top-level nodes: the folders and files of `src/` (`lib.rs` is not one).
    nodes: BTreeSet<String>,
    /// Module path -> file.
    by_module: BTreeMap<Vec<String>, String>,
    /// Every path every file (other than lib.rs) names.
    refs: Vec<Ref>,
    /// The names each file's module-level `use` statements bring in (re-exports or not: a
    /// submodule may name either through `super::`) -> the path they stand for.
    imports: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    fn read() -> Crate {
        Crate::from_sources(&sources())
    }

    fn from_sources(files: &BTreeMap<String, String>) -> Crate {
        let by_module: BTreeMap<Vec<String>, String> = files
            .keys()
            .map(|rel| (module_of(rel), rel.clone()))
            .collect();
        let nodes: BTreeSet<String> = files
            .keys()
            .filter(|rel| *rel != "lib.rs")
            .map(|rel| node_of_file(rel))
            .collect();
        // Crate-root names re-exported by lib.rs -> the path they come from.
        let mut roots: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(lib) = files.get("lib.rs") {
            let code = strip(lib);
            let (leaves, _) = use_statements(code.as_bytes());
            for leaf in leaves {
                let mut segs = leaf.segs.clone();
                if segs.first().is_some_and(|s| s == "crate") {
                    segs.remove(0);
                }
                if segs.first().is_some_and(|s| nodes.contains(s)) {
                    let name = leaf.alias.clone().or_else(|| segs.last().cloned());
                    if let Some(name) = name {
                        roots.insert(name, segs);
                    }
                }
            }
        }
        let mut refs = Vec::new();
        let mut imports: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (rel, src) in files {
            if rel == "lib.rs" {
                continue;
            }
            let code = strip(src);
            let file_module = module_of(rel);
            let (used, spans) = use_statements(code.as_bytes());
            let inline = inline_paths(code.as_bytes(), &spans);
            let mods = inline_modules(code.as_bytes());
            let resolve = |leaf: &Leaf, in_use: bool| -> Option<Vec<String>> {
                // `super::` inside `mod tests { .. }` is the file's own module.
                let mut module = file_module.clone();
                module.extend(
                    mods.iter()
                        .filter(|(a, b, _)| *a <= leaf.offset && leaf.offset < *b)
                        .map(|(_, _, name)| name.clone()),
                );
                let segs = &leaf.segs;
                let first = segs.first()?;
                let mut path = match first.as_str() {
                    "crate" => segs[1..].to_vec(),
                    "super" => {
                        let mut base = module[..module.len().saturating_sub(1)].to_vec();
                        let mut k = 1;
                        while segs.get(k).is_some_and(|s| s == "super") {
                            base.pop();
                            k += 1;
                        }
                        base.extend_from_slice(&segs[k..]);
                        base
                    }
                    "self" => {
                        let mut base = module.clone();
                        base.extend_from_slice(&segs[1..]);
                        base
                    }
                    // `use handle::Hub;` in api/mod.rs: a child module of this one
                    _ if in_use => {
                        let mut child = module.clone();
                        child.push(first.clone());
                        if !by_module.contains_key(&child) {
                            return None; // another crate
                        }
                        let mut base = module.clone();
                        base.extend_from_slice(segs);
                        base
                    }
                    _ => return None,
                };
                // A crate-root name is followed through lib.rs.
                if let Some(first) = path.first() {
                    if !nodes.contains(first) {
                        if let Some(target) = roots.get(first) {
                            let mut p = target.clone();
                            p.extend_from_slice(&path[1..]);
                            path = p;
                        }
                    }
                }
                Some(path)
            };
            let mut depth = vec![0i32; code.len() + 1];
            for (k, c) in code.bytes().enumerate() {
                depth[k + 1] = depth[k]
                    + match c {
                        b'{' => 1,
                        b'}' => -1,
                        _ => 0,
                    };
            }
            let names = imports.entry(rel.clone()).or_default();
            for leaf in used.iter().filter(|l| !l.glob && depth[l.stmt] == 0) {
                if let Some(path) = resolve(leaf, true) {
                    if let Some(name) = leaf.alias.clone().or_else(|| leaf.segs.last().cloned()) {
                        if !matches!(name.as_str(), "crate" | "super" | "self") {
                            names.insert(name, path);
                        }
                    }
                }
            }
            for (leaf, in_use) in used
                .iter()
                .map(|l| (l, true))
                .chain(inline.iter().map(|l| (l, false)))
            {
                if let Some(path) = resolve(leaf, in_use) {
                    if !path.is_empty() {
                        refs.push(Ref {
                            file: rel.clone(),
                            line: line_of(&code, leaf.offset),
                            path,
                        });
                    }
                }
            }
        }
        refs.sort_by(|a, b| (&a.file, a.line, &a.path).cmp(&(&b.file, b.line, &b.path)));
        Crate {
            nodes,
            by_module,
            refs,
            imports,
        }
    }

    /// The edges between nodes, each with the references behind it.
    fn node_edges(&self) -> BTreeMap<(String, String), Vec<&Ref>> {
        let mut edges: BTreeMap<(String, String), Vec<&Ref>> = BTreeMap::new();
        for r in &self.refs {
            let from = node_of_file(&r.file);
            let to = &r.path[0];
            if self.nodes.contains(to) && *to != from {
                edges.entry((from, to.clone())).or_default().push(r);
            }
        }
        edges
    }

    /// The file that defines what a path names: the longest prefix that is a file, followed
    /// through that file's `use` and `pub use` (so `crate::storage::StorageError` lands on the
    /// file that defines it, not on the `mod.rs` that re-exports it).
    fn land(&self, path: &[String], hops: usize) -> Option<&String> {
        let mut module: Vec<String> = Vec::new();
        for (k, seg) in path.iter().enumerate() {
            let mut next = module.clone();
            next.push(seg.clone());
            if self.by_module.contains_key(&next) {
                module = next;
                continue;
            }
            let file = self.by_module.get(&module)?;
            if let Some(target) = self.imports.get(file).and_then(|names| names.get(seg)) {
                if *target != next && hops < 16 {
                    let mut p = target.clone();
                    p.extend_from_slice(&path[k + 1..]);
                    return self.land(&p, hops + 1).or(Some(file));
                }
            }
            return Some(file);
        }
        self.by_module.get(&module)
    }

    /// The import graph between files: a path lands on the file that defines what it names,
    /// and a `use` or `pub use` is an edge to that file.
    fn file_edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for rel in self.by_module.values() {
            if rel != "lib.rs" {
                edges.entry(rel.clone()).or_default();
            }
        }
        for r in &self.refs {
            if let Some(target) = self.land(&r.path, 0) {
                if *target != r.file && target != "lib.rs" {
                    edges
                        .entry(r.file.clone())
                        .or_default()
                        .insert(target.clone());
                }
            }
        }
        edges
    }
}

fn rank(node: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == node).map(|(_, r)| *r)
}

/// Strongly connected components with more than one vertex (Tarjan).
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

/// Every edge between nodes that breaks the layer rule, with a message naming it: an edge to a
/// higher rank, or an edge inside a cycle of one rank.
fn layer_breaks(krate: &Crate) -> BTreeMap<(String, String), String> {
    let edges = krate.node_edges();
    let mut same_rank: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if rank(from).is_some() && rank(from) == rank(to) {
            same_rank
                .entry(from.clone())
                .or_default()
                .insert(to.clone());
        }
    }
    let in_cycle: Vec<BTreeSet<String>> = cycles(&same_rank)
        .into_iter()
        .map(|c| c.into_iter().collect())
        .collect();
    let mut breaks = BTreeMap::new();
    for ((from, to), refs) in &edges {
        let (Some(rf), Some(rt)) = (rank(from), rank(to)) else {
            continue; // every_node_has_a_layer names it
        };
        let first = refs[0];
        let at = format!(
            "src/{}:{} crate::{}",
            first.file,
            first.line,
            first.path.join("::")
        );
        let more = match refs.len() {
            1 => String::new(),
            n => format!(" (and {} more references)", n - 1),
        };
        if rt > rf {
            breaks.insert(
                (from.clone(), to.clone()),
                format!(
                    "layer rule: {from} ({rf}) -> {to} ({rt}) at {at}{more}; a layer may use only \
                     the layers below it (docs/architecture.md#the-layers): move the type down or \
                     wrap the error upward"
                ),
            );
        } else if rt == rf && in_cycle.iter().any(|c| c.contains(from) && c.contains(to)) {
            breaks.insert(
                (from.clone(), to.clone()),
                format!(
                    "layer rule: {from} ({rf}) -> {to} ({rt}) at {at}{more} closes a cycle inside \
                     rank {rf}; a layer may use its own rank only without a cycle \
                     (docs/architecture.md#the-layers): move the shared part into one of them"
                ),
            );
        }
    }
    breaks
}

/// The folder of a file: its directory, or for `a/b.rs` beside a folder `a/b/` of its own
/// submodules, that folder (a module and its submodules are one place).
fn folder<'a>(rel: &'a str, edges: &BTreeMap<String, BTreeSet<String>>) -> &'a str {
    let own = rel.trim_end_matches(".rs");
    let prefix = format!("{own}/");
    if !rel.ends_with("/mod.rs") && edges.keys().any(|f| f.starts_with(&prefix)) {
        return own;
    }
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

// ---------------------------------------------------------------- the rules between nodes

#[test]
fn every_node_has_a_layer() {
    let krate = Crate::read();
    assert!(
        krate.nodes.len() > 10,
        "the sources were not found ({} nodes)",
        krate.nodes.len()
    );
    let missing: Vec<&String> = krate.nodes.iter().filter(|n| rank(n).is_none()).collect();
    assert!(
        missing.is_empty(),
        "{missing:?} have no layer: give each a rank in LAYERS (tests/architecture.rs) and in \
         docs/architecture.md#the-layers"
    );
}

#[test]
fn no_edge_points_up() {
    let breaks = layer_breaks(&Crate::read());
    assert!(
        breaks.is_empty(),
        "{}",
        breaks.into_values().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_two_folders_depend_on_each_other() {
    let krate = Crate::read();
    let edges = krate.node_edges();
    let mut found = Vec::new();
    for ((from, to), refs) in &edges {
        if from >= to {
            continue;
        }
        let Some(back) = edges.get(&(to.clone(), from.clone())) else {
            continue;
        };
        found.push(format!(
            "{from} <-> {to}: src/{}:{} crate::{} and src/{}:{} crate::{}; no two folders of src/ \
             may depend on each other (docs/architecture.md#the-layers)",
            refs[0].file,
            refs[0].line,
            refs[0].path.join("::"),
            back[0].file,
            back[0].line,
            back[0].path.join("::"),
        ));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn telemetry_reads_no_layer() {
    let krate = Crate::read();
    let mut found = Vec::new();
    for ((from, to), refs) in krate.node_edges() {
        if from != "telemetry" || matches!(to.as_str(), "model" | "types") {
            continue;
        }
        found.push(format!(
            "telemetry -> {to} at src/{}:{} crate::{}: telemetry is pushed into by the layers \
             above it and reads only model and types (docs/architecture.md#the-layers)",
            refs[0].file,
            refs[0].line,
            refs[0].path.join("::"),
        ));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// `cargo test -p process_hub --test architecture -- --ignored --nocapture print_graph`
#[test]
#[ignore]
fn print_graph() {
    let krate = Crate::read();
    let edges = krate.node_edges();
    println!("nodes ({}): {:?}", krate.nodes.len(), krate.nodes);
    println!("edges ({}): from -> to  refs/files", edges.len());
    for ((from, to), refs) in &edges {
        let files: BTreeSet<&str> = refs.iter().map(|r| r.file.as_str()).collect();
        println!("  {from:>15} -> {to:<15} {}/{}", refs.len(), files.len());
    }
    for message in layer_breaks(&krate).into_values() {
        println!("break: {message}");
    }
}

// ---------------------------------------------------------------- the rules between files

#[test]
fn no_import_cycle_spans_more_than_one_folder() {
    let krate = Crate::read();
    let edges = krate.file_edges();
    assert!(
        edges.len() > 50,
        "the sources were not found ({} files)",
        edges.len()
    );
    let spanning: Vec<String> = cycles(&edges)
        .into_iter()
        .filter(|c| c.iter().any(|f| folder(f, &edges) != folder(&c[0], &edges)))
        .map(|c| one_cycle(&c, &edges).join(" -> "))
        .collect();
    assert!(
        spanning.is_empty(),
        "import cycles across folders (one path through each set of files that depend on each \
         other; a set may hold more): {spanning:#?}"
    );
}

/// One cycle through a cross-folder edge inside a strongly connected set of files.
fn one_cycle(set: &[String], edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let inside = |f: &String| set.contains(f);
    for from in set {
        for to in edges[from].iter().filter(|t| inside(t)) {
            if folder(from, edges) == folder(to, edges) {
                continue;
            }
            // The shortest way back from `to` to `from`.
            let mut back: BTreeMap<&String, &String> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([to]);
            while let Some(v) = queue.pop_front() {
                if v == from {
                    let mut path = vec![from.clone()];
                    let mut w = from;
                    while w != to {
                        w = back[w];
                        path.push(w.clone());
                    }
                    path.push(from.clone());
                    path.reverse();
                    path.remove(0);
                    path.insert(0, from.clone());
                    return path;
                }
                for next in edges[v].iter().filter(|t| inside(t)) {
                    if next != to && !back.contains_key(next) {
                        back.insert(next, v);
                        queue.push_back(next);
                    }
                }
            }
        }
    }
    set.to_vec()
}

#[test]
fn the_hubs_messages_are_a_leaf() {
    let edges = Crate::read().file_edges();
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
    let edges = Crate::read().file_edges();
    for (file, targets) in &edges {
        if !file.starts_with("core/") {
            continue;
        }
        for target in targets {
            let allowed = ["core/", "model/", "types/", "config/"];
            assert!(
                allowed.iter().any(|a| target.starts_with(a)),
                "{file} imports {target}: the core imports only the core, the model, the types \
                 and config"
            );
        }
    }
}

#[test]
fn the_analysis_sees_what_it_must() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.insert("hub/a/mod.rs".into(), ["hub/b/mod.rs".into()].into());
    edges.insert("hub/b/mod.rs".into(), ["hub/a/mod.rs".into()].into());
    edges.insert("hub/c.rs".into(), BTreeSet::new());
    assert_eq!(
        cycles(&edges),
        vec![vec!["hub/a/mod.rs".to_owned(), "hub/b/mod.rs".to_owned()]]
    );

    let files: BTreeMap<String, String> = [
        (
            "lib.rs",
            "mod api;\npub mod core;\npub use api::{Hub, results::StartResult as Started};\n",
        ),
        ("api/mod.rs", "mod handle;\npub use handle::Hub;\n"),
        ("api/handle.rs", "pub(crate) use crate::hub::x;\npub struct Hub;\n"),
        (
            "admin/mod.rs",
            "mod error;\nmod ui;\npub use error::AdminError;\npub use ui::CSP;\n",
        ),
        ("admin/error.rs", "pub struct AdminError;\n"),
        ("admin/ui/mod.rs", "use super::AdminError;\npub const CSP: u8 = 0;\n"),
        ("api/results.rs", "pub struct StartResult;\n"),
        (
            "hub/mod.rs",
            "// use crate::sim::Nothing;\nconst S: &str = \"crate::sim::Nothing\";\n\
             pub(in crate::hub) fn f() -> crate::Started { make() }\n",
        ),
        (
            "hub/x.rs",
            "use crate::{core::{plan::{self, Plan}, guided}, model::*};\nfn g(c: char) -> bool { c == '\"' }\n\
             #[cfg(test)]\nmod tests {\n    use crate::api::Hub;\n}\n",
        ),
        ("hub/y.rs", "use super::super::core::plan::Plan;\n"),
        ("core/plan.rs", "pub struct Plan;\n"),
        ("core/guided.rs", ""),
        ("core/mod.rs", "pub mod plan;\n"),
        ("model/mod.rs", ""),
        ("sim/mod.rs", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let krate = Crate::from_sources(&files);
    let node_edges: BTreeSet<(String, String)> = krate.node_edges().into_keys().collect();
    let expected: BTreeSet<(String, String)> = [
        // the root name `Started` followed through lib.rs, in a function's signature
        ("hub", "api"),
        // a nested group, `self` in a group, a glob; cfg(test) code counts
        ("hub", "core"),
        ("hub", "model"),
        // a `pub(crate) use`
        ("api", "hub"),
        // `super::AdminError` from admin/ui stays inside admin
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    // Nothing from the comment, the string, the char literal or the `pub(in ..)`.
    assert_eq!(node_edges, expected);
    let file_edges = krate.file_edges();
    // A relative `pub use` is an edge; a path through a re-export (a root name, a `mod.rs`)
    // lands on the file that defines the item.
    assert!(file_edges["api/mod.rs"].contains("api/handle.rs"));
    assert!(file_edges["hub/mod.rs"].contains("api/results.rs"));
    assert!(file_edges["hub/x.rs"].contains("core/plan.rs"));
    assert!(file_edges["hub/x.rs"].contains("core/guided.rs"));
    assert!(file_edges["hub/x.rs"].contains("api/handle.rs"));
    assert!(file_edges["hub/y.rs"].contains("core/plan.rs"));
    assert!(file_edges["admin/ui/mod.rs"].contains("admin/error.rs"));
    assert!(!file_edges["admin/ui/mod.rs"].contains("admin/mod.rs"));
    let found = cycles(&file_edges);
    // hub -> api and api -> hub: both directions are there to be refused.
    assert!(found
        .iter()
        .any(|c| c.contains(&"api/handle.rs".to_owned()) && c.contains(&"hub/x.rs".to_owned())));
    // A folder re-exporting its submodule, which names the folder's items: no cycle.
    assert!(!found
        .iter()
        .any(|c| c.contains(&"admin/ui/mod.rs".to_owned())));
}
