//! The one writer: a thread that applies every write, with group commit.
//!
//! redb runs one write transaction at a time. The writer takes every job queued while the
//! previous commit ran and applies them all in one transaction, makes it durable once, and
//! only then answers their callers: a caller is never told "done" before its write is on
//! disk, and under load one commit serves many writes.
//!
//! A group is made durable by the write-ahead log ([`crate::wal`]): its writes are appended
//! to the log and synced, and only then is the redb transaction committed, without a sync of
//! its own (a durable redb commit syncs a few dozen scattered pages, which on a virtual disk
//! costs several times the sync of one append). Once a second, or when the log passes
//! [`CHECKPOINT_BYTES`], a group is instead committed durably with the sequence of the last
//! group it covers (a checkpoint) and the log is emptied. Opening the store replays the
//! groups past the checkpoint ([`Log::recover`]); closing it checkpoints.
//!
//! A job has two phases. Its *check* reads what its conditions need (a version, a lease, a
//! message id) and fails with the reason before anything is written; only if every check
//! holds does its *apply* write, and apply fails only when the database does. A refused job
//! therefore leaves nothing behind in the shared transaction, and later jobs of the batch see
//! exactly the writes of the earlier ones that were applied (the batch runs them in queue
//! order, like one writer taking them one by one). If the database fails mid-apply, the
//! transaction is dropped (nothing of it is written) and every job applied in it is answered
//! with that failure; the jobs not yet run go into a fresh transaction.
//!
//! Readers read committed transactions only, so they never see a write before it is durable.
//!
//! The store's tables are opened once per transaction ([`Tables`]) and every job of the
//! batch works on them: opening a redb table looks it up in the transaction's table tree and
//! checks its key and value types, which cost as much as the writes of a small job.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use task_store::{StoreError, StoreResult};

use crate::Tables;
use crate::wal::{AppendError, Wal};

/// Most jobs one commit covers (bounds a caller's wait under a flood of writes).
const MAX_BATCH: usize = 512;
/// A checkpoint at least this often while writes come (bounds the log, and the replay after
/// a crash, to about this much work).
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// ... and whenever the log grows past this.
const CHECKPOINT_BYTES: u64 = 64 << 20;
/// "seq" → the last group a durable commit covers: the log's records up to it are applied.
const CHECKPOINT: TableDefinition<&str, u64> = TableDefinition::new("wal_checkpoint");
const CHECKPOINT_KEY: &str = "seq";

pub(crate) fn backend(err: impl std::fmt::Display) -> StoreError {
    StoreError::backend(std::io::Error::other(err.to_string()))
}

/// What running a job did to the shared transaction.
enum Ran {
    /// Its checks held and it wrote.
    Applied,
    /// A check failed; nothing was written.
    Refused,
    /// The database failed while it wrote: the transaction is unusable.
    Broken,
}

trait Job: Send {
    fn run(&mut self, tables: &mut Tables<'_>) -> Ran;
    /// Answers the caller; `committed` is how the transaction it ran in ended (ignored for a
    /// refused job).
    fn answer(self: Box<Self>, committed: Result<(), &str>);
}

struct Typed<I, C, T, K, A> {
    input: Option<I>,
    check: Option<K>,
    apply: Option<A>,
    outcome: Option<StoreResult<T>>,
    reply: tokio::sync::oneshot::Sender<StoreResult<T>>,
    _check_output: std::marker::PhantomData<fn() -> C>,
}

impl<I, C, T, K, A> Job for Typed<I, C, T, K, A>
where
    I: Send,
    T: Send,
    K: FnOnce(&Tables<'_>, &I) -> StoreResult<C> + Send,
    A: FnOnce(&mut Tables<'_>, I, C) -> StoreResult<T> + Send,
{
    fn run(&mut self, tables: &mut Tables<'_>) -> Ran {
        let (Some(input), Some(check), Some(apply)) =
            (self.input.take(), self.check.take(), self.apply.take())
        else {
            self.outcome = Some(Err(backend("a write job ran twice")));
            return Ran::Refused;
        };
        let checked = match check(tables, &input) {
            Ok(checked) => checked,
            Err(err) => {
                self.outcome = Some(Err(err));
                return Ran::Refused;
            }
        };
        let applied = apply(tables, input, checked);
        let ran = if applied.is_ok() {
            Ran::Applied
        } else {
            Ran::Broken
        };
        self.outcome = Some(applied);
        ran
    }

    fn answer(self: Box<Self>, committed: Result<(), &str>) {
        let result = match (self.outcome, committed) {
            (None, Err(why)) => Err(backend(format!("the write was not committed: {why}"))),
            (None, Ok(())) => Err(backend("a write job was never run")),
            (Some(Err(err)), _) => Err(err),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Ok(_)), Err(why)) => Err(backend(format!("the write was not committed: {why}"))),
        };
        // The caller may have gone away (a dropped request); the write stands.
        let _ = self.reply.send(result);
    }
}

pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    pub(crate) fn start(db: Arc<Database>, log: Log) -> StoreResult<Self> {
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        let thread = std::thread::Builder::new()
            .name("embedded-store-writer".to_owned())
            .spawn(move || run(&db, &queue, log))
            .map_err(backend)?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Queues a write: `check` (which must not write) decides whether it may happen and
    /// what `apply` needs; `apply` writes (and may fail only by a database error). Returns
    /// `apply`'s result once the transaction is durably committed, or `check`'s refusal.
    pub(crate) async fn write<I, C, T, K, A>(&self, input: I, check: K, apply: A) -> StoreResult<T>
    where
        I: Send + 'static,
        C: 'static,
        T: Send + 'static,
        K: for<'t> FnOnce(&Tables<'t>, &I) -> StoreResult<C> + Send + 'static,
        A: for<'t> FnOnce(&mut Tables<'t>, I, C) -> StoreResult<T> + Send + 'static,
    {
        self.submit(input, check, apply)?.await
    }

    /// [`write`](Self::write) in two steps: the write is queued when this returns (so a write
    /// queued afterwards runs after it, in the same batch or a later one), and the returned
    /// future gives its outcome once durable.
    pub(crate) fn submit<I, C, T, K, A>(
        &self,
        input: I,
        check: K,
        apply: A,
    ) -> StoreResult<impl std::future::Future<Output = StoreResult<T>> + Send + 'static>
    where
        I: Send + 'static,
        C: 'static,
        T: Send + 'static,
        K: for<'t> FnOnce(&Tables<'t>, &I) -> StoreResult<C> + Send + 'static,
        A: for<'t> FnOnce(&mut Tables<'t>, I, C) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Box<dyn Job> = Box::new(Typed {
            input: Some(input),
            check: Some(check),
            apply: Some(apply),
            outcome: None,
            reply,
            _check_output: std::marker::PhantomData,
        });
        self.jobs
            .as_ref()
            .ok_or_else(|| backend("the store is closed"))?
            .send(job)
            .map_err(|_| backend("the store's writer stopped"))?;
        Ok(async move {
            answer
                .await
                .map_err(|_| backend("the store's writer stopped"))?
        })
    }
}

impl Drop for Writer {
    /// Lets queued writes finish and closes the database, so the file can be opened again.
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers every job with a failure that happened before any of them ran.
fn fail_all(jobs: impl Iterator<Item = Box<dyn Job>>, why: &str) {
    for job in jobs {
        job.answer(Err(why));
    }
}

/// The store's durability: the write-ahead log and where it stands.
pub(crate) struct Log {
    wal: Wal,
    /// The sequence of the next group.
    next_seq: u64,
    /// The last group a durable commit covers.
    checkpointed: u64,
    last_checkpoint: Instant,
    /// Why no more groups may be committed, once the log and the database disagree.
    broken: Option<String>,
}

impl Log {
    /// Opens the log beside the database and replays onto it, in one durable commit, every
    /// group the log holds past the database's checkpoint; the log is then emptied.
    pub(crate) fn recover(db: &Database, path: &Path) -> StoreResult<Self> {
        let (mut wal, records) = Wal::open(path).map_err(backend)?;
        let txn = db.begin_write().map_err(backend)?;
        let mut checkpointed = checkpoint_of(&txn)?;
        let pending: Vec<_> = records
            .into_iter()
            .filter(|r| r.seq > checkpointed)
            .collect();
        if let Some(last) = pending.last().map(|r| r.seq) {
            {
                let mut tables = Tables::open(&txn).map_err(backend)?;
                for record in &pending {
                    tables.replay(&record.payload).map_err(|err| {
                        StoreError::Corrupt(format!(
                            "the write-ahead log's group {} cannot be replayed: {err}",
                            record.seq
                        ))
                    })?;
                }
            }
            set_checkpoint(&txn, last)?;
            checkpointed = last;
        }
        txn.commit().map_err(backend)?;
        wal.clear().map_err(backend)?;
        Ok(Self {
            wal,
            next_seq: checkpointed + 1,
            checkpointed,
            last_checkpoint: Instant::now(),
            broken: None,
        })
    }

    fn checkpoint_due(&self) -> bool {
        self.last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL || self.wal.len() >= CHECKPOINT_BYTES
    }

    /// Makes a group durable: `writes` (its payload for the log) are logged then `txn`
    /// committed without a sync, or `txn` is committed durably as a checkpoint.
    fn commit(&mut self, mut txn: WriteTransaction, writes: &[u8]) -> Result<(), String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        if writes.is_empty() {
            return Ok(()); // nothing to commit; dropping the transaction aborts it
        }
        let seq = self.next_seq;
        if self.checkpoint_due() {
            return self.checkpoint(txn, seq);
        }
        match self.wal.append(seq, writes) {
            Ok(()) => {}
            Err(err @ AppendError::NotWritten(_)) => return Err(err.to_string()),
            Err(err @ AppendError::Torn(_)) => return Err(self.stop(err.to_string())),
        }
        self.next_seq += 1;
        let committed = txn
            .set_durability(redb::Durability::None)
            .map_err(|e| e.to_string())
            .and_then(|()| txn.commit().map_err(|e| e.to_string()));
        // The group is in the log: it would come back at the next opening.
        committed.map_err(|err| self.stop(format!("the database refused a logged group: {err}")))
    }

    /// Commits `txn` durably, recording that it covers every group up to `seq`, and empties
    /// the log.
    fn checkpoint(&mut self, txn: WriteTransaction, seq: u64) -> Result<(), String> {
        set_checkpoint(&txn, seq).map_err(|e| e.to_string())?;
        txn.commit().map_err(|e| e.to_string())?;
        self.next_seq = seq + 1;
        self.checkpointed = seq;
        self.last_checkpoint = Instant::now();
        // Left full, the log is only read further at the next opening: its records are all
        // at or below the checkpoint and skipped.
        if let Err(err) = self.wal.clear() {
            tracing::warn!(error = %err, "the write-ahead log was not emptied");
        }
        Ok(())
    }

    /// A checkpoint of everything committed so far, when the store closes.
    fn close(&mut self, db: &Database) {
        if self.broken.is_some() || self.checkpointed + 1 == self.next_seq {
            return;
        }
        let closed = db
            .begin_write()
            .map_err(|e| e.to_string())
            .and_then(|txn| self.checkpoint(txn, self.next_seq - 1));
        if let Err(err) = closed {
            tracing::warn!(error = %err, "no checkpoint at closing; the next opening replays the log");
        }
    }

    fn stop(&mut self, why: String) -> String {
        let why = format!("{why}; the store takes no more writes until it is opened again");
        self.broken = Some(why.clone());
        why
    }
}

fn checkpoint_of(txn: &WriteTransaction) -> StoreResult<u64> {
    let table = txn.open_table(CHECKPOINT).map_err(backend)?;
    let seq = table.get(CHECKPOINT_KEY).map_err(backend)?;
    Ok(seq.map_or(0, |s| s.value()))
}

fn set_checkpoint(txn: &WriteTransaction, seq: u64) -> StoreResult<()> {
    txn.open_table(CHECKPOINT)
        .map_err(backend)?
        .insert(CHECKPOINT_KEY, seq)
        .map_err(backend)?;
    Ok(())
}

fn run(db: &Database, queue: &mpsc::Receiver<Box<dyn Job>>, mut log: Log) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut pending = batch.into_iter();
        // One transaction per round; a round ends when the batch is done or the database
        // broke a transaction (the rest of the batch then gets a fresh one).
        while !pending.as_slice().is_empty() {
            let txn = match db.begin_write() {
                Ok(txn) => txn,
                Err(err) => {
                    fail_all(pending, &err.to_string());
                    break;
                }
            };
            let mut tables = match Tables::open(&txn) {
                Ok(tables) => tables,
                Err(err) => {
                    fail_all(pending, &err.to_string());
                    break;
                }
            };
            let mut applied = Vec::new();
            let mut refused = Vec::new();
            let mut broken = None;
            for mut job in pending.by_ref() {
                match job.run(&mut tables) {
                    Ran::Applied => applied.push(job),
                    Ran::Refused => refused.push(job),
                    Ran::Broken => {
                        broken = Some(job);
                        break;
                    }
                }
            }
            let writes = tables.take_writes();
            drop(tables); // the tables borrow the transaction they were opened in
            for job in refused {
                job.answer(Ok(()));
            }
            match broken {
                None => {
                    let committed = log.commit(txn, &writes);
                    for job in applied {
                        job.answer(committed.as_ref().map(|_| ()).map_err(String::as_str));
                    }
                    break;
                }
                Some(job) => {
                    drop(txn); // aborts: nothing of this round is written
                    job.answer(Ok(())); // its own database error
                    for job in applied {
                        job.answer(Err("the database failed during the same commit"));
                    }
                }
            }
        }
    }
    log.close(db);
}
