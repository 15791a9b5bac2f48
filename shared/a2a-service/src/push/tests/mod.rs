//! Push delivery against real webhook receivers on 127.0.0.1, the URL policy, and the
//! dispatcher over the memory store.

mod dispatcher;
mod fixtures;
mod policy;
mod sender;
