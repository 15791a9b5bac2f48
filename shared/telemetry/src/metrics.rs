//! Metrics: the names recorded across the service and the recorders the hosts install.
