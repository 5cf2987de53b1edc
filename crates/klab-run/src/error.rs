//! [`RunError`]: everything that can stop klab from running a kernel and writing down what
//! happened, one type for the crate. Each library's own error is carried whole (its causes
//! stay reachable through `source`); [`RunError::While`] says what klab was doing when one
//! happened, and [`RunError::Message`] is a failure klab states in its own words.

use klab_core::artifact::FileError;
use klab_cuda::error::CudaError;
use klab_engine::backend::BackendError;
use klab_engine::timing::TimingError;
use klab_evidence::receipt::ReceiptError;
use klab_spec::registry::RegistryError;
use klab_tools::reference::ReferenceError;

/// Why a kernel could not be loaded, run or recorded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The kernel could not be found or its manifest read.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The device, the compiler or the driver said no.
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The workload could not be built or launched.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The timing engine stopped.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// The operation's reference could not be built.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A file klab reads or writes.
    #[error(transparent)]
    File(#[from] FileError),
    /// A receipt that does not validate or could not be written.
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
    /// Anything else the operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A failure klab states in its own words: a request it will not carry out, or a value
    /// that was not there.
    #[error("{0}")]
    Message(String),
    /// What klab was doing when `source` happened.
    #[error("{what}")]
    While {
        /// The step, as a message prefix.
        what: String,
        /// What went wrong in it.
        #[source]
        source: Box<RunError>,
    },
}

/// `.within(|| "what klab was doing")` on any result whose error is a [`RunError`] or
/// becomes one: the error, said after what klab was doing.
pub trait Within<T> {
    /// The error wrapped in [`RunError::While`].
    fn within(self, what: impl FnOnce() -> String) -> Result<T, RunError>;
}

impl<T, E: Into<RunError>> Within<T> for Result<T, E> {
    fn within(self, what: impl FnOnce() -> String) -> Result<T, RunError> {
        self.map_err(|e| RunError::While {
            what: what(),
            source: Box::new(e.into()),
        })
    }
}

impl<T> Within<T> for Option<T> {
    fn within(self, what: impl FnOnce() -> String) -> Result<T, RunError> {
        self.ok_or_else(|| RunError::Message(what()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_core::text::error_chain;

    #[test]
    fn what_klab_was_doing_comes_first_and_each_cause_once() {
        let io = std::io::Error::from_raw_os_error(17);
        let e = Err::<(), _>(io).within(|| "writing x".into()).unwrap_err();
        assert_eq!(error_chain(&e), "writing x: File exists (os error 17)");
        let e = Err::<(), _>(e).within(|| "the run".into()).unwrap_err();
        assert_eq!(
            error_chain(&e),
            "the run: writing x: File exists (os error 17)"
        );
        let e = None::<u8>.within(|| "no samples".into()).unwrap_err();
        assert_eq!(error_chain(&e), "no samples");
    }
}
