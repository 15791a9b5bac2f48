//! One runner per task: the holder of the task's lease drains its inbox, one message at a
//! time, in inbox order, and runs the agent on each.
//!
//! Any invocation that queued a message may become the runner: it tries the lease, and if
//! another holds it the message waits for that holder, which drains the inbox before it
//! releases and looks once more after releasing (a message queued in between is picked up).
//! The release goes with the outcome of the last message the runner has (one write, not
//! two); when that outcome is not the usual one (a refusal, a note), it is a write of its own.
//! A message leaves the inbox only in the commit that records its outcome (the reply, the
//! refusal), so a runner that dies mid-turn leaves it queued for the next one.
//!
//! The rooms: `handle` (the `Runner` and the entry points that start runs), `leases` (taking,
//! keeping, giving up and sweeping leases), `run_loop` (the inbox drained, intake again, the
//! agent's turn), `outcome` (a turn's outcome recorded), `links` (a sub-task's note, an
//! assignee's answer), `host` (the narrow [`TurnHost`](crate::agents::TurnHost) agents see),
//! `commit` (every write, with the notes it owes parents), `items` (what the agent reads of a
//! message, its audit entry) and `interrupts` (a message that cuts the agent's run in
//! progress, and the record of the cut message).

mod commit;
mod handle;
mod host;
mod interrupts;
mod items;
mod leases;
mod links;
mod outcome;
mod run_loop;

pub use handle::{Created, Processed, Runner};
pub use items::agent_input;
