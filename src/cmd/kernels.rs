//! `klab kernels`: what the registry holds, grouped by namespace, with each kernel's
//! operation and what it is.

use std::process::ExitCode;

use klab_spec::registry::{self, Visibility};

use crate::cli::KernelsArgs;

pub fn run(args: KernelsArgs) -> anyhow::Result<ExitCode> {
    let mut json = Vec::new();
    for ns in &registry::registry().namespaces {
        let shown = match ns.visibility {
            Visibility::Default => true,
            Visibility::Archive | Visibility::Audit => args.all,
        };
        if !shown {
            continue;
        }
        if !args.json {
            println!("{}/  {}", ns.name, ns.about);
        }
        for k in &ns.manifest.kernels {
            let qualified = format!("{}/{}", ns.name, k.name);
            let about = match (&k.known_broken, &k.prediction) {
                (Some(bug), _) => format!("known broken: {bug}"),
                (None, Some(p)) => format!("predicted: {p}"),
                (None, None) => format!("entry {}", k.entry),
            };
            if args.json {
                json.push(serde_json::json!({
                    "name": qualified,
                    "alias": (ns.visibility == Visibility::Default).then_some(&k.name),
                    "operation": k.operation.name(),
                    "entry": k.entry,
                    "source": ns.manifest.source_path,
                    "known_broken": k.known_broken,
                    "prediction": k.prediction,
                }));
            } else {
                println!("  {qualified:<28} {:<10} {about}", k.operation.name());
            }
        }
        if !args.json {
            println!();
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "Name a kernel by its short name (padded) or its qualified name (transpose/padded); \
archive/ kernels by qualified name only; your own as path/to/manifest.toml[:NAME or GLOB]."
        );
        if !args.all {
            println!("'klab kernels --all' also lists the archive and the audit's mutants.");
        }
    }
    Ok(ExitCode::SUCCESS)
}
