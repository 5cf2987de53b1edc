//! A workload's slots under timing: perturbed inputs, an inout output invalidated before
//! every launch, and a store into the device checker's own memory.

use super::*;
use crate::workload::NewInputs;
use klab_core::gpustate::GpuState;

/// The verified launch on perturbed inputs: the block's inputs with a few elements
/// drawn again, made on the device where the block's are (no host copy of the whole
/// input), and the same bytes as the host makes for the reference.
#[test]
fn perturbed_inputs_are_the_blocks_with_a_few_elements_drawn_again_on_either_side() {
    use crate::backend::host::{Call, HostBackend};
    let (_, decl) =
        klab_spec::registry::resolve("transpose_naive", klab_spec::registry::Scope::Audit).unwrap();
    let w = DeclaredWorkload::builtin(decl, 257, InputCase::Uniform { seed: 7 }, 0).unwrap();
    let p = w.with_new_inputs(99, NewInputs::Perturbed).unwrap();
    let i = w.buffers.iter().position(|b| b.role == Role::In).unwrap();
    let (block, host) = (
        &w.initial_bytes().unwrap()[i],
        &p.initial_bytes().unwrap()[i],
    );
    let differ = block
        .chunks(4)
        .zip(host.chunks(4))
        .filter(|(a, b)| a != b)
        .count() as u64;
    assert!(
        (1..=crate::workload::PERTURBED_ELEMENTS).contains(&differ),
        "{differ}"
    );

    let mut b = HostBackend::new().with_device_checker(None);
    assert!(p.inputs_on_device(&b));
    let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
    p.put_input(&mut b, &mut d, i, true).unwrap();
    assert!(b.calls.iter().any(|c| matches!(c, Call::CopyElements(_))));
    let mut got = vec![0u8; host.len()];
    b.download_bytes(&d, &mut got).unwrap();
    assert_eq!(&got, host);
    // The block's own inputs are not perturbed.
    let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
    w.put_input(&mut b, &mut d, i, true).unwrap();
    b.download_bytes(&d, &mut got).unwrap();
    assert_eq!(&got, block);
}

/// [`good`], then a store into the buffer allocated last of the output's length that is
/// not its own: an out-of-bounds store that lands in klab's copy of the expected output
/// once the device checker has made one.
fn stores_into_the_checkers_copy(mem: &mut [Vec<u32>], a: &[HostArg], n: u64) {
    good(mem, a, n);
    let (x, y, _, _) = args(a);
    let len = mem[y].len();
    if let Some(i) = (0..mem.len())
        .rev()
        .find(|&i| i != x && i != y && mem[i].len() == len)
    {
        mem[i][0] = 12345.0f32.to_bits();
    }
}

/// A kernel storing into the device checker's own memory fails the block as the
/// kernel's fault, with the cross-check and without it; it was once a klab error (the
/// two checkers disagreed) or an output mismatch at an index the kernel got right.
#[test]
fn a_store_into_the_checkers_memory_is_the_kernels_failure() {
    use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
    use klab_core::samples::{Invalidation, Regime, Timer};
    let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
    let cfg = TimingConfig {
        timer: Timer::PerLaunch,
        regime: Regime::SameBuffer,
        samples: 4,
        warmup: WarmupPolicy::Count { launches: 3 },
        invalidation: Invalidation::EveryLaunch,
    };
    for (f, paranoid, honest) in [
        (
            stores_into_the_checkers_copy as crate::backend::host::GeneralKernelFn,
            false,
            false,
        ),
        (stores_into_the_checkers_copy, true, false),
        (good, true, true),
    ] {
        // A workload per backend: its device cache holds that backend's buffers.
        let w = DeclaredWorkload::new(
            decl(),
            shape.clone(),
            InputCase::Uniform { seed: 3 },
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        let mut b = HostBackend::new()
            .with_general_kernel("rowsum", f)
            .with_device_checker(None);
        if paranoid {
            b = b.with_paranoid();
        }
        let k = [b.kernel("rowsum").unwrap()];
        let o = measure(&mut b, &w, &k, &cfg, "b", &mut GpuState::default)
            .unwrap_or_else(|e| panic!("paranoid {paranoid}: {e}"));
        let Outcome::Measured(m) = o else {
            panic!("{o:?}")
        };
        // What the outcomes of the verified launches say.
        let said = format!("{:?} {:?}", m.after_timing, m.verified);
        if honest {
            assert_eq!(m.gate_failure(), None);
            continue;
        }
        assert!(m.gate_failure().is_some(), "paranoid {paranoid}");
        assert!(
            said.contains("the kernel stored outside its declared buffers"),
            "paranoid {paranoid}: {said}"
        );
    }
}

/// y[r] += sum of row r of x: the accumulating form of the row sum (C = AB + C in a
/// GEMM), with y declared inout.
struct RowSumAcc;
impl Reference for RowSumAcc {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], ints: &[i64], _: &[f64]) -> Result<(), String> {
        let (rows, cols) = (ints[0] as usize, ints[1] as usize);
        for r in 0..rows {
            let mut s = 0f32;
            for c in 0..cols {
                let at = 4 * (r * cols + c);
                s += f32::from_le_bytes(b[0][at..at + 4].try_into().unwrap());
            }
            let y = f32::from_le_bytes(b[1][4 * r..4 * r + 4].try_into().unwrap());
            b[1][4 * r..4 * r + 4].copy_from_slice(&(y + s).to_le_bytes());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust accumulating row sum".into()
    }
}
fn accumulates(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    for r in 0..rows {
        let s: f32 = (0..cols)
            .map(|c| f32::from_bits(mem[x][r * cols + c]))
            .sum();
        mem[y][r] = (f32::from_bits(mem[y][r]) + s).to_bits();
    }
}

/// An honest kernel that accumulates into an inout output is timed on its declared
/// input every launch (restored outside the interval), so the output checked after the
/// block is one launch's, under every timer and regime; before invalidation the timed
/// launches kept accumulating and a correct kernel failed the gate.
#[test]
fn an_accumulating_inout_kernel_is_accepted_under_every_timer_and_regime() {
    use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
    use klab_core::samples::{Invalidation, Regime, Timer};
    let d = with(&MANIFEST.replace("role = \"out\"", "role = \"inout\""));
    let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
    let w = DeclaredWorkload::new(
        d,
        shape,
        InputCase::Uniform { seed: 3 },
        0,
        std::rc::Rc::new(RowSumAcc),
    )
    .unwrap();
    for invalidation in [Invalidation::EveryLaunch, Invalidation::LabContract] {
        for regime in Regime::ALL {
            for timer in [
                Timer::PerLaunch,
                Timer::Batch { launches: 3 },
                Timer::GraphReplay { launches: 2 },
            ] {
                // One sample as well: the sample run on fresh inputs is then the last
                // launch of its slots, judged against the fresh inputs' reference.
                for samples in [1, 12] {
                    let cfg = TimingConfig {
                        timer,
                        regime,
                        samples,
                        warmup: WarmupPolicy::Count { launches: 3 },
                        invalidation,
                    };
                    let mut b = HostBackend::new()
                        .with_general_kernel("rowsum", accumulates)
                        .with_l2_bytes(4096);
                    let k = [b.kernel("rowsum").unwrap()];
                    let o = measure(&mut b, &w, &k, &cfg, "b", &mut GpuState::default).unwrap();
                    let Outcome::Measured(m) = o else {
                        panic!("{o:?}")
                    };
                    let at = format!("{timer} {regime} {samples} {invalidation:?}");
                    match invalidation {
                        Invalidation::EveryLaunch => {
                            assert_eq!(m.gate_failure(), None, "{at}");
                            assert!(
                                m.verified
                                    .iter()
                                    .any(|v| v.inputs == Some(NewInputs::Fresh)),
                                "{at}"
                            );
                        }
                        // The lab's contract leaves the output in place: accumulated.
                        Invalidation::LabContract => {
                            assert!(!m.correct(), "{at}")
                        }
                    }
                }
            }
        }
    }
}
