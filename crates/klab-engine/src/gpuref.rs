//! A trusted kernel as the reference (`reference = { kernel = "path.toml:name" }`): when
//! the only oracle a user has is an older, slower kernel they trust (a cuBLAS call wrapped
//! in a kernel, last release's version), klab runs it on the same inputs and compares the
//! outputs by the declared rules. Its verdicts say "GPU reference": agreeing with another
//! kernel is weaker evidence than agreeing with an independent CPU oracle.
//!
//! [`KernelReference`] implements [`Reference`] over a [`Backend`] of its own (the
//! reference's module, on the same device), so the gate that calls it is unchanged. The
//! reference kernel must be a declared operation with the same parameter list and the same
//! buffers (dtype, length and role) as the kernel it checks; its own launch (grid, block,
//! shared memory) is used.

use std::cell::RefCell;

use crate::backend::Backend;
use crate::reference::Reference;
use klab_core::expr::Shape;
use klab_spec::declared::{DeclaredOp, OpParam};
use klab_spec::manifest::KernelDecl;

/// A reference kernel, compiled and loaded on `backend`.
pub struct KernelReference<B: Backend> {
    backend: RefCell<B>,
    /// One per launch of the reference's sequence.
    kernels: Vec<B::Kernel>,
    reference: KernelDecl,
    /// What the manifest names (`ref.toml:gemm_v1`).
    spec: String,
}

impl<B: Backend> KernelReference<B> {
    /// Check that `reference` computes the same declaration as `checked` and look up its
    /// entry on `backend`. Errors are one line naming what differs.
    pub fn new(
        mut backend: B,
        reference: &KernelDecl,
        spec: &str,
        checked: &DeclaredOp,
    ) -> Result<KernelReference<B>, String> {
        let op = reference.op.clone();
        if op.params != checked.params {
            return Err(format!(
                "the reference kernel {spec} takes different parameters ({}) from the kernel it checks ({})",
                describe_params(&op.params),
                describe_params(&checked.params)
            ));
        }
        for (name, b) in &checked.spec.buffers {
            let r = &op.spec.buffers[name];
            // Lengths compare by their text without spaces (`rows*cols` is `rows * cols`).
            let text = |e: &klab_core::expr::Expr| e.to_string().replace(' ', "");
            if (r.dtype, text(&r.len), r.role) != (b.dtype, text(&b.len), b.role) {
                return Err(format!(
                    "the reference kernel {spec} declares buffer {name} as {} of {} ({:?}); the kernel it checks as {} of {} ({:?})",
                    r.dtype, r.len, r.role, b.dtype, b.len, b.role
                ).to_lowercase());
            }
        }
        // Its launches run at the checked kernel's shapes: every size they use must be one.
        for l in reference.launches() {
            let exprs = l.grid.iter().chain(l.block).chain(l.dynamic_shared_bytes);
            let sizes = l.params.iter().filter_map(|p| match p {
                OpParam::Size(n, _) => Some(n.clone()),
                _ => None,
            });
            let used: std::collections::BTreeSet<String> =
                exprs.flat_map(|e| e.variables()).chain(sizes).collect();
            if let Some(v) = used.iter().find(|v| !checked.spec.sizes.contains_key(*v)) {
                return Err(format!(
                    "the reference kernel {spec} launches {} with size '{v}', which the kernel it checks does not declare",
                    l.entry
                ));
            }
        }
        let kernels = crate::workload::load_kernels(&mut backend, reference)
            .map_err(|e| format!("the reference kernel {spec}: {e}"))?;
        Ok(KernelReference {
            backend: RefCell::new(backend),
            kernels,
            reference: reference.clone(),
            spec: spec.to_string(),
        })
    }
}

/// How verdicts name a kernel reference (`ref.toml:name`).
pub fn describe(spec: &str) -> String {
    format!("GPU reference {spec} (a trusted kernel, not an independent oracle)")
}

fn describe_params(params: &[OpParam]) -> String {
    params
        .iter()
        .map(|p| match p {
            OpParam::Buffer(n) => n.clone(),
            OpParam::Size(n, d) | OpParam::Scalar(n, d) => format!("{n}:{d}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl<B: Backend> Reference for KernelReference<B> {
    fn run(
        &self,
        shape: &Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        let launches = self.reference.launches();
        let plans = launches
            .iter()
            .map(|l| l.plan(shape))
            .collect::<Result<Vec<_>, _>>()?;
        let mut b = self.backend.borrow_mut();
        crate::workload::prepare_plans(&mut *b, &plans, &self.kernels)
            .map_err(|e| format!("the reference kernel {}: {e}", self.spec))?;
        let mut bufs = Vec::with_capacity(buffers.len());
        for host in buffers.iter() {
            // Outputs arrive zeroed, inputs set: upload them all as they are.
            let mut d = b.alloc_bytes(host.len()).map_err(|e| e.message)?;
            b.upload_bytes(&mut d, host).map_err(|e| e.message)?;
            bufs.push(d);
        }
        let sequence: Vec<_> = launches
            .iter()
            .zip(plans)
            .zip(&self.kernels)
            .map(|((l, plan), kernel)| crate::backend::Launch {
                kernel,
                plan,
                args: crate::declared::launch_args(
                    l,
                    &self.reference.op,
                    shape,
                    &bufs,
                    ints,
                    floats,
                ),
            })
            .collect();
        b.launch_all(&sequence)
            .and_then(|()| b.synchronize())
            .map_err(|e| format!("the reference kernel {} failed: {e}", self.spec))?;
        let op = &self.reference.op;
        let names = op.params.iter().filter_map(|p| match p {
            OpParam::Buffer(n) => Some(n),
            _ => None,
        });
        for ((host, d), name) in buffers.iter_mut().zip(&bufs).zip(names) {
            if op.spec.buffers[name].role.compared() {
                b.download_bytes(d, host).map_err(|e| e.message)?;
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "GPU reference {} (a trusted kernel, not an independent oracle)",
            self.spec
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{HostArg, HostBackend};
    use crate::check::{run, CheckOptions};

    const MANIFEST: &str = r#"
source = "k.cu"
[ops.scale]
grid = ["ceil_div(n, 64)"]
block = ["64"]
useful_bytes = "8 * n"
reference = { kernel = "ref.toml:scale_v1" }
sizes.n = { values = [1, 63, 64, 65, 200] }
buffers.x = { dtype = "f32", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "n", role = "out", compare = "bitwise" }
scalars.alpha = { type = "f32", values = [2.0, -3.0] }
[[kernel]]
name = "scale"
entry = "scale"
operation = "declared"
params = ["x", "y", "n:i32", "alpha:f32"]
op = "scale"
[[kernel]]
name = "scale_v1"
entry = "scale_v1"
operation = "declared"
params = ["x", "y", "n:i32", "alpha:f32"]
op = "scale"
[[kernel]]
name = "scale_swapped"
entry = "scale_v1"
operation = "declared"
params = ["y", "x", "n:i32", "alpha:f32"]
op = "scale"
"#;

    fn decls() -> Vec<KernelDecl> {
        decls_of(MANIFEST)
    }

    fn decls_of(manifest: &str) -> Vec<KernelDecl> {
        klab_spec::manifest::parse(
            "m.toml",
            manifest,
            klab_spec::manifest::Files::Given(&|_| {
                // No const: scale_swapped passes its buffers the other way round.
                Ok((
                    "k.cu".into(),
                    "extern \"C\" __global__ void scale(float *x, float *y, int n, float alpha) {}\n\
                     extern \"C\" __global__ void scale_v1(float *x, float *y, int n, float alpha) {}"
                        .into(),
                ))
            }),
        )
        .unwrap()
        .kernels
    }

    fn scale(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let [HostArg::Buffer(x), HostArg::Buffer(y), HostArg::I32(n), HostArg::F32(alpha)] = a
        else {
            panic!("{a:?}")
        };
        let xs: Vec<u32> = mem[*x][..*n as usize].to_vec();
        for (o, v) in mem[*y].iter_mut().zip(xs) {
            *o = (alpha * f32::from_bits(v)).to_bits();
        }
    }
    /// Forgets the last element.
    fn scale_short(mem: &mut [Vec<u32>], a: &[HostArg], l: u64) {
        let [HostArg::Buffer(_), HostArg::Buffer(y), HostArg::I32(n), _] = a else {
            panic!("{a:?}")
        };
        let keep = mem[*y][*n as usize - 1];
        scale(mem, a, l);
        mem[*y][*n as usize - 1] = keep;
    }

    fn check(kernel: crate::backend::host::GeneralKernelFn) -> crate::check::CheckReport {
        let d = decls();
        let op = d[0].op.clone();
        let refb = HostBackend::new().with_general_kernel("scale_v1", scale);
        let r = KernelReference::new(refb, &d[1], "ref.toml:scale_v1", &op).unwrap();
        let mut b = HostBackend::new().with_general_kernel("scale", kernel);
        let k = [b.kernel("scale").unwrap()];
        let opts = CheckOptions {
            seed: 3,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after: 0,
        };
        run(&mut b, &d[0], &k, std::rc::Rc::new(r), &opts, &mut |_| {}).unwrap()
    }

    #[test]
    fn a_kernel_that_agrees_with_the_reference_kernel_passes_and_says_gpu_reference() {
        let r = check(scale);
        assert!(r.passed(), "{}", r.render());
        assert!(
            r.operation.contains("GPU reference ref.toml:scale_v1"),
            "{}",
            r.operation
        );
    }

    /// A reference kernel whose block needs more than the default 48 KiB of shared memory
    /// is opted in before it launches, as the kernel it checks is.
    #[test]
    fn a_reference_kernel_past_the_default_shared_memory_is_opted_in() {
        use crate::backend::host::Call;
        use crate::reference::Reference;
        let text = MANIFEST.replace(
            "block = [\"64\"]",
            "block = [\"64\"]\ndynamic_shared_bytes = \"65536\"",
        );
        let d = decls_of(&text);
        let refb = HostBackend::new().with_general_kernel("scale_v1", scale);
        let r = KernelReference::new(refb, &d[1], "ref.toml:scale_v1", &d[0].op).unwrap();
        let (mut x, mut y) = (2.0f32.to_le_bytes().repeat(3), vec![0u8; 12]);
        let shape = crate::declared::Shape::from([("n".into(), 3)]);
        r.run(&shape, &mut [&mut x, &mut y], &[3], &[2.0]).unwrap();
        assert_eq!(y, 4.0f32.to_le_bytes().repeat(3));
        let calls = &r.backend.borrow().calls;
        let at = |f: fn(&Call) -> bool| calls.iter().position(f).unwrap();
        assert!(
            at(|c| matches!(c, Call::AllowDynamicShared { bytes: 65536, .. }))
                < at(|c| matches!(c, Call::Launch(_))),
            "{calls:?}"
        );
    }

    #[test]
    fn a_kernel_that_disagrees_fails_at_the_element_it_missed() {
        let r = check(scale_short);
        assert!(!r.passed());
        let f = r.first_failure().unwrap();
        assert!(f.detail.contains("first at ["), "{}", f.detail);
    }

    #[test]
    fn a_reference_with_other_parameters_is_refused_in_one_line() {
        let d = decls();
        let op = d[0].op.clone();
        let b = HostBackend::new().with_general_kernel("scale_v1", scale);
        let e = KernelReference::new(b, &d[2], "ref.toml:scale_swapped", &op)
            .err()
            .unwrap();
        assert!(
            e.contains("takes different parameters (y, x, n:i32, alpha:f32)"),
            "{e}"
        );
        let b = HostBackend::new();
        let e = KernelReference::new(b, &d[1], "ref.toml:scale_v1", &op)
            .err()
            .unwrap();
        assert!(
            e.starts_with("the reference kernel ref.toml:scale_v1:"),
            "{e}"
        );
    }
}
