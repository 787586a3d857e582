//! The JIT reports what it does through `tracing` spans (docs/jit.md): `pgas.discover`,
//! `pgas.compile_batch`, `pgas.compile`, `pgas.load`, `pgas.launch`. This checks, with no GPU, that a
//! subscriber sees the discovery and compile spans; the load and launch spans need a GPU and come
//! from the same macro. Needs NVRTC (CI sets `PGAS_CUDA_HOME` and `PGAS_NVSHMEM_HOME`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pgas_runtime::jit::Toolchain;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records the name of every span opened (shared, so the test reads it after the run).
#[derive(Clone, Default)]
struct Recorder {
    names: Arc<Mutex<Vec<String>>>,
    next: Arc<AtomicU64>,
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.names
            .lock()
            .unwrap()
            .push(span.metadata().name().to_owned());
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn discovery_and_compile_open_spans() {
    let rec = Recorder::default();
    tracing::subscriber::with_default(rec.clone(), || {
        let tc = Toolchain::discover()
            .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
        let src = r#"extern "C" __global__ void traced(float* x) { x[0] = 1.0f; }"#;
        tc.compile_cached(None, None, src, "traced", (9, 0))
            .unwrap();
    });
    let names = rec.names.lock().unwrap().clone();
    assert!(names.contains(&"pgas.discover".to_owned()), "{names:?}");
    assert!(names.contains(&"pgas.compile".to_owned()), "{names:?}");
}
