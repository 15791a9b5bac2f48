//! Tests of the bindings through [`crate::handle`], against the recording test double in
//! [`crate::testkit`]: every method through both bindings, the error mapping on the wire, the
//! header, content-type, routing and SSE rules.

mod card;
mod headers;
mod jsonrpc;
mod rate_limit;
mod records;
mod rest;
mod streaming;
