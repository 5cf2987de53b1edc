//! Helpers for tests of the crates above: built only for this crate's own tests and, through
//! the `test-support` feature, for the tests of crates that ask for it (as dev-dependency).
//! Nothing here is part of what klab does; a helper may panic on input a test did not mean.

use std::collections::BTreeSet;

use klab_core::dtype::Dtype;

use crate::declared::DeclaredOp;
use crate::registry::{resolve, Scope};

/// The operation of a built-in kernel, by name.
pub fn op_of(name: &str) -> DeclaredOp {
    let (_, d) = resolve(name, Scope::Audit).unwrap();
    (*d.op).clone()
}

/// A CUDA source of empty kernels with the signatures `manifest`'s declared kernels take
/// (inputs behind `const`), for tests whose subject is not the source.
pub fn stand_in_source(manifest: &str) -> String {
    let v: toml::Value = toml::from_str(manifest).expect("a test manifest parses");
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    for k in v["kernel"].as_array().expect("[[kernel]]") {
        let op = match &k.get("op") {
            Some(toml::Value::String(name)) => &v["ops"][name.as_str()],
            Some(t) => t,
            None => continue,
        };
        // A sequence's kernels are its launches'.
        let launches = match k.get("launches") {
            Some(l) => l.as_array().expect("launches").iter().collect(),
            None => vec![k],
        };
        for l in launches {
            // A kernel that names no entry (a test of that refusal) has no stand-in.
            let Some(entry) = l.get("entry").and_then(|e| e.as_str()) else {
                continue;
            };
            if !seen.insert(entry.to_string()) {
                continue;
            }
            let params: Vec<String> = l["params"]
                .as_array()
                .expect("params")
                .iter()
                .map(|p| stand_in_param(op, p.as_str().expect("a parameter")))
                .collect();
            out += &format!(
                "extern \"C\" __global__ void {entry}({}) {{}}\n",
                params.join(", ")
            );
        }
    }
    out
}

/// One parameter of a stand-in kernel, as C.
fn stand_in_param(op: &toml::Value, p: &str) -> String {
    match p.split_once(':') {
        Some((name, t)) => {
            let t: Dtype = t.parse().expect("a type");
            format!("{} {name}", cuda_type(t))
        }
        None => {
            let b = &op["buffers"][p];
            let t: Dtype = b["dtype"].as_str().unwrap().parse().unwrap();
            let c = if b["role"].as_str() == Some("in") {
                "const "
            } else {
                ""
            };
            format!("{c}{} *{p}", cuda_type(t))
        }
    }
}

/// The CUDA C++ type of `t`: C's, but the toolkit's half-precision types for f16 and bf16.
fn cuda_type(t: Dtype) -> &'static str {
    match t {
        Dtype::F16 => "__half",
        Dtype::Bf16 => "__nv_bfloat16",
        _ => t.c_type(),
    }
}
