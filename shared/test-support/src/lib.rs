//! What the end-to-end tests of the local server and the in-process tests of the functions
//! share: the real `local-server` binary as a child process ([`server`]), a client for both
//! bindings ([`client`]) and the A2A methods through either ([`api`]) with their errors in one
//! shape ([`outcome`]), SSE readers ([`sse`]), message builders and readers ([`fixtures`]),
//! bounded waits ([`wait`]), a webhook receiver ([`webhook`]), an OTLP collector ([`otlp`]) and an
//! OpenAI-compatible model server ([`openai_stub`]).
//!
//! Nothing here sleeps to make a test pass: waits are for an event to arrive, bounded by
//! [`WAIT`] only so that a broken server fails a test instead of hanging it. A helper fails
//! the test when something is wrong, so these panic freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod client;
pub mod fixtures;
pub mod openai_stub;
pub mod otlp;
pub mod outcome;
pub mod server;
pub mod sse;
pub mod wait;
pub mod webhook;

pub use api::{Api, poll_state, poll_task};
pub use client::{BOTH, Binding, Client, Reply};
pub use fixtures::*;
pub use openai_stub::{OpenAiStub, StubConfig, StubReply};
pub use outcome::{ApiError, Refused};
pub use server::{Server, ServerBuilder};
pub use sse::{Events, Sse};
pub use wait::{WAIT, poll};
pub use webhook::{Delivery, Webhook};
