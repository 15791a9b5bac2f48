//! The process's one registry, installed by the host at start-up (at most once).

use std::io::Write;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use super::emf;
use super::registry::{Mode, Registry};

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Installs the registry of `mode`; a second call returns the first one's (a process has one
/// form of metrics).
pub fn install(mode: Mode) -> &'static Registry {
    REGISTRY.get_or_init(|| Registry::new(mode))
}

/// The installed registry, if any.
#[inline]
pub fn installed() -> Option<&'static Registry> {
    REGISTRY.get()
}

/// Whether a registry records (work done only for a metric can be skipped when not).
#[inline]
pub fn enabled() -> bool {
    REGISTRY.get().is_some()
}

/// Writes what was recorded since the last flush as EMF lines under `namespace` (a function
/// calls it when an invocation ends). Nothing without an EMF registry; a failed write is
/// lost metrics, never a failed invocation.
pub fn flush_emf(namespace: &str, out: &mut dyn Write) {
    let Some(registry) = installed().filter(|r| r.mode() == Mode::Emf) else {
        return;
    };
    let samples = registry.drain();
    if samples.is_empty() {
        return;
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default();
    let _ = emf::write(&samples, namespace, now_ms, out);
}
