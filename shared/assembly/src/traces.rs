//! Both hosts' traces: where spans go and the subscriber that records them (with the host's
//! own log layer).

use telemetry::traces::{Export, Logs, Tracing, TracingError};
use tracing_subscriber::EnvFilter;

use crate::Settings;

/// The service's name on its spans.
const SERVICE_NAME: &str = "tiny-harness";

/// The local server's export: OTLP when `TH_OTLP_ENDPOINT` is set, else none.
pub fn local_export(settings: &Settings) -> Export {
    settings
        .otlp_endpoint
        .clone()
        .map_or(Export::Off, Export::Otlp)
}

/// A function's export: the X-Ray daemon Lambda runs with active tracing, else none.
pub fn function_export() -> Export {
    Export::xray_from_env()
}

/// Installs the process's subscriber: `logs` filtered by `RUST_LOG` (default `info`), and the
/// spans exported to `export`.
pub fn install_tracing(logs: &impl Logs, export: &Export) -> Result<Tracing, TracingError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    telemetry::traces::install(logs, filter, export, SERVICE_NAME)
}
