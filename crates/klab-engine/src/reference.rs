//! The seam between a declared operation and what computes its expected outputs: a
//! user's C function, a command exchanging `.npy` files, a kernel on the device, or a
//! built-in operation's CPU oracle all implement [`Reference`], and every gate calls it the
//! same way.

use klab_core::expr::Shape;
use klab_spec::rule;

/// What computes the expected outputs: called with the shape (every size variable, also
/// those the kernel does not take), host copies of every buffer in the kernel's buffer
/// order (inputs and in-out buffers set, outputs and scratch zeroed), the integer
/// parameters (sizes and integer scalars) and the floating ones, each in the kernel's
/// order, exactly as the kernel is.
pub trait Reference {
    fn run(
        &self,
        shape: &Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String>;
    /// One line for verdicts and receipts (`C reference ref.c:my_ref (gcc 12.2.0)`).
    fn describe(&self) -> String;
    /// [`Reference::run`] computed in the working precision `precision` instead of the
    /// reference's own (rule reference-error: a C reference built a second time with its
    /// working type `KLAB_REAL` set to `precision`). The default: this reference has no
    /// such build.
    fn run_in(
        &self,
        precision: rule::Precision,
        _shape: &Shape,
        _buffers: &mut [&mut [u8]],
        _ints: &[i64],
        _floats: &[f64],
    ) -> Result<(), String> {
        Err(format!(
            "{} cannot be computed in {}: rule reference-error needs a C reference (`reference = {{ c = \"FILE:FUNCTION\" }}`) whose working type is the macro KLAB_REAL",
            self.describe(),
            precision.name()
        ))
    }
    /// Outputs whose expected values a device checker can read from an input without
    /// running this reference, as (output, input, map) buffer positions at `shape`: a
    /// copy's and a transpose's. Empty (the default): the reference must run.
    fn device_expectation(&self, _shape: &Shape) -> Vec<(usize, usize, crate::verify::ExpectMap)> {
        Vec::new()
    }
}
