//! Metrics: every metric defined once ([`catalog`]), recorded across the service through the
//! functions of [`record`], kept by the one [`Registry`] a host installs, and read out as
//! CloudWatch embedded metric format ([`emf`], the functions) or Prometheus text
//! ([`prometheus`], the local server's `/metrics`).
//!
//! With no registry installed (the local server without `--metrics`) recording is one atomic
//! load; with one, a read lock, a hash of the series' labels and an atomic add.

pub mod catalog;
pub mod emf;
mod global;
pub mod prometheus;
pub mod record;
mod registry;

pub use catalog::{Kind, Metric, Unit};
pub use global::{enabled, flush_emf, install, installed};
pub use record::*;
pub use registry::{Labels, Mode, Registry, Sample, Value};
