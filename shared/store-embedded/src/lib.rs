//! The embedded store: the local default, a crash-safe redb file (copy-on-write B-trees) and
//! its write-ahead log ([`wal`]; every commit is in the log, fsynced, before anyone is
//! answered or can read it), with exactly the contract of the DynamoDB adapter.
//!
//! Every write goes through one writer thread ([`writer`]) that applies the writes queued
//! together as one group and makes it durable once (group commit): in the write-ahead log,
//! and in memory ([`memtable`]) where readers find it; once a second the groups held in memory
//! are written into the redb file in one transaction (a checkpoint) by a thread of their own.
//! Each write's conditions (version, message ids, inbox items, leases) are checked before it
//! writes anything, so one refused write leaves nothing in the shared group: a commit stands
//! or falls whole, the same all-or-nothing the DynamoDB adapter gets from
//! `TransactWriteItems`, with conditions judged against the state before the commit.
//!
//! The writer thread does only the rows' work: documents are encoded, and the conditions that
//! follow from the version (states, roles: a task at the version the caller read *is* the
//! task the caller read) are judged, on the caller's thread. Reads run on the caller's thread
//! too (a read of memory or cached pages takes microseconds, less than a hand-off to another
//! thread). The size rules of `task_store::limits` apply unchanged, so a task that works here
//! works on AWS.
//!
//! Where things live: `items` the tables and the documents in them; `open` opening, table
//! creation and recovery; `snapshot` and `reads` the read layer; `commit` a commit's
//! conditions and writes; `tasks`, `list`, `inbox`, `leases`, `push` and `retention` (the
//! purge) the store port's traits; `backup` the online copy; `error` the conversions into
//! `StoreError`. Beneath them the writer thread
//! (`writer`), its write-ahead log (`wal`), its layers (`memtable`, `logged`, `tables`).

mod backup;
mod commit;
mod error;
mod inbox;
mod items;
mod leases;
mod list;
mod logged;
mod memtable;
mod open;
mod push;
mod reads;
mod retention;
mod snapshot;
mod tables;
mod tasks;
mod wal;
mod writer;

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use redb::Database;

pub use backup::BACKUP_FILE;
pub use wal::groups_in_log;

/// The store. Cheap to clone: clones share the open database and its writer; the last one
/// dropped waits for queued writes and closes the file.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    /// What readers see: the published groups, in memory and in the file.
    view: Arc<writer::View>,
    writer: Arc<writer::Writer>,
    /// Every task that has had a push config since the file was opened (redb locks the file,
    /// so no other process writes configs). A config's task is added when its write is
    /// applied, and stays after its configs are deleted (the dispatcher then lists none).
    push_tasks: Arc<RwLock<HashSet<String>>>,
    /// The participant whose listing entries and counts are not kept (the service's own
    /// agent: on every task, it never lists).
    unlisted: Option<Arc<str>>,
}

impl EmbeddedStore {
    /// Keeps no ListTasks entries or counts for `participant` (the service's own agent, who
    /// is on every task and never lists: its entries would double the listing's writes).
    #[must_use]
    pub fn without_listing_for(mut self, participant: impl Into<Arc<str>>) -> Self {
        self.unlisted = Some(participant.into());
        self
    }
}

/// How the store runs; [`Options::default`] is what [`EmbeddedStore::open`] uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long writes stay in memory (and in the write-ahead log) at most before they are
    /// written into the file (a checkpoint, one redb transaction for all of them). Longer
    /// means fewer, bigger checkpoints, more memory and a longer replay after a crash;
    /// `Duration::ZERO` checkpoints after every group (for tests: rows are then read from the
    /// file and the layers at once).
    pub checkpoint_interval: std::time::Duration,
    /// The memory redb may keep of the file's pages (its read cache and write buffer). The
    /// writes of the last second or two are in memory anyway, in the layers; redb's default of
    /// 1 GiB made the process grow by the file's growth until it had that much (and cost
    /// the page faults of fresh memory all along: a tenth of the CPU under a load of new tasks).
    pub cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            checkpoint_interval: std::time::Duration::from_secs(1),
            cache_bytes: 64 << 20,
        }
    }
}
