//! The crate boundaries the architecture draws, checked on the manifests as Cargo reads them:
//! only the actor host applies the run machine's rules, so nothing else links it, directly or
//! through another crate; gateways, the console and the scheduler reach runs through the
//! service layer; the vocabulary every role shares sits in leaf crates.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A workspace's crates and, for each, the names of the crates it depends on, as Cargo reads
/// its manifest: every form (`name = ...`, `[dependencies.name]`, renamed, `[target.*]`), and
/// each with its kind.
struct Workspace {
    dependencies: BTreeMap<String, Vec<Dependency>>,
}

struct Dependency {
    name: String,
    /// `normal`, `build` or `dev`.
    kind: String,
}

impl Workspace {
    fn read(manifest_dir: &Path) -> Workspace {
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
            .current_dir(manifest_dir)
            .output()
            .expect("cargo metadata runs");
        assert!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let mut dependencies = BTreeMap::new();
        for package in metadata["packages"].as_array().unwrap() {
            let declared = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|dependency| Dependency {
                    name: dependency["name"].as_str().unwrap().to_string(),
                    kind: dependency["kind"].as_str().unwrap_or("normal").to_string(),
                })
                .collect();
            dependencies.insert(package["name"].as_str().unwrap().to_string(), declared);
        }
        Workspace { dependencies }
    }

    fn ours() -> Workspace {
        Workspace::read(Path::new(env!("CARGO_MANIFEST_DIR")))
    }

    /// The crates `name` links in a build (normal and build dependencies, not dev), directly or
    /// through another crate of the workspace.
    fn linked_by(&self, name: &str) -> BTreeSet<String> {
        let mut linked = BTreeSet::new();
        let mut next = vec![name.to_string()];
        while let Some(current) = next.pop() {
            for dependency in self.dependencies.get(&current).into_iter().flatten() {
                if dependency.kind != "dev" && linked.insert(dependency.name.clone()) {
                    next.push(dependency.name.clone());
                }
            }
        }
        linked
    }

    /// The workspace's own crates that `name` depends on directly (any kind but dev).
    fn direct_ours(&self, name: &str) -> BTreeSet<String> {
        self.dependencies[name]
            .iter()
            .filter(|dependency| dependency.kind != "dev" && self.dependencies.contains_key(&dependency.name))
            .map(|dependency| dependency.name.clone())
            .collect()
    }
}

#[test]
fn nothing_but_the_actor_host_and_the_binary_links_the_run_machine() {
    let workspace = Workspace::ours();
    let allowed = ["agentprocess-machine", "agentprocess-run-actor", "agentprocess"];
    let mut offenders = Vec::new();
    for name in workspace.dependencies.keys() {
        if !allowed.contains(&name.as_str()) && workspace.linked_by(name).contains("agentprocess-machine") {
            offenders.push(name.clone());
        }
    }
    assert!(
        offenders.is_empty(),
        "these crates link the run machine: {offenders:?}"
    );
    assert!(
        workspace
            .linked_by("agentprocess-run-actor")
            .contains("agentprocess-machine")
    );
}

#[test]
fn gateways_the_console_and_the_scheduler_reach_runs_through_the_service_layer() {
    let workspace = Workspace::ours();
    for role in [
        "agentprocess-gateway",
        "agentprocess-console",
        "agentprocess-scheduler",
    ] {
        let linked = workspace.linked_by(role);
        assert!(linked.contains("agentprocess-service"), "{role}: {linked:?}");
        assert!(
            !linked.contains("agentprocess-run-actor"),
            "{role} links the actor host"
        );
    }
}

#[test]
fn the_gateway_does_not_depend_on_the_console() {
    let workspace = Workspace::ours();
    let linked = workspace.linked_by("agentprocess-gateway");
    assert!(!linked.contains("agentprocess-console"), "{linked:?}");
    let linked = workspace.linked_by("agentprocess");
    assert!(
        linked.contains("agentprocess-console"),
        "the binary mounts the console"
    );
}

#[test]
fn the_service_layer_and_org_state_do_not_depend_on_the_actor_host() {
    let workspace = Workspace::ours();
    for layer in ["agentprocess-service", "agentprocess-org"] {
        let linked = workspace.linked_by(layer);
        assert!(!linked.contains("agentprocess-run-actor"), "{layer}: {linked:?}");
    }
}

#[test]
fn the_ids_the_vocabulary_and_the_store_sit_below_every_protocol_crate() {
    let workspace = Workspace::ours();
    for (leaf, may_use) in [
        ("agentprocess-ids", &[][..]),
        ("agentprocess-vocab", &["agentprocess-ids"][..]),
        ("agentprocess-store", &["agentprocess-ids"][..]),
    ] {
        let ours: Vec<String> = workspace
            .direct_ours(leaf)
            .into_iter()
            .filter(|name| !may_use.contains(&name.as_str()))
            .collect();
        assert!(ours.is_empty(), "{leaf} depends on {ours:?}");
    }
}

/// The reading above sees every way a manifest can name a dependency: a line of its own, a
/// table of its own, and a dependency of one target only.
#[test]
fn every_form_of_a_dependency_counts() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"top\", \"inline\", \"table\", \"unix\", \"deep\"]\nresolver = \"3\"\n",
    );
    for name in ["inline", "table", "unix", "deep"] {
        write(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n"),
        );
        write(&format!("{name}/src/lib.rs"), "");
    }
    write(
        "top/Cargo.toml",
        "[package]\nname = \"top\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [dependencies]\ninline = { path = \"../inline\" }\n\n\
         [dependencies.table]\npath = \"../table\"\n\n\
         [target.'cfg(unix)'.dependencies]\nunix = { path = \"../unix\" }\n",
    );
    write("top/src/lib.rs", "");
    write(
        "unix/Cargo.toml",
        "[package]\nname = \"unix\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [build-dependencies]\ndeep = { path = \"../deep\" }\n",
    );
    let workspace = Workspace::read(dir.path());
    let linked = workspace.linked_by("top");
    let expected: BTreeSet<String> = ["inline", "table", "unix", "deep"].map(String::from).into();
    assert_eq!(linked, expected);
}

/// A crate's modules (one per file: `src/a.rs` or `src/a/mod.rs` is `a`, `src/a/b.rs` is `a::b`)
/// and, at each level of its tree, which sibling modules refer to which: module `x` refers to its
/// sibling `y` when a file in `x`'s subtree names a path into `y`'s (through `crate::` or
/// `super::`). A module and its own ancestors are never siblings, so `use super::Thing` in a
/// child never counts against its parent.
struct ModuleGraph {
    /// For each parent module, each sibling pair `(from, to)` and the file that made it.
    references: BTreeMap<Vec<String>, BTreeSet<(String, String, String)>>,
}

impl ModuleGraph {
    fn of(src: &Path) -> ModuleGraph {
        let mut modules: BTreeMap<Vec<String>, std::path::PathBuf> = BTreeMap::new();
        let mut folders = vec![src.to_path_buf()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|extension| extension == "rs") {
                    let relative = path.strip_prefix(src).unwrap().with_extension("");
                    let mut segments: Vec<String> = relative
                        .iter()
                        .map(|segment| segment.to_string_lossy().into_owned())
                        .collect();
                    if segments == ["lib"]
                        || segments == ["main"]
                        || segments.last().is_some_and(|last| last == "mod")
                    {
                        segments.pop();
                    }
                    modules.insert(segments, path);
                }
            }
        }
        let mut references: BTreeMap<Vec<String>, BTreeSet<(String, String, String)>> = BTreeMap::new();
        for (module, file) in &modules {
            let text = std::fs::read_to_string(file).unwrap();
            for (supers, path) in paths_named(&text) {
                if supers > module.len() {
                    continue;
                }
                let mut full: Vec<String> =
                    if supers == 0 && path.first().is_some_and(|first| first == "crate") {
                        path[1..].to_vec()
                    } else {
                        let mut base = module[..module.len() - supers].to_vec();
                        base.extend(path);
                        base
                    };
                while !modules.contains_key(&full) {
                    full.pop();
                }
                let common = module.iter().zip(&full).take_while(|(a, b)| a == b).count();
                if common < module.len() && common < full.len() {
                    references.entry(module[..common].to_vec()).or_default().insert((
                        module[common].clone(),
                        full[common].clone(),
                        file.strip_prefix(src).unwrap().display().to_string(),
                    ));
                }
            }
        }
        ModuleGraph { references }
    }

    /// Every circle among sibling modules: the parent, the modules in the circle, and the
    /// references that close it.
    fn circles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (parent, pairs) in &self.references {
            let edges: BTreeMap<&str, BTreeSet<&str>> =
                pairs.iter().fold(BTreeMap::new(), |mut edges, (from, to, _)| {
                    edges.entry(from.as_str()).or_default().insert(to.as_str());
                    edges
                });
            let reaches = |from: &str, to: &str| {
                let mut seen = BTreeSet::new();
                let mut next = vec![from];
                while let Some(current) = next.pop() {
                    for &target in edges.get(current).into_iter().flatten() {
                        if target == to {
                            return true;
                        }
                        if seen.insert(target) {
                            next.push(target);
                        }
                    }
                }
                false
            };
            let closing: Vec<String> = pairs
                .iter()
                .filter(|(from, to, _)| reaches(to, from))
                .map(|(from, to, file)| format!("{from} -> {to} ({file})"))
                .collect();
            if !closing.is_empty() {
                let parent = if parent.is_empty() {
                    "the crate root".to_string()
                } else {
                    parent.join("::")
                };
                found.push(format!("under {parent}: {}", closing.join(", ")));
            }
        }
        found
    }
}

/// The paths a file names through `crate::` or `super::` (each with how many `super`s), `use`
/// trees expanded; comments and the `tests` module at the end of a file left out.
fn paths_named(text: &str) -> Vec<(usize, Vec<String>)> {
    let code: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(comment) => &line[..comment],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let code = match code.find("#[cfg(test)]\nmod tests") {
        Some(tests) => &code[..tests],
        None => &code[..],
    };
    let tokens = tokenize(code);
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts_path = (tokens[i] == "crate" || tokens[i] == "super")
            && tokens.get(i + 1).is_some_and(|next| next == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if !starts_path {
            i += 1;
            continue;
        }
        let mut supers = 0;
        let mut prefix = Vec::new();
        if tokens[i] == "crate" {
            prefix.push("crate".to_string());
            i += 2;
        }
        while tokens.get(i).is_some_and(|token| token == "super")
            && tokens.get(i + 1).is_some_and(|next| next == "::")
        {
            supers += 1;
            i += 2;
        }
        let (paths, end) = use_tree(&tokens, i, prefix);
        found.extend(paths.into_iter().map(|path| (supers, path)));
        i = end.max(i + 1);
    }
    found
}

/// Identifiers, `::`, and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = start + c.len_utf8();
            while let Some(&(at, next)) = chars.peek() {
                if next.is_alphanumeric() || next == '_' {
                    end = at + next.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            tokens.push(code[start..end].to_string());
        } else if c == ':' && chars.peek().is_some_and(|&(_, next)| next == ':') {
            chars.next();
            tokens.push("::".to_string());
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    tokens
}

/// The paths of a path or `use` tree starting at `tokens[i]`, each after `prefix`; and where it
/// ends.
fn use_tree(tokens: &[String], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                let mut paths = Vec::new();
                i += 1;
                while i < tokens.len() && tokens[i] != "}" {
                    let (inner, end) = use_tree(tokens, i, path.clone());
                    paths.extend(inner);
                    i = end;
                    if tokens.get(i).is_some_and(|token| token == ",") {
                        i += 1;
                    }
                }
                return (paths, i + 1);
            }
            Some(token) if token.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                path.push(token.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|token| token == "::") {
                    i += 1;
                } else {
                    // `as name` and anything after a path's end is not part of it.
                    if tokens.get(i).is_some_and(|token| token == "as") {
                        i += 2;
                    }
                    return (vec![path], i);
                }
            }
            _ => return (vec![path], i),
        }
    }
}

#[test]
fn neither_the_gateway_nor_the_console_has_an_import_circle() {
    for crate_dir in ["gateway", "console"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir).join("src");
        let circles = ModuleGraph::of(&src).circles();
        assert!(
            circles.is_empty(),
            "{crate_dir} has import circles:\n{}",
            circles.join("\n")
        );
    }
}

/// The reading above finds a circle through a `use` tree, through `super::super::`, and through
/// a path written inline, and does not count a child's use of its parent.
#[test]
fn an_import_circle_is_found_however_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub struct Root;\n");
    write("a/mod.rs", "mod inner;\npub struct A;\n");
    write("a/inner.rs", "use super::A;\nuse crate::{Root, b::{B, other}};\n");
    write("b.rs", "pub struct B;\nfn f() -> crate::c::C { todo!() }\n");
    write("c/mod.rs", "mod deep;\npub struct C;\n");
    let circles = ModuleGraph::of(dir.path()).circles();
    assert!(circles.is_empty(), "no circle yet: {circles:?}");
    write(
        "c/deep.rs",
        "// use crate::b; a comment names nothing\nuse super::super::a::A;\n",
    );
    let circles = ModuleGraph::of(dir.path()).circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    for edge in ["a -> b (a/inner.rs)", "b -> c (b.rs)", "c -> a (c/deep.rs)"] {
        assert!(circles[0].contains(edge), "{edge} in {circles:?}");
    }
}
