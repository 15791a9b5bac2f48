//! The A2A use cases of the service, over the domain core and the store.

pub mod agents;
pub mod api;
pub mod card;
mod commit_step;
pub mod config;
pub mod error;
pub mod extension_events;
pub mod identity;
pub mod listener;
mod message_checks;
mod metered;
pub mod push;
pub mod refusals;
pub mod runner;
pub mod service;
pub mod subtasks;
pub mod view;
mod views;

pub use agents::{
    Agent, AgentReply, ArtifactChunk, DEFAULT_INSTRUCTIONS, EchoAgent, ModelAgent,
    ModelAgentConfig, STREAMED_TEXT_ARTIFACT, TckAgent, TurnContext, TurnEnd, TurnWrite,
};
pub use api::{A2aApi, EventStream, RequestContext};
pub use config::ServiceConfig;
pub use error::ServiceError;
pub use listener::EventListener;
pub use runner::Runner;
pub use service::{RunDispatcher, Service};
