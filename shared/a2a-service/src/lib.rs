//! The A2A use cases of the service, over the domain core and the store.

pub mod api;
pub mod error;

pub use api::{A2aApi, EventStream, RequestContext};
pub use error::ServiceError;
