//! A declared operation's reference, built from its manifest's `reference` table: a C
//! function ([`crate::cref`], compiled into klab's cache) or a program that exchanges
//! `.npy` files ([`crate::cmdref`]), or a built-in operation's CPU oracle
//! ([`klab_engine::oracle`]). Paths are relative to the manifest's folder.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use klab_engine::reference::Reference;
use klab_spec::declared::{DeclaredOp, ReferenceSpec};

use crate::cmdref::{CmdRefError, CommandReference};
use crate::cref::{self, CRefError, CReference, CReferenceSpec};

/// Why a reference could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error(transparent)]
    C(#[from] CRefError),
    #[error(transparent)]
    Command(#[from] CmdRefError),
    /// A form the manifest accepts that klab does not run yet.
    #[error("{0}")]
    Unsupported(String),
}

/// Build `op`'s reference; `manifest_dir` is the folder of the manifest that declares it.
pub fn build(
    op: &Arc<DeclaredOp>,
    manifest_dir: &Path,
) -> Result<Rc<dyn Reference>, ReferenceError> {
    match &op.spec.reference {
        ReferenceSpec::C(s) => {
            let (file, function) = s.rsplit_once(':').expect("validated FILE:NAME");
            let spec = CReferenceSpec {
                source: manifest_dir.join(file),
                function: function.into(),
                params: cref::params_for(op),
                working: op.spec.working_precision(),
            };
            let cache = klab_core::artifact::cache_dir("cref");
            Ok(Rc::new(CReference::build(&spec, cache.as_deref())?))
        }
        ReferenceSpec::Command(c) => Ok(Rc::new(CommandReference::new(
            c,
            op.clone(),
            manifest_dir,
        )?)),
        ReferenceSpec::Builtin(_) => Ok(Rc::new(
            klab_engine::oracle::BuiltinReference::for_op(op)
                .expect("a built-in reference has a built-in oracle"),
        )),
        ReferenceSpec::Kernel(_) => Err(ReferenceError::Unsupported(
            "reference.kernel runs on a device: the caller builds it with a backend (klab_engine::gpuref::KernelReference)".into(),
        )),
    }
}
