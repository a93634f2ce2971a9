//! No two modules of a crate here (the library, and the `cchost` binary) use each other,
//! directly or through others: each module sits below everything that uses it, so that it can
//! be read, tested and changed without the modules above it.
//!
//! A module counts with its submodules (`cc` is `cc/mod.rs` and every file below it), and uses
//! another by any path that names it outside comments and the `#[cfg(test)] mod tests` block at
//! a file's end: a `use` (`crate::`, `super::`, `self::` or a submodule's name), an inline
//! `crate::...` or `super::...` path, or an item its parent re-exports (`pub use`), which is
//! followed to where it is defined. A module and its own submodules may use each other (a
//! parent's traits in its algorithms' files, the parent's table of them), as quinn-proto's
//! `congestion` module and its algorithms do; modules beside each other may not in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// A module's path from its crate's root: `["cc", "dcqcn"]`; the root is `[]`.
type ModPath = Vec<String>;

/// One module: its file, and its source without comments, string contents and its tests.
struct Module {
    file: String,
    source: String,
}

/// One crate's modules.
struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

/// Module `from` uses `to`, both beside each other (children of one module), at these sites.
type Edges = BTreeMap<(ModPath, ModPath), Vec<String>>;

impl Crate {
    /// The crate of files `(path from the crate's root folder, source)`: `lib.rs` or `main.rs`
    /// is the root, `x.rs` and `x/mod.rs` module `x`.
    fn new<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Crate {
        let modules = files
            .into_iter()
            .map(|(file, source)| (module_of(file), Module { file: file.to_string(), source: clean(source) }))
            .collect();
        Crate { modules }
    }

    /// The crate whose root file is in `dir` (the folders `skip` names, other crates', left out).
    fn read(dir: &Path, skip: &[&str]) -> Crate {
        let mut files = Vec::new();
        collect(dir, dir, skip, &mut files);
        Crate::new(files.iter().map(|(file, source)| (file.as_str(), source.as_str())))
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.modules.contains_key(path)
    }

    /// The module that defines what `path`, written in module `at`, names (following
    /// re-exports); `None`: it is outside the crate.
    fn resolve(&self, at: &[String], path: &[String], depth: usize) -> Option<ModPath> {
        let mut module = at.to_vec();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                module.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    module.pop()?;
                    rest = &rest[1..];
                }
            }
            // A submodule by its name (2018 paths); anything else is another crate's.
            Some(first) if self.is_module(&[at, &[first.to_string()]].concat()) => {}
            _ => return None,
        }
        while let Some(next) = rest.first() {
            module.push(next.clone());
            if !self.is_module(&module) {
                module.pop();
                break;
            }
            rest = &rest[1..];
        }
        let name = rest.first().filter(|_| depth < 8);
        let reexport = name.and_then(|name| {
            let uses = use_paths(&self.modules[&module].source);
            uses.into_iter().find(|u| u.public && u.name.as_ref() == Some(name))
        });
        match reexport {
            Some(reexport) => self.resolve(&module, &reexport.path, depth + 1),
            None => Some(module),
        }
    }

    /// Every use of a module by another beside it, lifted to the children of the module that
    /// holds both (`cc::dcqcn` using `wire::CnpFlag` is `cc` using `wire`).
    fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (module, Module { file, source }) in &self.modules {
            let used = use_paths(source).into_iter().map(|u| u.path).chain(inline_paths(source));
            for path in used {
                let Some(target) = self.resolve(module, &path, 0) else { continue };
                let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == module.len() || common == target.len() {
                    continue; // the module itself, one of its submodules, or one it is part of
                }
                let pair = (module[..=common].to_vec(), target[..=common].to_vec());
                edges.entry(pair).or_default().push(format!("{file}: {}", path.join("::")));
            }
        }
        edges
    }

    /// The uses that close a circle (what is used leads back to the user), with their sites.
    fn circles(&self) -> Vec<String> {
        let edges = self.edges();
        let reaches = |start: &ModPath, goal: &ModPath| {
            let (mut seen, mut todo) = (BTreeSet::new(), vec![start]);
            while let Some(module) = todo.pop() {
                if module == goal {
                    return true;
                }
                if seen.insert(module) {
                    todo.extend(edges.keys().filter(|(from, _)| from == module).map(|(_, to)| to));
                }
            }
            false
        };
        edges
            .iter()
            .filter(|((from, to), _)| reaches(to, from))
            .map(|((from, to), sites)| {
                let more = if sites.len() > 3 { format!(" and {} more", sites.len() - 3) } else { String::new() };
                let sites = sites[..sites.len().min(3)].join(", ");
                format!("{} -> {} ({sites}{more})", from.join("::"), to.join("::"))
            })
            .collect()
    }
}

fn module_of(file: &str) -> ModPath {
    let mut parts: ModPath = file.trim_end_matches(".rs").split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn collect(root: &Path, dir: &Path, skip: &[&str], files: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        let relative = path.strip_prefix(root).expect("below the root").to_string_lossy().into_owned();
        if skip.contains(&relative.as_str()) {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, skip, files);
        } else if relative.ends_with(".rs") {
            files.push((relative, fs::read_to_string(&path).expect("a source file")));
        }
    }
}

/// `source` without comments, string and char contents, and the test module at its end.
fn clean(source: &str) -> String {
    let body = source.find("#[cfg(test)]\nmod tests").map_or(source, |at| &source[..at]);
    let chars: Vec<char> = body.chars().collect();
    let (mut out, mut i) = (String::new(), 0);
    let skip_to = |from: usize, end: &[char]| {
        let mut i = from;
        while i < chars.len() && !chars[i..].starts_with(end) {
            i += if chars[i] == '\\' && end == ['"'] { 2 } else { 1 };
        }
        i + end.len()
    };
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            i = skip_to(i, &['\n']) - 1;
        } else if rest.starts_with(&['/', '*']) {
            i = skip_to(i + 2, &['*', '/']);
        } else if rest[0] == '"' {
            i = skip_to(i + 1, &['"']);
            out.push_str("\"\"");
        } else if rest[0] == '\'' && (rest.get(2) == Some(&'\'') || rest.get(1) == Some(&'\\')) {
            // A char literal ('x', '\n', '\''); a lifetime ('a) has no closing quote.
            i = if rest[1] == '\\' { skip_to(i + 3, &['\'']) } else { i + 3 };
            out.push_str("' '");
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

/// Where each `use` declaration of `source` is (from `use` to its `;`), and whether it is a
/// re-export (`pub use`).
fn use_declarations(source: &str) -> Vec<(std::ops::Range<usize>, bool)> {
    let mut found = Vec::new();
    for (at, _) in source.match_indices("use ") {
        let before = source[..at].trim_end();
        let public = ["pub", "pub(crate)", "pub(super)"].iter().any(|v| before.ends_with(v));
        let item_start = public || before.is_empty() || before.ends_with([';', '{', '}', ']']);
        let word_start = !source[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        if let (true, true, Some(end)) = (item_start, word_start, source[at..].find(';')) {
            found.push((at..at + end, public));
        }
    }
    found
}

/// One path a `use` brings in, and the name it goes by there (`None`: a glob's).
struct UsePath {
    path: Vec<String>,
    name: Option<String>,
    public: bool,
}

/// The paths of every `use` declaration in `source`, its trees taken apart.
fn use_paths(source: &str) -> Vec<UsePath> {
    let mut found = Vec::new();
    for (range, public) in use_declarations(source) {
        let tree = source[range.start + 4..range.end].split_whitespace().collect::<Vec<_>>().join(" ");
        expand(&[], &tree, public, &mut found);
    }
    found
}

/// Adds the paths of use tree `tree` below `prefix`.
fn expand(prefix: &[String], tree: &str, public: bool, found: &mut Vec<UsePath>) {
    let segments = |path: &str| -> Vec<String> {
        path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
    };
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix = [prefix, &segments(&tree[..open])].concat();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&prefix, &inner[start..i], public, found);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&prefix, &inner[start..], public, found);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim().to_string())),
        None => (tree, None),
    };
    let mut path = [prefix, &segments(path)].concat();
    let name = match path.last().map(String::as_str) {
        Some("*") => {
            path.pop();
            None
        }
        Some("self") => {
            path.pop();
            alias.or_else(|| path.last().cloned())
        }
        _ => alias.or_else(|| path.last().cloned()),
    };
    if !path.is_empty() {
        found.push(UsePath { path, name, public });
    }
}

/// Paths written out in code, outside `use` declarations: `crate::a::b`, `super::a`.
fn inline_paths(source: &str) -> Vec<Vec<String>> {
    let uses = use_declarations(source);
    let mut found = Vec::new();
    for start in ["crate::", "super::"] {
        for (at, _) in source.match_indices(start) {
            let word_start = !source[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
            if word_start && !uses.iter().any(|(range, _)| range.contains(&at)) {
                let text: String =
                    source[at..].chars().take_while(|&c| c.is_alphanumeric() || c == '_' || c == ':').collect();
                found.push(text.split("::").filter(|s| !s.is_empty()).map(String::from).collect());
            }
        }
    }
    found
}

fn transport() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_two_modules_of_the_library_use_each_other() {
    let library = Crate::read(&transport().join("src"), &["bin"]);
    let circles = library.circles();
    assert!(circles.is_empty(), "modules that use each other:\n{}", circles.join("\n"));
    // The check sees what is there: the endpoint runs flows, and flows are controlled by cc;
    // below the top, the files of one folder (the sim's events carry its ports' packets).
    let edges: BTreeSet<_> = library.edges().into_keys().map(|(from, to)| (from.join("::"), to.join("::"))).collect();
    let expected =
        [("endpoint", "flow"), ("flow", "cc"), ("scheme", "cc"), ("types", "wire"), ("sim::events", "sim::port")];
    for (from, to) in expected {
        assert!(edges.contains(&(from.into(), to.into())), "{from} -> {to} not found in {edges:?}");
    }
}

#[test]
fn no_two_modules_of_the_cchost_binary_use_each_other() {
    let binary = Crate::read(&transport().join("src/bin/cchost"), &[]);
    let circles = binary.circles();
    assert!(circles.is_empty(), "modules that use each other:\n{}", circles.join("\n"));
    let edges = binary.edges();
    assert!(edges.contains_key(&(vec!["poller".into()], vec!["clock".into()])), "{:?}", edges.keys());
}

#[test]
fn two_modules_that_use_each_other_are_a_circle() {
    let circles = Crate::new([
        ("lib.rs", "pub mod types;\npub mod wire;"),
        ("types.rs", "use crate::wire::Kind;\npub struct Transmit { kind: Kind }"),
        ("wire.rs", "use std::fmt;\n\nuse crate::types::{CnpFlag, HostId};"),
    ])
    .circles();
    assert_eq!(
        circles,
        [
            "types -> wire (types.rs: crate::wire::Kind)",
            "wire -> types (wire.rs: crate::types::CnpFlag, wire.rs: crate::types::HostId)"
        ]
    );
}

#[test]
fn a_circle_through_others_inline_paths_and_re_exports_is_found() {
    let circles = Crate::new([
        ("lib.rs", "pub mod cc;\npub mod scheme;\npub mod config;\npub use config::Config;"),
        ("cc/mod.rs", "pub mod dctcp;\npub trait Control {}"),
        ("cc/dctcp.rs", "use super::Control;\nuse crate::Config;"),
        ("config.rs", "pub struct Config { registry: crate::scheme::Registry }"),
        ("scheme.rs", "use crate::cc::{self, dctcp::{Dctcp as D}};"),
    ])
    .circles();
    assert_eq!(
        circles,
        [
            "cc -> config (cc/dctcp.rs: crate::Config)",
            "config -> scheme (config.rs: crate::scheme::Registry)",
            "scheme -> cc (scheme.rs: crate::cc, scheme.rs: crate::cc::dctcp::Dctcp)",
        ]
    );
}

#[test]
fn a_module_and_its_submodules_comments_strings_and_tests_make_no_circle() {
    let library = Crate::new([
        ("lib.rs", "pub mod cc;\npub mod wire;\npub use cc::Dctcp;"),
        ("cc/mod.rs", "mod dctcp;\npub use dctcp::Dctcp;\npub trait Control {}\nfn table() { dctcp::new() }"),
        ("cc/dctcp.rs", "use super::Control;\nuse crate::wire::Packet; // not crate::cc\nfn f() { g(\"crate::cc\") }"),
        ("wire.rs", "/* crate::cc */ pub struct Packet;\n\n#[cfg(test)]\nmod tests {\n    use crate::cc::Dctcp;\n}"),
    ]);
    assert_eq!(library.circles(), Vec::<String>::new());
    let edges: Vec<_> = library.edges().into_iter().collect();
    assert_eq!(edges, [((vec!["cc".into()], vec!["wire".into()]), vec!["cc/dctcp.rs: crate::wire::Packet".into()])]);
}
