//! One assembly of the service for both hosts (the local server and the Lambda functions).
//! [`names`] holds every setting's one name (environment variable and flag) and the renamed
//! ones refused at start-up; [`settings`] reads them into [`Settings`], the same way on both
//! hosts; [`build`] makes the agent, the service configuration, the push sender and the
//! service from them; [`traces`] installs the subscriber and the span exporter. The hosts keep only what is theirs: the listener or the Lambda runtime,
//! the store they open, the push dispatcher or the stream notifier.

pub mod build;
pub mod names;
pub mod settings;
pub mod traces;

pub use build::{
    AssemblyError, HostParts, agent, offline_agent, push_sender, service, service_config,
};
pub use settings::{AgentProfile, ConfigError, FromLookup, Settings, refuse_renamed};
