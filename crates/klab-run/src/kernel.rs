//! [`Kernel`]: a kernel klab can run, found by what a user or a parent typed
//! ([`KernelRef`]) with its manifest and declaration, and what it needs to run: its
//! operation's reference (built, or a trusted kernel opened on the device when it first
//! runs) and its workload at a size.

use std::path::{Path, PathBuf};

use klab_cuda::gpu::CudaBackend;
use klab_engine::declared::DeclaredWorkload;
use klab_engine::verify::VerifyPolicy;
use klab_spec::manifest::{KernelDecl, Manifest};
use klab_spec::registry::{self, KernelRef, Scope};

use crate::error::{RunError, Within};
use crate::session::Session;

/// A kernel klab can run: where it is declared ([`KernelRef`], what a child is given) and
/// its declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub kref: KernelRef,
    pub manifest: Manifest,
    pub decl: KernelDecl,
}

impl Kernel {
    /// Exactly one kernel from what a user typed (the default namespaces).
    pub fn parse(s: &str) -> Result<Kernel, RunError> {
        Kernel::load(registry::expand_one(s, Scope::Default)?)
    }

    /// Exactly one kernel from what a parent klab passed: the mutants too, since the audit
    /// hands them to its children.
    pub fn parse_in_child(s: &str) -> Result<Kernel, RunError> {
        Kernel::load(registry::expand_one(s, Scope::Audit)?)
    }

    /// Every kernel a command line names (globs and whole manifests expanded), refusing one
    /// name twice.
    pub fn parse_all(specs: &[String], scope: Scope) -> Result<Vec<Kernel>, RunError> {
        let mut read = registry::ManifestsRead::new();
        registry::expand_all(specs, scope)?
            .into_iter()
            .map(|kref| Kernel::load_with(kref, &mut read))
            .collect()
    }

    pub fn load(kref: KernelRef) -> Result<Kernel, RunError> {
        Kernel::load_with(kref, &mut registry::ManifestsRead::new())
    }

    fn load_with(kref: KernelRef, read: &mut registry::ManifestsRead) -> Result<Kernel, RunError> {
        let (manifest, decl) = kref.load_with(read)?;
        Ok(Kernel {
            kref,
            manifest,
            decl,
        })
    }

    pub fn name(&self) -> String {
        self.decl.name.clone()
    }

    /// What resolves to this kernel from any folder (for a child's command line).
    pub fn spec(&self) -> String {
        self.kref.spec()
    }

    /// The size `--n` means when it is not given: the operation's bench shape (its one
    /// size variable); 1 for an operation with several (they are timed at `bench`).
    pub fn default_n(&self) -> u64 {
        match (self.size_variable(), &self.decl.op.spec.bench) {
            (Some(var), Some(bench)) => bench.get(var).copied().unwrap_or(1),
            _ => 1,
        }
    }

    /// This kernel timed at `shape` (`--shape`) instead of its manifest's bench shape; a
    /// shape that misses a size variable, names another or leaves a range is refused.
    pub fn at_shape(
        mut self,
        shape: Option<&klab_engine::declared::ShapeArg>,
    ) -> Result<Kernel, RunError> {
        let Some(shape) = shape else {
            return Ok(self);
        };
        self.check_shape(shape)?;
        let mut op = (*self.decl.op).clone();
        op.spec.bench = Some(shape.0.clone());
        self.decl.op = std::sync::Arc::new(op);
        Ok(self)
    }

    /// [`Kernel::at_shape`]'s check alone.
    pub fn check_shape(&self, shape: &klab_engine::declared::ShapeArg) -> Result<(), RunError> {
        self.shape_within_types(&shape.0)
            .map_err(|why| RunError::Message(format!("{}: --shape {shape}: {why}", self.name())))
    }

    /// Why `shape` is not one of the operation's ([`DeclaredOpSpec::shape_problem`]), or
    /// holds a size the integer the kernel takes it as cannot (it would wrap there).
    ///
    /// [`DeclaredOpSpec::shape_problem`]: klab_spec::declared::DeclaredOpSpec::shape_problem
    fn shape_within_types(
        &self,
        shape: &std::collections::BTreeMap<String, u64>,
    ) -> Result<(), String> {
        let op = &self.decl.op;
        op.spec.shape_problem(shape)?;
        for (var, v) in shape {
            let cap = klab_engine::declared::size_cap(op, var);
            if *v > cap {
                return Err(format!(
                    "{var} = {v} is past what the kernel takes it as ({cap} at most)"
                ));
            }
        }
        Ok(())
    }

    /// The operation's size variable when it has exactly one (what `--n` sets).
    pub fn size_variable(&self) -> Option<&str> {
        let sizes = &self.decl.op.spec.sizes;
        (sizes.len() == 1).then(|| sizes.keys().next().expect("one").as_str())
    }

    /// A declared operation's reference, built (a C reference compiles into klab's cache).
    pub fn reference(
        &self,
        device: u32,
    ) -> Result<std::rc::Rc<dyn klab_engine::reference::Reference>, RunError> {
        let op = &self.decl.op;
        let dir = match &self.kref {
            KernelRef::Manifest { path, .. } => {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            }
            KernelRef::Builtin { .. } => PathBuf::from("."),
        };
        if let klab_spec::declared::ReferenceSpec::Kernel(spec) = &op.spec.reference {
            // Resolved now (a bad name is an error before anything runs), opened on the
            // device only when the reference first runs: a parent that merely describes
            // the workload never creates a CUDA context.
            let (file, name) = spec.rsplit_once(':').expect("validated FILE:NAME");
            let kernel = Kernel::parse(&format!("{}:{name}", dir.join(file).display()))
                .within(|| format!("{}: reference.kernel {spec}", self.name()))?;
            if kernel.spec() == self.spec() {
                return Err(RunError::Message(format!(
                    "{}: reference.kernel {spec} is this kernel itself: it would agree with itself whatever it computes",
                    self.name()
                )));
            }
            return Ok(std::rc::Rc::new(GpuReference {
                spec: spec.clone(),
                kernel,
                device,
                checked: op.clone(),
                loaded: Default::default(),
            }));
        }
        klab_tools::reference::build(op, &dir).within(|| self.name())
    }

    /// (program name, source, path as reports name it).
    pub fn program(&self) -> (&str, &klab_spec::manifest::Source, &str) {
        (
            &self.manifest.program,
            &self.manifest.source,
            &self.manifest.source_path,
        )
    }

    /// The workload at its operation's `bench` shape, with `n` as the value of its one
    /// size variable (seeded random input), and its reference.
    pub fn workload(
        &self,
        n: u64,
        seed: Option<u64>,
        device: u32,
    ) -> Result<DeclaredWorkload, RunError> {
        let op = &self.decl.op;
        let shape = op.spec.bench.clone().within(|| {
            format!(
                "{}: give the shape to time in [kernel.op], e.g. bench = {{ {} }}",
                self.name(),
                op.spec
                    .sizes
                    .keys()
                    .map(|k| format!("{k} = 4096"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let mut shape: klab_engine::declared::Shape =
            shape.into_iter().map(|(k, v)| (k, v as i64)).collect();
        if self.size_variable().is_some() {
            // Every path that times at `n` (bench, rounds, profile, the lab) meets it here.
            self.refuse_n_for_declared(Some(n))?;
        }
        if let Some(var) = self.size_variable() {
            let n = i64::try_from(n)
                .map_err(|e| RunError::Message(e.to_string()))
                .within(|| format!("--n {n} is too large"))?;
            shape.insert(var.to_string(), n);
        }
        let input = klab_engine::declared::InputCase::Uniform {
            seed: seed.unwrap_or(1),
        };
        Ok(DeclaredWorkload::new(
            self.decl.clone(),
            shape,
            input,
            0,
            self.reference(device)?,
        )?)
    }

    /// `--n` sets an operation's one size variable, to a size it admits (within min and
    /// max, a multiple of its `multiple`); one with several is timed at its `[kernel.op]`
    /// bench shape.
    pub fn refuse_n_for_declared(&self, n: Option<u64>) -> Result<(), RunError> {
        if let (Some(n), Some(var)) = (n, self.size_variable()) {
            let shape = std::collections::BTreeMap::from([(var.to_string(), n)]);
            return self
                .shape_within_types(&shape)
                .map_err(|why| RunError::Message(format!("{}: --n {n}: {why}", self.name())));
        }
        if n.is_some() && self.size_variable().is_none() {
            return Err(RunError::Message(format!(
                "{}: --n sets an operation's one size variable; this one has {} ({}) and is timed at its [kernel.op] bench shape",
                self.name(),
                self.decl.op.spec.sizes.len(),
                self.decl.op.spec.sizes.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(())
    }
}

/// `reference = { kernel = "ref.toml:name" }`: the trusted kernel, compiled into its own
/// backend on the checked kernel's device when it first runs.
struct GpuReference {
    spec: String,
    kernel: Kernel,
    device: u32,
    checked: std::sync::Arc<klab_spec::declared::DeclaredOp>,
    loaded: std::cell::OnceCell<Result<klab_engine::gpuref::KernelReference<CudaBackend>, String>>,
}

impl klab_engine::reference::Reference for GpuReference {
    fn run(
        &self,
        shape: &klab_engine::declared::Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        let r = self.loaded.get_or_init(|| {
            // The reference's own outputs are the expected values: nothing is verified here.
            let session = Session::open(
                &self.kernel.manifest,
                &self.kernel.decl,
                self.device,
                VerifyPolicy::default(),
            )
            .map_err(|e| {
                format!(
                    "the reference kernel {}: {}",
                    self.spec,
                    klab_core::text::error_chain(&e)
                )
            })?;
            klab_engine::gpuref::KernelReference::new(
                session.backend,
                &self.kernel.decl,
                &self.spec,
                &self.checked,
            )
        });
        r.as_ref()
            .map_err(Clone::clone)?
            .run(shape, buffers, ints, floats)
    }

    fn describe(&self) -> String {
        klab_engine::gpuref::describe(&self.spec)
    }
}
