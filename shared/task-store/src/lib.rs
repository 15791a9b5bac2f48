//! The store port: what the service needs from storage, as narrow traits whose signatures
//! state the concurrency contract, the types they exchange, the size rules every adapter
//! applies, and (feature `contract`) the contract suite every adapter must pass.
//!
//! Adapters: `store-dynamodb` (AWS, single-table design with conditional writes and
//! transactions) and `store-embedded` (the local default, a crash-safe file store).

pub mod error;
pub mod limits;
pub mod listing;
pub mod model;
pub mod port;
pub mod retention;

#[cfg(feature = "contract")]
pub mod contract;

pub use error::{Conflict, StoreError, StoreResult};
pub use model::*;
pub use port::*;
pub use retention::{Candidate, Purged};
