//! The agent port (what runs on an accepted message, `port`), an agent's turn and the narrow
//! host the runner gives it (`turn`), and the agents behind the port: the model
//! agent (the tool loop over the configured model providers, `model`), `echo` (answers with
//! the text it got, for tests) and `tck` (the A2A TCK's scenarios, driven by the message id).

mod a2a_client;
mod compaction;
mod echo;
mod limits;
mod model;
mod port;
mod remote;
mod streamed;
mod tck;
mod transcript;
mod turn;

pub use echo::EchoAgent;
pub use model::{DEFAULT_INSTRUCTIONS, ModelAgent, ModelAgentConfig};
pub use port::{Agent, AgentReply, ArtifactChunk, RemoteEnd, TurnEnd};
pub use streamed::STREAMED_TEXT_ARTIFACT;
pub use tck::TckAgent;
pub use turn::{TurnContext, TurnHost, TurnWrite};
