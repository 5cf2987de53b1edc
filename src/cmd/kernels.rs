//! `klab kernels`: what the registry holds, grouped by namespace, with each kernel's
//! operation and what it is.

use std::process::ExitCode;

use klab_spec::registry::{self, Visibility};
use serde::Serialize;

use crate::cli::KernelsArgs;
use crate::output::{self, Report};

/// One kernel as `klab kernels` lists it (fields in the order its JSON has always had them).
#[derive(Serialize)]
struct Row {
    /// The short name, for the namespaces whose kernels have one.
    alias: Option<String>,
    entry: String,
    known_broken: Option<String>,
    name: String,
    operation: &'static str,
    prediction: Option<String>,
    source: String,
}

/// The listing: every shown namespace with its kernels (as JSON, the kernels alone).
#[derive(Serialize)]
#[serde(transparent)]
struct Listing {
    #[serde(serialize_with = "kernels_only")]
    namespaces: Vec<(String, String, Vec<Row>)>,
    #[serde(skip)]
    all: bool,
}

fn kernels_only<S: serde::Serializer>(
    namespaces: &[(String, String, Vec<Row>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(namespaces.iter().flat_map(|(_, _, rows)| rows))
}

impl Report for Listing {
    fn human(&self) -> String {
        let mut out = String::new();
        for (name, about, rows) in &self.namespaces {
            out += &format!("{name}/  {about}\n");
            for r in rows {
                let what = match (&r.known_broken, &r.prediction) {
                    (Some(bug), _) => format!("known broken: {bug}"),
                    (None, Some(p)) => format!("predicted: {p}"),
                    (None, None) => format!("entry {}", r.entry),
                };
                out += &format!("  {:<28} {:<10} {what}\n", r.name, r.operation);
            }
            out.push('\n');
        }
        out +=
            "Name a kernel by its short name (padded) or its qualified name (transpose/padded); \
archive/ kernels by qualified name only; your own as path/to/manifest.toml[:NAME or GLOB].\n";
        if !self.all {
            out += "'klab kernels --all' also lists the archive and the audit's mutants.\n";
        }
        out
    }
}

pub fn run(args: KernelsArgs) -> anyhow::Result<ExitCode> {
    let mut namespaces = Vec::new();
    for ns in &registry::registry().namespaces {
        let shown = match ns.visibility {
            Visibility::Default => true,
            Visibility::Archive | Visibility::Audit => args.all,
        };
        if !shown {
            continue;
        }
        let rows = ns
            .manifest
            .kernels
            .iter()
            .map(|k| Row {
                name: format!("{}/{}", ns.name, k.name),
                alias: (ns.visibility == Visibility::Default).then(|| k.name.clone()),
                operation: k.operation.name(),
                entry: k.entry.clone(),
                source: ns.manifest.source_path.clone(),
                known_broken: k.known_broken.clone(),
                prediction: k.prediction.clone(),
            })
            .collect();
        namespaces.push((ns.name.to_string(), ns.about.to_string(), rows));
    }
    let listing = Listing {
        namespaces,
        all: args.all,
    };
    output::emit(&listing, args.output.format())?;
    Ok(ExitCode::SUCCESS)
}
