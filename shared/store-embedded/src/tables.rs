//! Every table at once, as the writer sees them: [`Tables`] (the layers over the file, for a
//! group's jobs; their writes become one write-ahead log payload) and [`FileTables`] (the
//! file's tables in a write transaction, for checkpoints and replay).

use redb::WriteTransaction;

use crate::items::{
    ARTIFACTS, AUDIT, BY_CONTEXT, BY_STATE, Counters, EVENTS, HISTORY, INBOX, INDEX, LEASES,
    LIST_COUNTS, MESSAGE_IDS, META, PUSH, StateKey, TABLES, TASKS, TRANSCRIPT, TimedKey,
};
use crate::logged::{self, Disk, Journal, Logged, Sink};
use crate::memtable::MemTable;

/// `&mut` each table of `$tables` (a [`Tables`] or a [`FileTables`]), in the order of their
/// tags: the one statement of that order both kinds' lists share.
macro_rules! in_tag_order {
    ($tables:expr) => {
        [
            &mut $tables.tasks,
            &mut $tables.meta,
            &mut $tables.events,
            &mut $tables.history,
            &mut $tables.transcript,
            &mut $tables.artifacts,
            &mut $tables.message_ids,
            &mut $tables.inbox,
            &mut $tables.audit,
            &mut $tables.push,
            &mut $tables.leases,
            &mut $tables.index,
            &mut $tables.by_state,
            &mut $tables.by_context,
            &mut $tables.list_counts,
        ]
    };
}

/// Every table as the writer's jobs see them: the layers, then the file ([`Logged`]), all
/// writes going into the active layer and the write-ahead log.
pub(crate) struct Tables<'a> {
    pub(crate) tasks: Logged<'a, &'static str, &'static str>,
    pub(crate) meta: Logged<'a, &'static str, Counters>,
    pub(crate) events: Logged<'a, (&'static str, u64), &'static str>,
    pub(crate) history: Logged<'a, (&'static str, u64), &'static str>,
    pub(crate) transcript: Logged<'a, (&'static str, u64), &'static str>,
    pub(crate) artifacts: Logged<'a, (&'static str, &'static str), &'static str>,
    pub(crate) message_ids: Logged<'a, (&'static str, &'static str), ()>,
    pub(crate) inbox: Logged<'a, TimedKey, (&'static str, &'static str)>,
    pub(crate) audit: Logged<'a, TimedKey, &'static str>,
    pub(crate) push: Logged<'a, (&'static str, &'static str), &'static str>,
    pub(crate) leases: Logged<'a, &'static str, &'static str>,
    pub(crate) index: Logged<'a, TimedKey, ()>,
    pub(crate) by_state: Logged<'a, StateKey, ()>,
    pub(crate) by_context: Logged<'a, (&'static str, &'static str, &'static str), ()>,
    pub(crate) list_counts: Logged<'a, (&'static str, &'static str), u64>,
}

impl<'a> Tables<'a> {
    /// The tables of group `seq`: writes go into `active`, reads see `active`, then
    /// `frozen`, then the file.
    pub(crate) fn new(
        active: &'a mut [MemTable; TABLES],
        frozen: Option<&'a [MemTable; TABLES]>,
        disk: &'a Disk<'a>,
        seq: u64,
    ) -> Self {
        let [
            tasks,
            meta,
            events,
            history,
            transcript,
            artifacts,
            message_ids,
            inbox,
            audit,
            push,
            leases,
            index,
            by_state,
            by_context,
            list_counts,
        ] = active;
        let older = |tag: usize| frozen.map(|f| &f[tag]);
        Self {
            tasks: Logged::new(TASKS, tasks, older(TASKS.tag), disk, seq),
            meta: Logged::new(META, meta, older(META.tag), disk, seq),
            events: Logged::new(EVENTS, events, older(EVENTS.tag), disk, seq),
            history: Logged::new(HISTORY, history, older(HISTORY.tag), disk, seq),
            transcript: Logged::new(TRANSCRIPT, transcript, older(TRANSCRIPT.tag), disk, seq),
            artifacts: Logged::new(ARTIFACTS, artifacts, older(ARTIFACTS.tag), disk, seq),
            message_ids: Logged::new(MESSAGE_IDS, message_ids, older(MESSAGE_IDS.tag), disk, seq),
            inbox: Logged::new(INBOX, inbox, older(INBOX.tag), disk, seq),
            audit: Logged::new(AUDIT, audit, older(AUDIT.tag), disk, seq),
            push: Logged::new(PUSH, push, older(PUSH.tag), disk, seq),
            leases: Logged::new(LEASES, leases, older(LEASES.tag), disk, seq),
            index: Logged::new(INDEX, index, older(INDEX.tag), disk, seq),
            by_state: Logged::new(BY_STATE, by_state, older(BY_STATE.tag), disk, seq),
            by_context: Logged::new(BY_CONTEXT, by_context, older(BY_CONTEXT.tag), disk, seq),
            list_counts: Logged::new(LIST_COUNTS, list_counts, older(LIST_COUNTS.tag), disk, seq),
        }
    }

    /// The tables in the order of their tags.
    fn journals(&mut self) -> [&mut dyn Journal; TABLES] {
        in_tag_order!(self)
    }

    /// Every write made through the tables since they were opened (or since the last call),
    /// as one write-ahead log payload; empty if nothing was written.
    pub(crate) fn take_writes(&mut self) -> Vec<u8> {
        let written: Vec<(u8, Vec<u8>)> = (0u8..)
            .zip(self.journals())
            .map(|(tag, table)| (tag, table.take_ops()))
            .filter(|(_, ops)| !ops.is_empty())
            .collect();
        let mut payload =
            Vec::with_capacity(written.iter().map(|(_, ops)| 1 + 4 + ops.len()).sum());
        for (tag, ops) in &written {
            payload.push(*tag);
            logged::put_bytes(&mut payload, ops);
        }
        payload
    }
}

/// The (tag, op list) parts of a payload [`Tables::take_writes`] gave.
fn payload_parts(
    mut payload: &[u8],
) -> impl Iterator<Item = Result<(usize, &[u8]), logged::ReplayError>> {
    std::iter::from_fn(move || {
        let (&tag, rest) = payload.split_first()?;
        match logged::take_bytes(rest) {
            Ok((ops, rest)) if usize::from(tag) < TABLES => {
                payload = rest;
                Some(Ok((usize::from(tag), ops)))
            }
            Ok(_) => {
                payload = &[];
                Some(Err(logged::ReplayError::Malformed(format!(
                    "unknown table {tag}"
                ))))
            }
            Err(err) => {
                payload = &[];
                Some(Err(err))
            }
        }
    })
}

/// Forgets what group `seq` wrote into `active` by `payload` (the group did not become
/// durable).
pub(crate) fn undo_writes(active: &mut [MemTable; TABLES], seq: u64, payload: &[u8]) {
    for (tag, ops) in payload_parts(payload).map_while(Result::ok) {
        logged::undo(&mut active[tag], seq, ops);
    }
}

/// Every table of the file, opened in a write transaction: what a checkpoint writes a layer
/// into and what opening the store replays the log onto.
pub(crate) struct FileTables<'t> {
    pub(crate) tasks: redb::Table<'t, &'static str, &'static str>,
    pub(crate) meta: redb::Table<'t, &'static str, Counters>,
    pub(crate) events: redb::Table<'t, (&'static str, u64), &'static str>,
    pub(crate) history: redb::Table<'t, (&'static str, u64), &'static str>,
    pub(crate) transcript: redb::Table<'t, (&'static str, u64), &'static str>,
    pub(crate) artifacts: redb::Table<'t, (&'static str, &'static str), &'static str>,
    pub(crate) message_ids: redb::Table<'t, (&'static str, &'static str), ()>,
    pub(crate) inbox: redb::Table<'t, TimedKey, (&'static str, &'static str)>,
    pub(crate) audit: redb::Table<'t, TimedKey, &'static str>,
    pub(crate) push: redb::Table<'t, (&'static str, &'static str), &'static str>,
    pub(crate) leases: redb::Table<'t, &'static str, &'static str>,
    pub(crate) index: redb::Table<'t, TimedKey, ()>,
    pub(crate) by_state: redb::Table<'t, StateKey, ()>,
    pub(crate) by_context: redb::Table<'t, (&'static str, &'static str, &'static str), ()>,
    pub(crate) list_counts: redb::Table<'t, (&'static str, &'static str), u64>,
}

impl<'t> FileTables<'t> {
    /// Opens (creating if needed) every table in `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction) -> Result<Self, redb::TableError> {
        Ok(Self {
            tasks: txn.open_table(TASKS.table)?,
            meta: txn.open_table(META.table)?,
            events: txn.open_table(EVENTS.table)?,
            history: txn.open_table(HISTORY.table)?,
            transcript: txn.open_table(TRANSCRIPT.table)?,
            artifacts: txn.open_table(ARTIFACTS.table)?,
            message_ids: txn.open_table(MESSAGE_IDS.table)?,
            inbox: txn.open_table(INBOX.table)?,
            audit: txn.open_table(AUDIT.table)?,
            push: txn.open_table(PUSH.table)?,
            leases: txn.open_table(LEASES.table)?,
            index: txn.open_table(INDEX.table)?,
            by_state: txn.open_table(BY_STATE.table)?,
            by_context: txn.open_table(BY_CONTEXT.table)?,
            list_counts: txn.open_table(LIST_COUNTS.table)?,
        })
    }

    /// The tables in the order of their tags.
    fn sinks(&mut self) -> [&mut dyn Sink; TABLES] {
        in_tag_order!(self)
    }

    /// Repeats the writes of a payload [`Tables::take_writes`] gave.
    pub(crate) fn replay(&mut self, payload: &[u8]) -> Result<(), logged::ReplayError> {
        for part in payload_parts(payload) {
            let (tag, ops) = part?;
            let sinks = self.sinks();
            logged::replay(sinks[tag], ops)?;
        }
        Ok(())
    }

    /// Writes what a layer leaves of every row it holds (its newest version of each).
    pub(crate) fn write_layer(
        &mut self,
        layer: &[MemTable; TABLES],
    ) -> Result<(), redb::StorageError> {
        for (sink, rows) in self.sinks().into_iter().zip(layer) {
            for (key, value) in rows.newest_rows() {
                sink.put(key, value)?;
            }
        }
        Ok(())
    }
}
