//! A kernel plus the operation it must compute, ready to be checked and timed: what to
//! allocate per buffer slot, which arguments to pass, and how to check an output. The
//! timing engine runs any [`Workload`] on any [`Backend`]; every kernel, built-in or
//! declared by a user, is one [`crate::declared::DeclaredWorkload`].

use crate::backend::{Arg, Backend, BackendError, Launch};
use klab_spec::manifest::KernelDecl;
use klab_spec::ops::transpose;
use klab_spec::plan::LaunchPlan;
use klab_spec::rule::CheckOutcome;

/// Poison bytes, alternated across validation runs: 0xff fills words with a NaN,
/// 0x7f with 3.4e38. A kernel that skips a store cannot inherit a correct value, and one
/// that happens to write one poison pattern is caught by the other.
pub const POISON_BYTES: [u8; 2] = [transpose::POISON_BYTE, 0x7f];

/// How the inputs of a verified timed sample differ from the block's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewInputs {
    /// Every input drawn again from a new seed (a memo keyed on pointers returns stale
    /// outputs).
    Fresh,
    /// The block's inputs with a few elements at random positions drawn again (a memo
    /// keyed on a hash of part of the inputs misses the change).
    Perturbed,
}

/// Elements of each input a timed launch's inputs differ in ([`perturb_inputs`]), and a verified
/// sample on perturbed inputs draws again ([`NewInputs::Perturbed`]).
pub const PERTURBED_ELEMENTS: u64 = 64;

/// One input's sources for perturbing it ([`Workload::perturbation_sources`]).
pub struct PerturbSource<D> {
    /// The buffer's index in a slot.
    pub index: usize,
    pub elements: u64,
    /// Bytes per element.
    pub size: usize,
    /// Other values of the declared distribution.
    pub other: D,
    /// The block's input (`in` buffers), to put back after the launch.
    pub block: Option<D>,
}

/// Before a timed launch that is not verified, after its invalidation: replace
/// [`PERTURBED_ELEMENTS`] elements of each input at positions drawn from `key` with other
/// values of the declared distribution, so that no two launches see the same inputs (a memo
/// keyed on a hash of part of them must recompute, or return an answer to other inputs).
/// With `restore`, after the launch: the `in` buffers' elements at those positions back.
pub fn perturb_inputs<B: Backend>(
    b: &mut B,
    bufs: &mut [B::Buffer],
    sources: &[PerturbSource<B::Buffer>],
    key: u64,
    restore: bool,
) -> Result<(), BackendError> {
    for src in sources {
        let from = if restore {
            match &src.block {
                Some(block) => block,
                None => continue,
            }
        } else {
            &src.other
        };
        let key = crate::inputs::stream_key(key, src.index as u64);
        let dst = &mut bufs[src.index];
        b.copy_elements(dst, from, src.elements, src.size, key, PERTURBED_ELEMENTS)?;
    }
    Ok(())
}

/// The kernels of `decl`'s launches, loaded on `backend`: one per launch, in order, each
/// held to the parameters its compiled code declares ([`parameter_problem`]).
pub fn load_kernels<B: Backend>(
    backend: &mut B,
    decl: &KernelDecl,
) -> Result<Vec<B::Kernel>, BackendError> {
    decl.launches()
        .iter()
        .map(|l| {
            let kernel = backend.kernel(l.entry)?;
            let problem = backend
                .parameter_sizes(&kernel, l.params.len())
                .and_then(|compiled| parameter_problem(&compiled, l.params));
            match problem {
                Some(p) => Err(BackendError::from(format!(
                    "{} cannot take what the manifest passes: {p}",
                    l.entry
                ))),
                None => Ok(kernel),
            }
        })
        .collect()
}

/// Why a kernel whose compiled parameters are `compiled` cannot take `params`: another
/// count, a buffer's pointer for a value of another width, a value wider than klab's
/// (a struct or a `float4` by value, an i32 for a `long`), a float of another width. This
/// holds what no source text shows (a template instance, a macro, a PTX or cubin module)
/// to what the compiler made. A narrower integer (`short k`) is left to the manifest's
/// check of its values. Where not every parameter was asked for (under a sanitizer), only
/// those asked for are held.
pub fn parameter_problem(
    compiled: &crate::backend::CompiledParams,
    params: &[klab_spec::declared::OpParam],
) -> Option<String> {
    use klab_spec::declared::OpParam;
    let sizes = &compiled.sizes;
    let count_known = compiled.complete || sizes.len() > params.len();
    if count_known && sizes.len() != params.len() {
        return Some(format!(
            "its compiled code takes {}{} parameter(s) ({} bytes), the manifest passes {}",
            if compiled.complete { "" } else { "at least " },
            sizes.len(),
            sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            params.len()
        ));
    }
    sizes
        .iter()
        .zip(params)
        .enumerate()
        .find_map(|(i, (&size, p))| {
            let at = format!("parameter {i} is {size} bytes");
            match p {
                OpParam::Buffer(b) if size != 8 => Some(format!(
                    "'{b}' is a buffer, passed as an 8-byte pointer, but {at}"
                )),
                OpParam::Buffer(_) => None,
                OpParam::Size(v, d) | OpParam::Scalar(v, d) => {
                    let width = d.size_bytes();
                    let fits = match p {
                        // A size is never negative, and its 8-byte launch word is zero-extended:
                        // a wider integer (`size_t n` for an i32) gets the same value.
                        OpParam::Size(..) => size <= 8,
                        _ if d.is_integer() => size <= width,
                        _ => size == width,
                    };
                    (!fits).then(|| format!("'{v}' is passed as {d} ({width} bytes), but {at}"))
                }
            }
        })
}

/// Each launch of `workload`'s sequence checked against the device's limits and its
/// kernel's resources (an error in a sequence of several names the entry), and made
/// launchable: a block past the default shared-memory limit has its kernel opted in, as
/// the program that launches it must.
pub fn prepare_launches<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernels: &[B::Kernel],
) -> Result<(), LaunchError> {
    prepare_plans(backend, &workload.plans(), kernels)
}

/// [`prepare_launches`] for a sequence's `plans` (one per kernel), wherever they come from
/// (a GPU reference's launches too).
pub fn prepare_plans<B: Backend>(
    backend: &mut B,
    plans: &[LaunchPlan],
    kernels: &[B::Kernel],
) -> Result<(), LaunchError> {
    let several = plans.len() > 1;
    for (plan, kernel) in plans.iter().zip(kernels) {
        let resources = backend.resources(kernel);
        let entry = || several.then(|| resources.kernel.clone());
        klab_spec::plan::validate(plan, backend.limits(), Some(&resources)).map_err(|error| {
            LaunchError::Plan {
                entry: entry(),
                error,
            }
        })?;
        if klab_spec::plan::needs_opt_in(plan, backend.limits(), Some(&resources)) {
            backend
                .allow_dynamic_shared(kernel, plan.dynamic_shared_bytes)
                .map_err(|error| LaunchError::OptIn {
                    entry: entry(),
                    error,
                })?;
        }
    }
    Ok(())
}

/// A launch of a workload's sequence the device cannot make. `entry` names the launch's
/// entry in a sequence of several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// Past the device's limits or the kernel's own.
    #[error("{}{error}", entry_prefix(entry))]
    Plan {
        entry: Option<String>,
        error: klab_spec::plan::PlanError,
    },
    /// The driver refused to raise the kernel's dynamic shared-memory limit.
    #[error(
        "{}raising the kernel's dynamic shared-memory limit: {error}",
        entry_prefix(entry)
    )]
    OptIn {
        entry: Option<String>,
        error: BackendError,
    },
}

fn entry_prefix(entry: &Option<String>) -> String {
    entry.as_ref().map(|e| format!("{e}: ")).unwrap_or_default()
}

/// What the kernels of a sequence are on the device, one phrase per kernel.
pub fn describe_resources<B: Backend>(backend: &B, kernels: &[B::Kernel]) -> String {
    kernels
        .iter()
        .map(|k| backend.resources(k).describe())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Each launch's plan, described (`entry: plan` in a sequence of several).
pub fn describe_plans<W: Workload>(workload: &W) -> String {
    let plans = workload.plans();
    if plans.len() == 1 {
        return plans[0].describe();
    }
    workload
        .decl()
        .launches()
        .iter()
        .zip(&plans)
        .map(|(l, p)| format!("{}: {}", l.entry, p.describe()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A kernel and its contract.
pub trait Workload {
    /// The kernel's declaration (its entry, label and operation).
    fn decl(&self) -> &KernelDecl;
    fn entry(&self) -> &str {
        &self.decl().entry
    }
    /// What it computes, e.g. `y = fmaf(alpha, x, z)`.
    fn operation(&self) -> String;
    /// The first output's element type (`f32`).
    fn dtype(&self) -> &'static str;
    /// Problem size: the value of the operation's one size variable (elements per side
    /// for transpose, elements for triad), else the first output's element count.
    fn n(&self) -> u64;
    /// The plan of each launch of the kernel's sequence, in order (one for most kernels).
    fn plans(&self) -> Vec<LaunchPlan>;
    /// Device bytes one slot (all its buffers) occupies.
    fn slot_bytes(&self) -> u64;
    /// Algorithmic bytes one launch must move.
    fn useful_bytes(&self) -> u64;
    fn flops(&self) -> u64;
    /// The oracle and the rule, for receipts.
    fn reference(&self) -> String;
    fn rule(&self) -> String;
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// Whether the kernel is a known-broken variant that must never be accepted or timed.
    fn known_broken(&self) -> bool {
        self.decl().known_broken.is_some()
    }
    /// Allocate one slot (exact lengths), upload the block's inputs and poison its outputs.
    fn create_slot<B: Backend>(&self, b: &mut B, slot: u64)
        -> Result<Vec<B::Buffer>, BackendError>;
    /// The arguments of launch `step` of the sequence, for a slot.
    fn args<'a, B: Backend>(&self, step: usize, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>>;
    /// The whole sequence on a slot, each launch with its kernel from `kernels` (loaded by
    /// [`load_kernels`]): what every gate launches, as one unit.
    fn launches<'a, B: Backend>(
        &self,
        kernels: &'a [B::Kernel],
        bufs: &'a [B::Buffer],
    ) -> Vec<Launch<'a, B::Kernel, B::Buffer>> {
        let plans = self.plans();
        debug_assert_eq!(plans.len(), kernels.len(), "one kernel per launch");
        plans
            .into_iter()
            .zip(kernels)
            .enumerate()
            .map(|(step, (plan, kernel))| Launch {
                kernel,
                plan,
                args: self.args::<B>(step, bufs),
            })
            .collect()
    }
    /// Fill the slot's outputs with `byte` (one of [`POISON_BYTES`]).
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError>;
    /// Before a timed launch: overwrite the slot's outputs and scratch with pseudo-random
    /// bytes from `seed` (a new seed every launch, so no pattern can be recognised) and set
    /// its in-out buffers to their inputs again, so that no launch finds the last one's result.
    fn invalidate<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        seed: u64,
    ) -> Result<(), BackendError>;
    /// The same workload on inputs no launch has seen, made from `seed` as `kind` says, for
    /// a timed sample that is verified: a kernel that memoises its results (keyed on
    /// pointers, or on a glance at part of its inputs) returns stale outputs there. `None`
    /// where other inputs cannot be made at a bounded cost (a slow reference).
    fn with_new_inputs(&self, _seed: u64, _kind: NewInputs) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// What a timed launch's inputs are perturbed from, made once before the timed
    /// launches: for each input, values of the declared distribution from another seed, and
    /// for an `in` buffer a copy of the block's input to put back after the launch (in-out
    /// buffers get all of theirs back at the next invalidation). Empty where the inputs are
    /// the user's (nothing is perturbed).
    fn perturbation_sources<B: Backend>(
        &self,
        _b: &mut B,
    ) -> Result<Vec<PerturbSource<B::Buffer>>, BackendError> {
        Ok(Vec::new())
    }
    /// Set the slot's in-out buffers to their inputs again, leaving outputs and scratch as
    /// they are (a stale-output probe: only what the kernel wrote stays in place).
    fn restore_inouts<B: Backend>(
        &self,
        _b: &mut B,
        _bufs: &mut [B::Buffer],
    ) -> Result<(), BackendError> {
        Ok(())
    }
    /// Write the slot's inputs and in-out buffers again (after a sample on fresh inputs).
    fn put_inputs<B: Backend>(&self, b: &mut B, bufs: &mut [B::Buffer])
        -> Result<(), BackendError>;
    /// The slot's raw output words (for determinism checks).
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError>;
    /// Who judged the outputs so far, in one phrase (`CPU oracle`).
    fn verification(&self) -> String {
        "CPU oracle".into()
    }
    /// Judge the slot's outputs against the oracle.
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError>;
    /// Whether the CPU oracle's cross-check of the first judgement, where the device
    /// checker passes it, waits for [`Workload::settle`]: a timed block holds it, so that
    /// the oracle's host work runs after its launches instead of before them; `false`
    /// drops one held and never settled.
    fn hold_cross_check(&self, _hold: bool) {}
    /// Do the cross-check [`Workload::hold_cross_check`] held back, if any: an error when
    /// the CPU oracle and the device checker disagree (a fault in klab's checking).
    fn settle(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parameter_problem;
    use crate::backend::CompiledParams;
    use klab_core::dtype::Dtype;
    use klab_spec::declared::OpParam;

    fn params() -> Vec<OpParam> {
        vec![
            OpParam::Buffer("x".into()),
            OpParam::Buffer("y".into()),
            OpParam::Size("n".into(), Dtype::I32),
            OpParam::Scalar("a".into(), Dtype::F16),
            OpParam::Scalar("k".into(), Dtype::I32),
        ]
    }

    fn all(sizes: &[usize]) -> CompiledParams {
        CompiledParams {
            sizes: sizes.to_vec(),
            complete: true,
        }
    }

    /// What the compiled code takes decides: a count, a pointer, a struct by value and a
    /// float's width are each refused; a wider size or a narrower integer scalar is not.
    #[test]
    fn a_kernel_is_held_to_its_compiled_parameter_sizes() {
        let p = params();
        assert_eq!(parameter_problem(&all(&[8, 8, 4, 2, 4]), &p), None);
        // size_t n for an i32 size, and a bool or short for an integer scalar.
        assert_eq!(parameter_problem(&all(&[8, 8, 8, 2, 1]), &p), None);
        for (sizes, says) in [
            (
                vec![8, 8, 4, 2],
                "its compiled code takes 4 parameter(s) (8, 8, 4, 2 bytes), the manifest passes 5",
            ),
            (
                vec![8, 8, 4, 2, 4, 8],
                "its compiled code takes 6 parameter(s) (8, 8, 4, 2, 4, 8 bytes), the manifest passes 5",
            ),
            (
                vec![8, 4, 4, 2, 4],
                "'y' is a buffer, passed as an 8-byte pointer, but parameter 1 is 4 bytes",
            ),
            (
                vec![8, 8, 12, 2, 4],
                "'n' is passed as i32 (4 bytes), but parameter 2 is 12 bytes",
            ),
            (
                vec![8, 8, 4, 4, 4],
                "'a' is passed as f16 (2 bytes), but parameter 3 is 4 bytes",
            ),
            (
                vec![8, 8, 4, 2, 8],
                "'k' is passed as i32 (4 bytes), but parameter 4 is 8 bytes",
            ),
            (
                vec![8, 8, 4, 2, 16],
                "'k' is passed as i32 (4 bytes), but parameter 4 is 16 bytes",
            ),
        ] {
            assert_eq!(
                parameter_problem(&all(&sizes), &p).as_deref(),
                Some(says),
                "{sizes:?}"
            );
        }
    }

    /// Where not every parameter was asked for (under a sanitizer, the manifest's count
    /// at most), those asked for are still held, and a count is refused only when known.
    #[test]
    fn parameters_not_asked_for_are_not_judged() {
        let p = params();
        let first = |sizes: &[usize]| CompiledParams {
            sizes: sizes.to_vec(),
            complete: false,
        };
        assert_eq!(parameter_problem(&first(&[8, 8, 4, 2, 4]), &p), None);
        assert_eq!(
            parameter_problem(&first(&[8, 8, 4, 4, 4]), &p).as_deref(),
            Some("'a' is passed as f16 (2 bytes), but parameter 3 is 4 bytes")
        );
        assert_eq!(
            parameter_problem(&first(&[8, 8, 4, 2, 4, 8]), &p).as_deref(),
            Some("its compiled code takes at least 6 parameter(s) (8, 8, 4, 2, 4, 8 bytes), the manifest passes 5")
        );
    }

    /// The probe asks for no parameter at or past its bound, and says whether it found
    /// the last one.
    #[test]
    fn the_probe_asks_nothing_past_its_bound() {
        let kernel = [8usize, 8, 4];
        let ask = |most: usize| {
            CompiledParams::probe(most, |i| {
                assert!(i < most, "parameter {i} asked for past the bound {most}");
                Ok::<_, ()>(kernel.get(i).copied())
            })
        };
        assert_eq!(
            ask(3),
            Some(CompiledParams {
                sizes: kernel.to_vec(),
                complete: false
            })
        );
        assert_eq!(ask(4), Some(all(&kernel)));
        assert_eq!(
            ask(2),
            Some(CompiledParams {
                sizes: vec![8, 8],
                complete: false
            })
        );
        assert_eq!(
            CompiledParams::probe(8, |_| Err::<Option<usize>, _>(())),
            None
        );
    }
}
