//! The agent port (what runs on an accepted message, `port`), an agent's turn and the narrow
//! host the runner gives it (`turn`), and the agents behind the port: the model
//! agent (the tool loop over the configured model providers, `model`), `echo` (answers with
//! the text it got, for tests) and `tck` (the A2A TCK's scenarios, driven by the message id).

mod a2a_client;
mod echo;
mod model;
mod port;
mod remote;
mod tck;
mod turn;

pub use echo::EchoAgent;
pub use model::{ModelAgent, ModelAgentConfig};
pub use port::{Agent, AgentReply, ArtifactChunk, RemoteEnd, TurnEnd};
pub use tck::TckAgent;
pub use turn::{TurnContext, TurnHost, TurnWrite};
