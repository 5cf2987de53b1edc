//! [`Session`]: one device opened with one kernel's module loaded, its backend and the
//! reader of the GPU's state around each timing block. It is opened in two steps: what
//! needs no context first ([`Prepared`]: the module built, NVML started), then the device.

use klab_cuda::device::{Device, Unopened};
use klab_cuda::gpu::CudaBackend;
use klab_cuda::module::{self, Module};
use klab_cuda::nvml::StateReader;
use klab_cuda::nvrtc::Cache;
use klab_engine::verify::VerifyPolicy;
use klab_spec::manifest::{KernelDecl, Manifest};

use crate::error::RunError;

/// An open device with one module loaded (compiled by NVRTC, or precompiled).
pub struct Session {
    pub backend: CudaBackend,
    pub module: Module,
    pub state: StateReader,
    /// Seconds spent starting the driver and NVML and opening the device (context, stream,
    /// events, the module loaded), and compiling or loading the modules, charged to the
    /// first block this session measures (a paced block's preparation ran before its turn).
    setup_s: f64,
    compile_s: f64,
}

/// A session's work that needs no context, done before it opens the device: the driver
/// started, the kernel's module built for the device's architecture (compiled, or found in
/// the cache) and NVML started on the device. A paced block prepares before its turn to
/// open the device, so that this runs beside the block before it, not on the run's path.
pub struct Prepared {
    unopened: Unopened,
    module: Module,
    state: StateReader,
    /// Seconds starting the driver and NVML took, and building the module.
    setup_s: f64,
    compile_s: f64,
}

impl Session {
    /// Device `ordinal` prepared for `decl` ([`Prepared`]), without opening it.
    pub fn prepare(
        manifest: &Manifest,
        decl: &KernelDecl,
        ordinal: u32,
    ) -> Result<Prepared, RunError> {
        let t = std::time::Instant::now();
        let unopened = Device::unopened(ordinal)?;
        let mut setup_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let module = module::build(manifest, decl, &unopened.arch(), &Cache::from_env())?;
        let compile_s = t.elapsed().as_secs_f64();
        for note in module.notes() {
            eprintln!("klab: {note}");
        }
        let t = std::time::Instant::now();
        let state = StateReader::new(&unopened.uuid);
        setup_s += t.elapsed().as_secs_f64();
        Ok(Prepared {
            unopened,
            module,
            state,
            setup_s,
            compile_s,
        })
    }

    /// The device `ordinal` opened, `decl`'s module compiled (or loaded) and the device
    /// checker prepared, verifying as `policy` says.
    pub fn open(
        manifest: &Manifest,
        decl: &KernelDecl,
        ordinal: u32,
        policy: VerifyPolicy,
    ) -> Result<Session, RunError> {
        Session::prepare(manifest, decl, ordinal)?.open(policy)
    }

    /// Close the device (the backend, and with it the stream, the loaded modules and
    /// everything made on them) and keep the module's description for the receipt; true
    /// when the driver then says this process has no context left on the device: what is
    /// left of the process runs on the host. False while another [`Device`] of this
    /// process holds it (a round's blocks share one).
    pub fn release_device(self) -> (Module, bool) {
        let ordinal = self.backend.facts().ordinal;
        drop(self.backend);
        let released = Device::context_active(ordinal).is_ok_and(|active| !active);
        (self.module, released)
    }

    /// The setup and compile seconds not yet charged to a block (then zero).
    pub(crate) fn take_open_time(&mut self) -> (f64, f64) {
        let t = (self.setup_s, self.compile_s);
        (self.setup_s, self.compile_s) = (0.0, 0.0);
        t
    }
}

impl Prepared {
    /// Open the device and load the module: the session.
    pub fn open(self, policy: VerifyPolicy) -> Result<Session, RunError> {
        let t = std::time::Instant::now();
        let device = Device::open(self.unopened.ordinal)?;
        let setup_s = t.elapsed().as_secs_f64();
        self.on(device, setup_s, policy)
    }

    /// The session on a device already open (another block of the same process opened it),
    /// `opened_s` the seconds that took, if this session is to be charged with them.
    pub fn on(
        self,
        device: Device,
        opened_s: f64,
        policy: VerifyPolicy,
    ) -> Result<Session, RunError> {
        let Prepared {
            unopened,
            module,
            state,
            mut setup_s,
            mut compile_s,
        } = self;
        setup_s += opened_s;
        if device.facts().uuid != unopened.uuid {
            return Err(RunError::Message(format!(
                "the module was built for device {}, not the one opened ({})",
                unopened.uuid,
                device.facts().uuid
            )));
        }
        let t = std::time::Instant::now();
        let mut backend = CudaBackend::from_module(device, &module, policy)?;
        setup_s += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        backend.prepare_checker();
        compile_s += t.elapsed().as_secs_f64();
        Ok(Session {
            backend,
            module,
            state,
            setup_s,
            compile_s,
        })
    }
}
