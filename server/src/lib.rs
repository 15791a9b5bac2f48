//! The local server: its flags, the store it opens, and the HTTP listener that mounts the
//! protocol bindings (`a2a-http`) over the service the assembly builds (`assembly`).

pub mod allocator;
mod console;
mod health;
mod listener;
mod maintenance;
mod metrics;
mod options;
mod server;

pub use assembly::AgentProfile;
pub use options::{Options, StoreKind};
pub use server::Server;
