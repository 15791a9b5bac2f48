//! The domain core of the tiny-harness A2A service.
//!
//! Pure, deterministic code over in-memory values: the Task extension v1 object and its
//! envelopes, the participant policy, the plan DAG, the lifecycle state machine, the `/model`
//! and `/effort` commands, the twelve intrinsic tools, skills and A2UI validation. It knows
//! nothing of Lambda, HTTP or DynamoDB; the store, the protocol bindings and the agent runtime
//! build on it.

pub mod a2ui;
pub mod schemas;

/// URI of the Task extension v1.
pub const TASK_EXTENSION_URI: &str =
    "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";
/// URI of the channel extension (help requests).
pub const CHANNEL_EXTENSION_URI: &str =
    "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/channel/v1";
/// URI of the A2UI extension.
pub const A2UI_EXTENSION_URI: &str = "https://a2ui.org/a2a-extension/a2ui/v0.9.1";
/// The `Task.metadata` key that holds the extension object.
pub const TASK_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/task";
/// Media type of a task envelope data part.
pub const TASK_MEDIA_TYPE: &str = "application/vnd.tiny-harness.task+json";
/// Media type of the upstream event envelope data part (`{kind, payload}`).
pub const EVENT_MEDIA_TYPE: &str = "application/vnd.tiny-harness.event+json";
/// Media type of channel data parts (help requests).
pub const CHANNEL_MEDIA_TYPE: &str = "application/vnd.tiny-harness.channel+json";
/// Media type of A2UI data parts.
pub const A2UI_MEDIA_TYPE: &str = "application/a2ui+json";
/// The A2UI protocol version the service emits.
pub const A2UI_VERSION: &str = "v0.9.1";
/// The basic catalog, the only A2UI catalog the service accepts.
pub const A2UI_BASIC_CATALOG_ID: &str =
    "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json";

pub mod commands;
pub mod envelope;
pub mod error;
pub mod events;
pub mod extension;
pub mod ids;
pub mod lifecycle;
pub mod plan;
pub mod policy;
pub mod skills;
pub mod states;
pub mod task;
#[cfg(test)]
pub(crate) mod test_support;
pub mod tools;
pub mod validation;

pub use error::DomainError;
