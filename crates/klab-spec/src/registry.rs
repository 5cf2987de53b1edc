//! The kernel registry: every built-in manifest under a namespace, parsed once, and what a
//! user typed turned into [`KernelRef`]s that survive into every child process.
//!
//! A built-in kernel has a qualified name `NAMESPACE/NAME` (`transpose/padded`,
//! `fast/lean_64_cm`) and, in the default namespaces, a unique short alias (`padded`). The
//! exploration variants that lost (`archive/…`) answer only to their qualified name, and the
//! audit's mutants (`mutants/…`) only inside the audit ([`Scope::Audit`]).
//!
//! A user's kernel is `path.toml` (every kernel in it), `path.toml:name` or
//! `path.toml:glob*`; its [`KernelRef`] carries the manifest's absolute path, so a child
//! started from another folder loads the same file. A user kernel whose name is a built-in's
//! is refused with both names: klab keys rows, folders and receipts by name, and a silent
//! substitution of one for the other is the failure this type exists to prevent.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::builtin;
use crate::manifest::{self, KernelDecl, Manifest, ManifestError};

/// Which built-in namespaces a lookup may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The labs, the fast transposes and (by qualified name) the archive.
    Default,
    /// Also the mutation audit's mutants.
    Audit,
}

/// How a namespace is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Short aliases and qualified names.
    Default,
    /// Qualified names only (`archive/reg2_64`).
    Archive,
    /// Only in [`Scope::Audit`].
    Audit,
}

/// One built-in manifest and its place in the registry.
pub struct Namespace {
    pub name: &'static str,
    pub visibility: Visibility,
    /// What the namespace holds, for `klab kernels`.
    pub about: &'static str,
    pub manifest: Manifest,
}

/// Every built-in manifest, parsed once.
pub struct Registry {
    pub namespaces: Vec<Namespace>,
}

/// A kernel as the user named it, resolved to where it is declared.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelRef {
    /// A built-in kernel by namespace and name.
    Builtin { namespace: String, name: String },
    /// A kernel of a user manifest, by the manifest's absolute path.
    Manifest { path: PathBuf, name: String },
}

impl KernelRef {
    /// The kernel's own name: what rows, folders and receipts are keyed by.
    pub fn name(&self) -> &str {
        match self {
            KernelRef::Builtin { name, .. } | KernelRef::Manifest { name, .. } => name,
        }
    }

    /// The text that resolves back to exactly this kernel, from any folder: what a child
    /// process is given.
    pub fn spec(&self) -> String {
        match self {
            KernelRef::Builtin { namespace, name } => format!("{namespace}/{name}"),
            KernelRef::Manifest { path, name } => format!("{}:{name}", path.display()),
        }
    }

    /// Load the manifest and the kernel's declaration.
    pub fn load(&self) -> Result<(Manifest, KernelDecl), RegistryError> {
        self.load_with(&mut ManifestsRead::new())
    }

    /// [`Self::load`], reading a user manifest only if `read` does not hold it yet: one
    /// read of a manifest however many of its kernels are loaded (reading it once per
    /// kernel made a manifest of N kernels cost N^2).
    pub fn load_with(
        &self,
        read: &mut ManifestsRead,
    ) -> Result<(Manifest, KernelDecl), RegistryError> {
        match self {
            KernelRef::Builtin { namespace, name } => {
                let ns = registry()
                    .namespace(namespace)
                    .ok_or_else(|| unknown(&self.spec(), Scope::Audit))?;
                let k = ns
                    .manifest
                    .kernels
                    .iter()
                    .find(|k| &k.name == name)
                    .ok_or_else(|| unknown(&self.spec(), Scope::Audit))?;
                Ok((ns.manifest.clone(), k.clone()))
            }
            KernelRef::Manifest { path, name } => {
                let m = match read.get(path) {
                    Some(m) => m.clone(),
                    None => {
                        let m = manifest::load(path)?;
                        read.insert(path.clone(), m.clone());
                        m
                    }
                };
                let k = m
                    .kernels
                    .iter()
                    .find(|k| &k.name == name)
                    .cloned()
                    .ok_or_else(|| RegistryError::NoMatch {
                        manifest: path.display().to_string(),
                        pattern: name.clone(),
                        names: m.kernels.iter().map(|k| k.name.clone()).collect(),
                    })?;
                Ok((m, k))
            }
        }
    }
}

/// User manifests already read, by absolute path ([`KernelRef::load_with`]).
pub type ManifestsRead = std::collections::BTreeMap<PathBuf, Manifest>;

/// Why a kernel name does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("unknown kernel '{name}'{}; 'klab kernels' lists them", closest_text(.closest))]
    Unknown { name: String, closest: Vec<String> },
    #[error("manifest {manifest}: no kernel matches '{pattern}' (it declares {})", .names.join(", "))]
    NoMatch {
        manifest: String,
        pattern: String,
        names: Vec<String>,
    },
    #[error("kernel '{name}' of {manifest} has the name of the built-in {builtin}; rename it in the manifest (klab keys results by kernel name)")]
    Collision {
        name: String,
        manifest: String,
        builtin: String,
    },
    #[error("kernel '{name}' is named twice: {first} and {second}")]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
    #[error("'{name}' is one of the audit's kernels (a mutant or an exploit); only 'klab audit' runs them")]
    AuditOnly { name: String },
    #[error("'{spec}' names {} kernels ({}); this command takes one", .names.len(), .names.join(", "))]
    NotOne { spec: String, names: Vec<String> },
}

fn closest_text(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!(" (closest: {})", closest.join(", "))
    }
}

fn unknown(name: &str, scope: Scope) -> RegistryError {
    RegistryError::Unknown {
        name: name.to_string(),
        closest: registry().closest(name, scope, 3),
    }
}

/// The one registry of built-in kernels.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::builtin)
}

impl Registry {
    fn builtin() -> Registry {
        let table: [(&str, Visibility, &str, &str, &str, &str); 7] = [
            (
                "transpose",
                Visibility::Default,
                "the transpose lab: copy, naive, tiled, padded and a known race",
                include_str!("../../../kernels/transpose.toml"),
                builtin::TRANSPOSE_PATH,
                builtin::TRANSPOSE_SOURCE,
            ),
            (
                "triad",
                Visibility::Default,
                "the triad lab: y = alpha x + z and its off-by-one",
                include_str!("../../../kernels/triad.toml"),
                builtin::TRIAD_PATH,
                builtin::TRIAD_SOURCE,
            ),
            (
                "reduce",
                Visibility::Default,
                "the reduction lab: a block-tree sum, guarded and dropping its tail",
                include_str!("../../../kernels/reduce.toml"),
                builtin::REDUCE_PATH,
                builtin::REDUCE_SOURCE,
            ),
            (
                "fast",
                Visibility::Default,
                "transposes at the copy limit, the 16-byte copy ceiling, memcpy and cuBLAS sgeam",
                include_str!("../../../kernels/fast.toml"),
                builtin::FAST_PATH,
                builtin::FAST_SOURCE,
            ),
            (
                "archive",
                Visibility::Archive,
                "exploration variants that lost (notes/transpose-fast.md); qualified names only",
                include_str!("../../../kernels/archive.toml"),
                builtin::FAST_PATH,
                builtin::FAST_SOURCE,
            ),
            (
                "mutants",
                Visibility::Audit,
                "the mutation audit's labelled bugs; only 'klab audit' runs them",
                include_str!("../../../kernels/mutants.toml"),
                builtin::MUTANTS_PATH,
                builtin::MUTANTS_SOURCE,
            ),
            (
                "exploits",
                Visibility::Audit,
                "the exploit audit's cheating kernels and their honest controls; only 'klab audit' runs them",
                include_str!("../../../kernels/exploits.toml"),
                builtin::EXPLOITS_PATH,
                builtin::EXPLOITS_SOURCE,
            ),
        ];
        let namespaces = table
            .into_iter()
            .map(|(name, visibility, about, text, path, source)| Namespace {
                name,
                visibility,
                about,
                manifest: manifest::parse(
                    &format!("builtin:{name}"),
                    text,
                    manifest::Files::Given(&|_| Ok((path.to_string(), source.as_bytes().to_vec()))),
                )
                .expect("built-in manifests parse"),
            })
            .collect();
        Registry { namespaces }
    }

    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.iter().find(|n| n.name == name)
    }

    fn visible(&self, scope: Scope) -> impl Iterator<Item = &Namespace> {
        self.namespaces
            .iter()
            .filter(move |n| scope == Scope::Audit || n.visibility != Visibility::Audit)
    }

    /// One name per kernel a scope can see: the short alias where it has one, else the
    /// qualified name.
    fn names(&self, scope: Scope) -> Vec<String> {
        let mut v = Vec::new();
        for ns in self.visible(scope) {
            for k in &ns.manifest.kernels {
                v.push(match ns.visibility {
                    Visibility::Default => k.name.clone(),
                    _ => format!("{}/{}", ns.name, k.name),
                });
            }
        }
        v
    }

    /// The `count` names nearest to `name` (edit distance), nearest first.
    pub fn closest(&self, name: &str, scope: Scope, count: usize) -> Vec<String> {
        let mut scored: Vec<(usize, String)> = self
            .names(scope)
            .into_iter()
            .map(|n| {
                // A qualified name is as near as its own kernel name: `reg2_64` finds
                // `archive/reg2_64`.
                let short = n.rsplit('/').next().unwrap_or(&n);
                let d = edit_distance(name, &n).min(edit_distance(name, short));
                (d, n)
            })
            .collect();
        scored.sort();
        scored.dedup_by(|a, b| a.1 == b.1);
        scored.into_iter().take(count).map(|(_, n)| n).collect()
    }

    /// The built-in a user kernel's name would be confused with, if any: a kernel of the same
    /// name in any namespace (the archive and the mutants included), or `transpose_NAME`,
    /// the entry-point alias of the transpose lab's kernels.
    pub(crate) fn builtin_named(&self, short: &str) -> Option<KernelRef> {
        self.namespaces.iter().find_map(|ns| {
            ns.manifest
                .kernels
                .iter()
                .find(|k| {
                    k.name == short
                        || (ns.name == "transpose"
                            && short.strip_prefix("transpose_") == Some(k.name.as_str()))
                })
                .map(|k| KernelRef::Builtin {
                    namespace: ns.name.to_string(),
                    name: k.name.clone(),
                })
        })
    }

    /// Resolve a built-in name: `ns/name`, `ns/glob*`, or a short alias.
    fn builtin_refs(&self, spec: &str, scope: Scope) -> Result<Vec<KernelRef>, RegistryError> {
        if let Some((ns_name, pattern)) = spec.split_once('/') {
            let ns = self
                .namespace(ns_name)
                .ok_or_else(|| unknown(spec, scope))?;
            if ns.visibility == Visibility::Audit && scope != Scope::Audit {
                return Err(RegistryError::AuditOnly {
                    name: spec.to_string(),
                });
            }
            let found: Vec<KernelRef> = ns
                .manifest
                .kernels
                .iter()
                .filter(|k| glob_match(pattern, &k.name))
                .map(|k| KernelRef::Builtin {
                    namespace: ns.name.to_string(),
                    name: k.name.clone(),
                })
                .collect();
            return if found.is_empty() {
                Err(unknown(spec, scope))
            } else {
                Ok(found)
            };
        }
        // `transpose_tiled` is the entry point's name for the transpose lab's `tiled`.
        let lab_alias = spec.strip_prefix("transpose_");
        for ns in self.visible(scope) {
            if ns.visibility == Visibility::Archive {
                continue;
            }
            if let Some(k) = ns.manifest.kernels.iter().find(|k| {
                k.name == spec || (ns.name == "transpose" && lab_alias == Some(k.name.as_str()))
            }) {
                return Ok(vec![KernelRef::Builtin {
                    namespace: ns.name.to_string(),
                    name: k.name.clone(),
                }]);
            }
        }
        if scope == Scope::Default {
            if let Some(ns) = self
                .namespaces
                .iter()
                .find(|ns| ns.visibility == Visibility::Audit)
            {
                if ns.manifest.kernels.iter().any(|k| k.name == spec) {
                    return Err(RegistryError::AuditOnly {
                        name: spec.to_string(),
                    });
                }
            }
        }
        Err(unknown(spec, scope))
    }
}

/// What the user typed, as kernel references: a built-in name or alias, `ns/glob*`,
/// `path.toml` (every kernel in it), `path.toml:name` or `path.toml:glob*`. Relative
/// manifest paths are taken from the current folder and made absolute.
pub fn expand(spec: &str, scope: Scope) -> Result<Vec<KernelRef>, RegistryError> {
    let spec = spec.trim();
    let Some((path, pattern)) = manifest_spec(spec) else {
        return registry().builtin_refs(spec, scope);
    };
    let path = absolute(Path::new(path));
    let m = manifest::load(&path)?;
    let chosen: Vec<&KernelDecl> = m
        .kernels
        .iter()
        .filter(|k| pattern.is_none_or(|p| glob_match(p, &k.name)))
        .collect();
    if chosen.is_empty() {
        return Err(RegistryError::NoMatch {
            manifest: path.display().to_string(),
            pattern: pattern.unwrap_or("").to_string(),
            names: m.kernels.iter().map(|k| k.name.clone()).collect(),
        });
    }
    chosen
        .into_iter()
        .map(|k| {
            if let Some(b) = registry().builtin_named(&k.name) {
                return Err(RegistryError::Collision {
                    name: k.name.clone(),
                    manifest: path.display().to_string(),
                    builtin: b.spec(),
                });
            }
            Ok(KernelRef::Manifest {
                path: path.clone(),
                name: k.name.clone(),
            })
        })
        .collect()
}

/// Split a spec that names a manifest (it holds `.toml`) into its path and kernel pattern: a
/// file that exists (`path` alone, even `a.toml:b/k.toml`), else `path:pattern` where `path`
/// exists (so `mine.toml.bak:a` and the specs [`KernelRef::spec`] writes round-trip), else
/// the split at the last `.toml:` (whose missing file is then the error). `None`: a built-in.
fn manifest_spec(spec: &str) -> Option<(&str, Option<&str>)> {
    // A manifest is named by its .toml path: a file that happens to be called `padded` in
    // the current folder never shadows the built-in.
    if !spec.contains(".toml") {
        return None;
    }
    if Path::new(spec).is_file() {
        return Some((spec, None));
    }
    if let Some((p, n)) = spec.rsplit_once(':') {
        if Path::new(p).is_file() {
            return Some((p, Some(n)));
        }
    }
    Some(match spec.rsplit_once(".toml:") {
        Some((p, n)) => (&spec[..p.len() + 5], Some(n)),
        None => (spec, None),
    })
}

/// Expand every spec of a command line; the same kernel named twice, or two kernels of one
/// name, is an error naming both.
pub fn expand_all(specs: &[String], scope: Scope) -> Result<Vec<KernelRef>, RegistryError> {
    let mut out: Vec<KernelRef> = Vec::new();
    for s in specs {
        for r in expand(s, scope)? {
            if let Some(prev) = out.iter().find(|p| p.name() == r.name()) {
                return Err(RegistryError::Duplicate {
                    name: r.name().to_string(),
                    first: prev.spec(),
                    second: r.spec(),
                });
            }
            out.push(r);
        }
    }
    Ok(out)
}

/// Exactly one kernel from a spec (a glob or a whole manifest must name one).
pub fn expand_one(spec: &str, scope: Scope) -> Result<KernelRef, RegistryError> {
    let mut v = expand(spec, scope)?;
    if v.len() == 1 {
        return Ok(v.remove(0));
    }
    let names: Vec<String> = v.iter().map(|r| r.name().to_string()).collect();
    Err(RegistryError::NotOne {
        spec: spec.to_string(),
        names,
    })
}

/// Exactly one kernel, loaded: its manifest and declaration.
pub fn resolve(spec: &str, scope: Scope) -> Result<(Manifest, KernelDecl), RegistryError> {
    expand_one(spec, scope)?.load()
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `*` matches any run of characters, `?` one; everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "extern \"C\" __global__ void k(float* o, const float* i, int n) {}";
    const OK: &str = "entry = \"k\"\noperation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8]\nelements_per_block = [32, 32]\n";

    fn user_manifest(dir: &Path, file: &str, names: &[&str]) -> PathBuf {
        std::fs::write(dir.join("k.cu"), SRC).unwrap();
        let mut text = "source = \"k.cu\"\n".to_string();
        for n in names {
            text.push_str(&format!("[[kernel]]\nname = \"{n}\"\n{OK}"));
        }
        let p = dir.join(file);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn short_aliases_are_unique_across_the_default_namespaces() {
        let mut seen = std::collections::BTreeMap::new();
        for ns in &registry().namespaces {
            for k in &ns.manifest.kernels {
                if let Some(prev) = seen.insert(k.name.clone(), ns.name) {
                    panic!("{} is in both {prev} and {}", k.name, ns.name);
                }
            }
        }
    }

    #[test]
    fn aliases_and_qualified_names_resolve_to_one_builtin() {
        let p = expand_one("padded", Scope::Default).unwrap();
        assert_eq!(p.spec(), "transpose/padded");
        assert_eq!(expand_one("transpose/padded", Scope::Default).unwrap(), p);
        assert_eq!(expand_one("transpose_padded", Scope::Default).unwrap(), p);
        assert_eq!(
            expand_one("lean_64_cm", Scope::Default).unwrap().spec(),
            "fast/lean_64_cm"
        );
        let (_, d) = p.load().unwrap();
        assert_eq!(d.entry, "transpose_padded");
        // A glob over a namespace.
        let lab = expand("transpose/*", Scope::Default).unwrap();
        assert_eq!(lab.len(), 5);
    }

    #[test]
    fn archived_kernels_answer_only_to_their_qualified_name() {
        let e = expand("reg2_64", Scope::Default).unwrap_err();
        assert!(
            matches!(&e, RegistryError::Unknown { closest, .. } if closest.iter().any(|c| c == "archive/reg2_64")),
            "{e}"
        );
        let r = expand_one("archive/reg2_64", Scope::Default).unwrap();
        assert_eq!(r.load().unwrap().1.entry, "transpose_reg2_64");
    }

    #[test]
    fn mutants_are_visible_only_to_the_audit() {
        for spec in ["mut_wild_store", "mutants/mut_wild_store"] {
            let e = expand(spec, Scope::Default).unwrap_err();
            assert!(matches!(e, RegistryError::AuditOnly { .. }), "{e}");
            assert!(e.to_string().contains("klab audit"), "{e}");
        }
        let r = expand_one("mut_wild_store", Scope::Audit).unwrap();
        assert_eq!(r.spec(), "mutants/mut_wild_store");
        assert!(r.load().unwrap().1.known_broken.is_some());
        // Unknown-name suggestions never point at a mutant outside the audit.
        assert!(registry()
            .closest("mut_wild", Scope::Default, 3)
            .iter()
            .all(|c| !c.contains("mut_")));
    }

    #[test]
    fn an_unknown_name_gets_one_line_with_the_three_closest() {
        let e = expand("tiledd", Scope::Default).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown kernel 'tiledd' (closest: tiled, naive, padded); 'klab kernels' lists them"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_user_kernel_named_like_a_builtin_is_refused_naming_both() {
        let d = tempfile::tempdir().unwrap();
        let p = user_manifest(d.path(), "mine.toml", &["tiled", "a"]);
        let e = expand(&format!("{}:tiled", p.display()), Scope::Default).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("transpose/tiled"), "{text}");
        assert!(text.contains(&p.display().to_string()), "{text}");
        // So are the transpose lab's entry-point alias, an archived and a mutant's name.
        for (name, builtin) in [
            ("transpose_tiled", "transpose/tiled"),
            ("reg2_64", "archive/reg2_64"),
            ("mut_wild_store", "mutants/mut_wild_store"),
        ] {
            let q = user_manifest(d.path(), &format!("{name}.toml"), &[name]);
            let e = expand(&q.display().to_string(), Scope::Default).unwrap_err();
            assert!(e.to_string().contains(builtin), "{name}: {e}");
        }
        // The glob that takes it in is refused too; the other kernel alone is fine.
        assert!(expand(&format!("{}:*", p.display()), Scope::Default).is_err());
        assert_eq!(
            expand_one(&format!("{}:a", p.display()), Scope::Default)
                .unwrap()
                .name(),
            "a"
        );
    }

    /// The kernels of one manifest, loaded together, come from one read of it: a second
    /// kernel loaded after the file changed is the first read's.
    #[test]
    fn kernels_loaded_together_read_their_manifest_once() {
        let d = tempfile::tempdir().unwrap();
        let p = user_manifest(d.path(), "two.toml", &["a", "b"]);
        let refs = expand(&p.display().to_string(), Scope::Default).unwrap();
        let mut read = ManifestsRead::new();
        let (first, _) = refs[0].load_with(&mut read).unwrap();
        std::fs::write(&p, "not a manifest").unwrap();
        let (second, b) = refs[1].load_with(&mut read).unwrap();
        assert_eq!((second, b.name.as_str()), (first, "b"));
        assert!(refs[1].load().is_err(), "a load of its own reads the file");
    }

    #[test]
    fn user_refs_carry_an_absolute_path_that_survives_a_change_of_folder() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("my kernels");
        std::fs::create_dir_all(&sub).unwrap();
        let p = user_manifest(&sub, "two.toml", &["a", "b", "c2"]);
        let all = expand(&p.display().to_string(), Scope::Default).unwrap();
        assert_eq!(
            all.iter().map(|r| r.name()).collect::<Vec<_>>(),
            ["a", "b", "c2"]
        );
        let globbed = expand(&format!("{}:?", p.display()), Scope::Default).unwrap();
        assert_eq!(globbed.len(), 2);
        let r = &all[1];
        assert!(r.spec().starts_with('/') && r.spec().contains("my kernels"));
        // The spec resolves to the same reference again, from anywhere.
        assert_eq!(&expand_one(&r.spec(), Scope::Default).unwrap(), r);
        assert_eq!(r.load().unwrap().1.name, "b");
        let e = expand(&format!("{}:zz*", p.display()), Scope::Default).unwrap_err();
        assert!(e.to_string().contains("declares a, b, c2"), "{e}");
    }

    #[test]
    fn any_existing_manifest_file_name_round_trips_through_its_spec() {
        let d = tempfile::tempdir().unwrap();
        let p = user_manifest(d.path(), "mine.toml.bak", &["a", "b"]);
        let all = expand(&p.display().to_string(), Scope::Default).unwrap();
        assert_eq!(all.len(), 2);
        for r in &all {
            assert_eq!(&expand_one(&r.spec(), Scope::Default).unwrap(), r);
        }
        // A folder whose name holds ".toml:" does not split the path.
        let odd = d.path().join("a.toml:b");
        std::fs::create_dir_all(&odd).unwrap();
        let q = user_manifest(&odd, "k.toml", &["k"]);
        assert_eq!(
            expand_one(&q.display().to_string(), Scope::Default)
                .unwrap()
                .name(),
            "k"
        );
        assert_eq!(
            expand_one(&format!("{}:k", q.display()), Scope::Default)
                .unwrap()
                .name(),
            "k"
        );
        // The entry-point alias belongs to the transpose lab only.
        assert!(expand("transpose_triad_f32", Scope::Default).is_err());
    }

    #[test]
    fn the_same_name_twice_on_one_command_line_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p1 = user_manifest(d.path(), "one.toml", &["a"]);
        std::fs::create_dir_all(d.path().join("x")).unwrap();
        let p2 = user_manifest(&d.path().join("x"), "two.toml", &["a"]);
        let e = expand_all(
            &[p1.display().to_string(), p2.display().to_string()],
            Scope::Default,
        )
        .unwrap_err();
        assert!(matches!(e, RegistryError::Duplicate { .. }), "{e}");
        let e = expand_all(
            &["padded".into(), "transpose/padded".into()],
            Scope::Default,
        )
        .unwrap_err();
        assert!(e.to_string().contains("named twice"), "{e}");
    }

    #[test]
    fn globs_match_as_shells_do() {
        assert!(glob_match("*", ""));
        assert!(glob_match("lean*", "lean_64_cm"));
        assert!(glob_match("*_cm", "lean_64_cm"));
        assert!(glob_match("l?an*cm", "lean_64_cm"));
        assert!(!glob_match("lean", "lean_64"));
        assert!(!glob_match("*x", "lean"));
        assert_eq!(edit_distance("tiledd", "tiled"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
