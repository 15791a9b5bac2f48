//! What an operator sees of the service: its metrics and its traces, set up once by the
//! assembly both hosts share.

pub mod metrics;
pub mod traces;
