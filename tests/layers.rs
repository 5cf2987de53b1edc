//! No import circles between modules. Every `.rs` file of every crate (and of the binary)
//! is a module; a path it names through `crate::` (in a `use` or in code) is an edge to the
//! deepest module that path lands in, and `super::` an edge to its parent's. A circle is a
//! strongly connected set of more than one module: a layer that reaches back up into one
//! above it, which is what makes a change in one place ripple through ten. A module's own
//! tests (`#[cfg(test)] mod tests`) are left out: tests may reach anywhere. A parent module
//! that declares or re-exports its children (`mod raw; pub use raw::...`) names them
//! without `crate::`, and that is not counted: the children are part of it.
//!
//! Configuration travels as values: no module sets an environment variable for its own
//! process (a child's configuration is its command line), and none keeps a result or a policy
//! in a process-wide lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source roots, one per crate.
fn roots() -> Vec<PathBuf> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = vec![top.join("src")];
    for e in std::fs::read_dir(top.join("crates")).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.is_dir() {
            v.push(src);
        }
    }
    v.sort();
    v
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `declared/builtin.rs` -> `declared::builtin`; `ncu/mod.rs` -> `ncu`; the crate root
/// (`lib.rs`, `main.rs`) -> "".
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The text that counts: up to the module's tests, without line comments.
fn code(text: &str) -> String {
    let end = ["#[cfg(test)]\nmod ", "#[cfg(test)]\npub(crate) mod "]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a module's code names from the crate root: `crate::a::b` as `a::b`, the
/// items of `use crate::{a::b, c}` as `a::b` and `c` (nested groups flattened one level),
/// and `super::x` from module `m::n` as `m::x`.
fn named_paths(module: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let inner = &group[..group.find("};").unwrap_or(group.len())];
            for item in inner.split(',') {
                let p: String = item.trim().chars().take_while(|&c| word(c)).collect();
                if !p.is_empty() {
                    out.push(p.trim_end_matches(':').to_string());
                }
            }
        } else {
            let p: String = after.chars().take_while(|&c| word(c)).collect();
            out.push(p.trim_end_matches(':').to_string());
        }
        rest = after;
    }
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let after = &rest[i + "super::".len()..];
        // `super::super::` and the like: only the first step up is followed.
        let p: String = after.chars().take_while(|&c| word(c)).collect();
        let p = p.trim_end_matches(':');
        out.push(match parent {
            "" => p.to_string(),
            _ => format!("{parent}::{p}"),
        });
        rest = after;
    }
    out
}

/// The deepest module of `modules` that `path` lands in (None: the crate root or an item
/// of it).
fn landing(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains(m))
}

/// The import graph of the crate under `root`.
fn graph(root: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(root, f))
        .filter(|m| !m.is_empty())
        .collect();
    let mut g = Graph::new();
    for f in &files {
        let m = module_of(root, f);
        if m.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let edges = g.entry(m.clone()).or_default();
        for p in named_paths(&m, &code(&text)) {
            if let Some(to) = landing(&p, &modules) {
                if to != m {
                    edges.insert(to);
                }
            }
        }
    }
    g
}

/// The strongly connected sets of more than one node (Tarjan), each sorted.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                set.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut found = Vec::new();
    for root in roots() {
        let g = graph(&root);
        assert!(g.len() > 1 || root.ends_with("src"), "{}", root.display());
        for c in circles(&g) {
            let edges: Vec<String> = c
                .iter()
                .map(|m| {
                    let to: Vec<&str> = g[m]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", to.join(", "))
                })
                .collect();
            found.push(format!("{}: {}", root.display(), edges.join("; ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// What configuration hidden in process state looks like in code: `what` if `code` has it.
fn hidden_state(code: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    for (pattern, what) in [
        ("set_var(", "sets an environment variable"),
        ("remove_var(", "removes an environment variable"),
    ] {
        if code.contains(pattern) {
            found.push(what);
        }
    }
    let global_lock = code.lines().any(|l| {
        let l = l.trim_start();
        (l.starts_with("static ") || l.starts_with("pub static "))
            && (l.contains("Mutex<") || l.contains("RwLock<"))
    });
    if global_lock {
        found.push("keeps state in a static lock");
    }
    found
}

#[test]
fn configuration_travels_as_values_not_through_process_state() {
    let mut found = Vec::new();
    for root in roots() {
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for what in hidden_state(&code(&text)) {
                found.push(format!("{}: {what}", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn hidden_state_is_recognised() {
    assert_eq!(
        hidden_state("    std::env::set_var(\"KLAB_X\", \"1\");"),
        ["sets an environment variable"]
    );
    assert_eq!(
        hidden_state("static RESULT: Mutex<Option<R>> = Mutex::new(None);"),
        ["keeps state in a static lock"]
    );
    assert!(
        hidden_state("let m = Mutex::new(1);\nstatic N: AtomicU64 = AtomicU64::new(0);").is_empty()
    );
}

#[test]
fn the_circle_finder_finds_circles_and_only_circles() {
    let g: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec![]),
        ("e", vec!["d", "f"]),
        ("f", vec!["e"]),
        ("g", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let mut found = circles(&g);
    found.sort();
    assert_eq!(found, vec![vec!["a", "b", "c"], vec!["e", "f"]]);
    let dag: Graph = [("a", vec!["b"]), ("b", vec![])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
    assert!(circles(&dag).is_empty());
}

#[test]
fn paths_land_in_the_deepest_module_and_super_in_the_parent() {
    let modules: BTreeSet<String> = ["declared", "declared::builtin", "ncu", "ncu::raw"]
        .into_iter()
        .map(String::from)
        .collect();
    let source = "use crate::declared::builtin::{OpKind, Param};\n\
                use crate::{declared::BufferSpec, ncu};\n\
                let x = crate::declared::builtin::declare(&c);\n\
                use super::raw::scan;\n";
    let landed: BTreeSet<String> = named_paths("ncu::details", source)
        .iter()
        .filter_map(|p| landing(p, &modules))
        .collect();
    let want: BTreeSet<String> = ["declared", "declared::builtin", "ncu", "ncu::raw"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(landed, want);
    // Comments and a module's own tests name nothing.
    let text = "// use crate::ncu::raw;\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::declared;\n}\n";
    assert!(named_paths("m", &code(text)).is_empty());
}

/// klab's crates from the bottom up. A crate may depend on crates before it here and never
/// on one after it: the facts (`klab-core`), the operation as data (`klab-spec`), the
/// address model, the engine that runs and judges an operation, the evidence it leaves, the
/// GPU, the external tools, then how a kernel is run and its receipt made (`klab-run`), the
/// report, the lab and the binary. Cargo refuses a cycle between crates; this keeps the
/// order, so the spec never reaches the engine and the engine never reaches the evidence
/// written about it.
const CRATE_ORDER: [&str; 11] = [
    "klab-core",
    "klab-spec",
    "klab-model",
    "klab-engine",
    "klab-evidence",
    "klab-cuda",
    "klab-tools",
    "klab-run",
    "klab-report",
    "klab-lab",
    "klab",
];

/// The klab crates a manifest's `[dependencies]` names (dev-dependencies may reach anywhere,
/// as a module's own tests may).
fn klab_dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && line.starts_with("klab-") {
            let name = line.split(['.', ' ', '=']).next().unwrap_or_default();
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_crate_depends_only_on_crates_below_it() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = BTreeSet::new();
    let mut wrong = Vec::new();
    for (i, name) in CRATE_ORDER.iter().enumerate() {
        let dir = if *name == "klab" {
            top.to_path_buf()
        } else {
            top.join("crates").join(name)
        };
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for dep in klab_dependencies(&manifest) {
            if !CRATE_ORDER[..i].contains(&dep.as_str()) {
                wrong.push(format!("{name} depends on {dep}, which is not below it"));
            }
        }
        seen.insert(name.to_string());
    }
    for e in std::fs::read_dir(top.join("crates")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            seen.contains(&name),
            "crates/{name} is not in CRATE_ORDER: place it in the layers"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_dependency_above_is_recognised() {
    let m = "[package]\nname = \"x\"\n[dependencies]\nklab-core.workspace = true\nklab-engine = { workspace = true }\nserde = \"1\"\n[dev-dependencies]\nklab-lab.workspace = true\n";
    assert_eq!(klab_dependencies(m), ["klab-core", "klab-engine"]);
}

/// A command reports through src/output.rs, which renders one value per format: no
/// command module prints JSON on stdout itself (five once did, each its own way).
#[test]
fn commands_print_their_reports_through_the_output_sinks() {
    let cmd = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    let mut files = Vec::new();
    rust_files(&cmd, &mut files);
    assert!(files.len() > 10, "{files:?}");
    let mut printing = Vec::new();
    for f in files {
        let text = code(&std::fs::read_to_string(&f).unwrap());
        for statement in text.split(';') {
            if (statement.contains("println!") || statement.contains("print!"))
                && statement.contains("serde_json")
            {
                printing.push(format!("{}: {}", f.display(), statement.trim()));
            }
        }
    }
    assert!(printing.is_empty(), "{printing:#?}");
}

/// The commands with a report print nothing on stdout but it: their text comes from the
/// report's human printer like their JSON and CSV, so a `--format` cannot miss a line.
/// (The lab drivers' reports are the labs' own lines, rendered like any other; `check`
/// relays its children's stdout through one sink of its own.)
#[test]
fn commands_with_a_report_print_only_through_the_sinks() {
    let cmd = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    let mut printing = Vec::new();
    for name in [
        "bench",
        "rounds",
        "sweep",
        "audit",
        "sanitize",
        "profile",
        "model",
        "compare",
        "env",
        "kernels",
        "transpose",
        "triad",
        "reduce_lab",
    ] {
        // A command is a file, or a folder of them.
        let file = cmd.join(format!("{name}.rs"));
        let mut files = Vec::new();
        if file.is_file() {
            files.push(file);
        } else {
            rust_files(&cmd.join(name), &mut files);
        }
        assert!(!files.is_empty(), "no code for {name}");
        for f in files {
            let text = code(&std::fs::read_to_string(&f).unwrap());
            for statement in text.split(';') {
                let s = statement.replace("eprintln!", "").replace("eprint!", "");
                if s.contains("println!") || s.contains("print!") {
                    printing.push(format!("{}: {}", f.display(), statement.trim()));
                }
            }
        }
    }
    assert!(printing.is_empty(), "{printing:#?}");
}
