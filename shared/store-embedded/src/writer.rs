//! The one writer: a thread that applies every write, with group commit; and the
//! checkpointer, a thread that moves what the writer committed into the redb file.
//!
//! The writer takes every job queued while the previous group was being made durable, runs
//! them all against the active layer ([`crate::memtable`]), appends the group's writes to the
//! write-ahead log ([`crate::wal`]) and syncs it once, then *publishes* the group (readers see
//! it from then on) and only then answers its callers: a caller is never told "done" before
//! its write is on disk, no reader sees a write before it is, and under load one sync serves
//! many writes.
//!
//! Once a second while the active layer holds writes (or when it passes
//! [`CHECKPOINT_BYTES`]), the writer freezes it: a fresh layer takes the next groups, and the
//! next groups go to the log's other file. The checkpointer writes the frozen layer into redb
//! in one durable transaction that records the last group it covers, drops the layer (readers
//! find its rows in the file from then on) and empties the log file that held its groups,
//! which the writer takes back for the freeze after next. One redb transaction thus carries a
//! second of writes, and touches each B-tree page once for all of them; committing every group
//! in a transaction of its own copied and checksummed the same pages thousands of times a
//! second. Opening the store replays the groups of both files past the checkpoint
//! ([`Log::recover`]); closing it checkpoints everything.
//!
//! A job has two phases. Its *check* reads what its conditions need (a version, a lease, a
//! message id) and fails with the reason before anything is written; only if every check
//! holds does its *apply* write, and apply fails only when the store does. A refused job
//! therefore leaves nothing behind in the shared group, and later jobs of the batch see
//! exactly the writes of the earlier ones that were applied (the batch runs them in queue
//! order, like one writer taking them one by one). A group that does not become durable (the
//! log's append failed, or a job failed mid-apply) is taken out of the layer again, and every
//! job applied in it is answered with that failure; the jobs not yet run go into a fresh group.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use task_store::{StoreError, StoreResult};

use crate::error::backend;
use crate::items::compares;
use crate::logged::Disk;
use crate::memtable::Layer;
use crate::snapshot::{FileReader, Snapshot};
use crate::tables::{FileTables, Tables, undo_writes};
use crate::wal::{AppendError, Wal};

/// Most jobs one commit covers (bounds a caller's wait under a flood of writes).
const MAX_BATCH: usize = 512;
/// A checkpoint at least once per [`crate::Options::checkpoint_interval`] while the active layer
/// holds writes (bounds the memory the layers take, and the replay after a crash, to about
/// that much work), and whenever the active layer grows past this.
const CHECKPOINT_BYTES: usize = 64 << 20;
/// The active layer may grow past this only once the checkpoint in flight is done: the writer
/// waits for it (a disk slower than the writes holds the writes up, instead of the memory
/// growing without bound).
const MAX_LAYER_BYTES: usize = 512 << 20;
/// How often an idle writer looks whether the checkpoint in flight is done.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(10);
/// "seq" → the last group a durable commit covers: the log's records up to it are applied.
const CHECKPOINT: TableDefinition<&str, u64> = TableDefinition::new("wal_checkpoint");
const CHECKPOINT_KEY: &str = "seq";

/// What running a job did to the shared group.
enum Ran {
    /// Its checks held and it wrote.
    Applied,
    /// A check failed; nothing was written.
    Refused,
    /// The store failed while it wrote: the group is unusable.
    Broken,
}

trait Job: Send {
    fn run(&mut self, tables: &mut Tables<'_>) -> Ran;
    /// Answers the caller; `committed` is how the group it ran in ended (ignored for a
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

/// What readers see, and where the writer writes: the active layer, the frozen one while its
/// checkpoint is written, and the last published group.
pub(crate) struct View {
    state: RwLock<ViewState>,
}

struct ViewState {
    /// The last group in the log on disk: readers see the versions up to it.
    published: u64,
    active: Arc<Layer>,
    frozen: Option<Arc<Layer>>,
    /// The file as of the last checkpoint, begun after it committed and installed as its
    /// layer was dropped. `None` once the store closes (or if beginning one failed): each
    /// reader then begins its own.
    file: Option<Arc<FileReader>>,
}

impl View {
    /// A view of an empty memory in front of the file `db`, whose last group is `published`.
    pub(crate) fn new(published: u64, db: &Database) -> StoreResult<Self> {
        Ok(Self {
            state: RwLock::new(ViewState {
                published,
                active: Arc::new(Layer::new(compares())),
                frozen: None,
                file: Some(Arc::new(FileReader::begin(db)?)),
            }),
        })
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, ViewState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn state_mut(&self) -> std::sync::RwLockWriteGuard<'_, ViewState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// What a reader reads. The file is taken with the layers, under the same lock that
    /// [`thaw`](Self::thaw) takes to swap them, so that a layer a checkpoint wrote into the
    /// file and dropped meanwhile is either in the reader's layers or in its file, and
    /// nothing of a later freeze is in either.
    pub(crate) fn snapshot(&self, db: &Database) -> StoreResult<Snapshot> {
        let state = self.state();
        let file = match &state.file {
            Some(file) => file.clone(),
            None => Arc::new(FileReader::begin(db)?),
        };
        let mut layers = Vec::with_capacity(2);
        layers.push(state.active.clone());
        layers.extend(state.frozen.clone());
        Ok(Snapshot {
            upto: state.published,
            layers,
            file,
        })
    }

    fn layers(&self) -> (Arc<Layer>, Option<Arc<Layer>>) {
        let state = self.state();
        (state.active.clone(), state.frozen.clone())
    }

    fn publish(&self, seq: u64) {
        self.state_mut().published = seq;
    }

    /// Makes the active layer the frozen one, and a fresh layer the active one.
    fn freeze(&self) -> Arc<Layer> {
        let mut state = self.state_mut();
        let fresh = Arc::new(Layer::new(compares()));
        let frozen = std::mem::replace(&mut state.active, fresh);
        state.frozen = Some(frozen.clone());
        frozen
    }

    /// Drops the frozen layer, once its rows are in the file, and reads the file from then
    /// on as `file` (begun after the checkpoint committed; without one, readers begin their
    /// own: the file read before the checkpoint must not outlive its layer).
    fn thaw(&self, file: StoreResult<FileReader>) {
        let file = match file {
            Ok(file) => Some(Arc::new(file)),
            Err(err) => {
                tracing::warn!(error = %err, "reading the file after a checkpoint failed");
                None
            }
        };
        let mut state = self.state_mut();
        state.frozen = None;
        state.file = file;
    }

    /// At closing: no read transaction stays open past the store.
    fn forget_file(&self) {
        self.state_mut().file = None;
    }
}

pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer (and its checkpointer) on the store `db`, whose log is `log`, with
    /// `spare` the log's other file.
    pub(crate) fn start(
        db: Arc<Database>,
        view: Arc<View>,
        log: Log,
        spare: Wal,
        checkpoint_interval: Duration,
    ) -> StoreResult<Self> {
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        let checkpoints = Checkpoints::start(db.clone(), view.clone(), spare, checkpoint_interval)?;
        let thread = std::thread::Builder::new()
            .name("embedded-store-writer".to_owned())
            .spawn(move || run(&db, &view, &queue, log, checkpoints))
            .map_err(backend)?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Queues a write: `check` (which must not write) decides whether it may happen and
    /// what `apply` needs; `apply` writes (and may fail only by a store error). Returns
    /// `apply`'s result once the group is durable, or `check`'s refusal.
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
    /// queued afterwards runs after it, in the same group or a later one), and the returned
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
    /// Lets queued writes finish, checkpoints them and closes the database, so the file can
    /// be opened again.
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

/// The store's durability: the log file groups are appended to, and where it stands.
pub(crate) struct Log {
    wal: Wal,
    /// The sequence of the next group.
    next_seq: u64,
    /// Why no more groups may be committed, once the log or a checkpoint failed for good.
    broken: Option<String>,
}

impl Log {
    /// Opens the log's two files beside the database and replays onto it, in one durable
    /// commit, every group they hold past the database's checkpoint, in order; the files are
    /// then emptied. Returns the log (appending to the first file) and the second file.
    pub(crate) fn recover(db: &Database, paths: &[PathBuf; 2]) -> StoreResult<(Self, Wal)> {
        let [first, second] = paths;
        let (mut wal, mut records) = Wal::open(first).map_err(backend)?;
        let (mut spare, more) = Wal::open(second).map_err(backend)?;
        records.extend(more);
        let txn = db.begin_write().map_err(backend)?;
        let mut checkpointed = checkpoint_of(&txn)?;
        let mut pending: Vec<_> = records
            .into_iter()
            .filter(|r| r.seq > checkpointed)
            .collect();
        pending.sort_by_key(|r| r.seq);
        for (expected, record) in (checkpointed + 1..).zip(&pending) {
            if record.seq != expected {
                return Err(StoreError::Corrupt(format!(
                    "the write-ahead log misses group {expected} (it holds {} next)",
                    record.seq
                )));
            }
        }
        if let Some(last) = pending.last().map(|r| r.seq) {
            {
                let mut tables = FileTables::open(&txn).map_err(backend)?;
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
        spare.clear().map_err(backend)?;
        Ok((
            Self {
                wal,
                next_seq: checkpointed + 1,
                broken: None,
            },
            spare,
        ))
    }

    /// The last group committed (0 before the first).
    pub(crate) fn last_group(&self) -> u64 {
        self.next_seq - 1
    }

    /// Makes group `seq` durable: its writes (its payload for the log) appended and synced.
    fn commit(&mut self, seq: u64, writes: &[u8]) -> Result<(), String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        match self.wal.append(seq, writes) {
            Ok(()) => {
                self.next_seq = seq + 1;
                Ok(())
            }
            Err(err @ AppendError::NotWritten(_)) => Err(err.to_string()),
            Err(err @ AppendError::Torn(_)) => Err(self.stop(err.to_string())),
        }
    }

    fn stop(&mut self, why: String) -> String {
        let why = format!("{why}; the store takes no more writes until it is opened again");
        tracing::error!(why, "the embedded store stopped taking writes");
        self.broken = Some(why.clone());
        why
    }
}

/// A frozen layer on its way into the file: the last group it holds, and the log file
/// that holds its groups.
struct Frozen {
    layer: Arc<Layer>,
    upto: u64,
    wal: Wal,
}

/// The writer's side of the checkpointer.
struct Checkpoints {
    to_checkpointer: Option<mpsc::Sender<Frozen>>,
    /// The log file of each finished checkpoint, emptied; or why the checkpoint failed.
    done: mpsc::Receiver<Result<Wal, String>>,
    /// The log's other file, when no checkpoint is in flight.
    spare: Option<Wal>,
    last: Instant,
    interval: Duration,
    thread: Option<JoinHandle<()>>,
}

impl Checkpoints {
    fn start(
        db: Arc<Database>,
        view: Arc<View>,
        spare: Wal,
        interval: Duration,
    ) -> StoreResult<Self> {
        let (to_checkpointer, jobs) = mpsc::channel::<Frozen>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("embedded-store-checkpointer".to_owned())
            .spawn(move || checkpointer(&db, &view, &jobs, &done_tx))
            .map_err(backend)?;
        Ok(Self {
            to_checkpointer: Some(to_checkpointer),
            done,
            spare: Some(spare),
            last: Instant::now(),
            interval,
            thread: Some(thread),
        })
    }

    /// How long the writer may wait for a job before it looks at the checkpoints again: until
    /// one is due, or, while one is in flight, a little while (it cannot wait on both);
    /// `None` while no write waits in memory for one.
    fn patience(&self, view: &View) -> Option<Duration> {
        if self.spare.is_some() && view.layers().0.is_empty() {
            return None;
        }
        let due = self.interval.saturating_sub(self.last.elapsed());
        Some(if self.spare.is_none() {
            due.max(IN_FLIGHT_POLL)
        } else {
            due
        })
    }

    /// Takes the result of a finished checkpoint; `wait`s for the one in flight.
    fn collect(&mut self, log: &mut Log, wait: bool) {
        let done = if wait {
            self.done.recv().map_err(|_| ())
        } else {
            self.done.try_recv().map_err(|_| ())
        };
        match done {
            Ok(Ok(wal)) => self.spare = Some(wal),
            Ok(Err(why)) => {
                log.stop(why);
            }
            Err(()) => {}
        }
    }

    /// Freezes the active layer and hands it to the checkpointer, if a checkpoint is due and
    /// none is in flight; waits for the one in flight first if the layer is too big.
    fn maybe_freeze(&mut self, view: &View, log: &mut Log) {
        if self.spare.is_none() {
            self.collect(log, false);
        }
        let (active, _) = view.layers();
        let bytes = active.bytes();
        let due = self.last.elapsed() >= self.interval || bytes >= CHECKPOINT_BYTES;
        if !due {
            return;
        }
        if active.is_empty() {
            self.last = Instant::now();
            return;
        }
        if self.spare.is_none() && bytes >= MAX_LAYER_BYTES && log.broken.is_none() {
            self.collect(log, true);
        }
        let (Some(spare), Some(to_checkpointer)) = (self.spare.take(), &self.to_checkpointer)
        else {
            return; // the checkpoint in flight finishes first
        };
        let layer = view.freeze();
        let wal = std::mem::replace(&mut log.wal, spare);
        self.last = Instant::now();
        let upto = log.last_group();
        if to_checkpointer.send(Frozen { layer, upto, wal }).is_err() {
            log.stop("the store's checkpointer stopped".to_owned());
        }
    }

    /// Waits for the checkpoint in flight and stops the checkpointer.
    fn finish(&mut self, log: &mut Log) {
        self.to_checkpointer.take();
        if self.spare.is_none() {
            self.collect(log, true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes each frozen layer it is handed into the file, then drops it from the view and
/// empties the log file of its groups.
fn checkpointer(
    db: &Database,
    view: &View,
    jobs: &mpsc::Receiver<Frozen>,
    done: &mpsc::Sender<Result<Wal, String>>,
) {
    for Frozen {
        layer,
        upto,
        mut wal,
    } in jobs
    {
        let written = write_layers(db, &[&layer], upto);
        let outcome = match written {
            Ok(()) => {
                view.thaw(FileReader::begin(db));
                // Left full, the file is only read at the next opening, where its records
                // are at or below the checkpoint and skipped.
                if let Err(err) = wal.clear() {
                    tracing::warn!(error = %err, "a write-ahead log file was not emptied");
                }
                Ok(wal)
            }
            // The layer stays in the view (its rows are still read from it) and its groups
            // in the log (the next opening replays them).
            Err(why) => Err(format!("a checkpoint failed: {why}")),
        };
        if done.send(outcome).is_err() {
            return;
        }
    }
}

/// Writes `layers` (oldest first) into the file in one durable transaction that records
/// that it covers every group up to `upto`.
fn write_layers(db: &Database, layers: &[&Layer], upto: u64) -> Result<(), String> {
    let txn = db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut tables = FileTables::open(&txn).map_err(|e| e.to_string())?;
        for layer in layers {
            tables
                .write_layer(&layer.read())
                .map_err(|e| e.to_string())?;
        }
    }
    set_checkpoint(&txn, upto).map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())
}

fn checkpoint_of(txn: &WriteTransaction) -> StoreResult<u64> {
    let table = txn.open_table(CHECKPOINT).map_err(backend)?;
    let seq = table.get(CHECKPOINT_KEY).map_err(backend)?;
    Ok(seq.map_or(0, |s| s.value()))
}

pub(crate) fn set_checkpoint(txn: &WriteTransaction, seq: u64) -> StoreResult<()> {
    txn.open_table(CHECKPOINT)
        .map_err(backend)?
        .insert(CHECKPOINT_KEY, seq)
        .map_err(backend)?;
    Ok(())
}

fn run(
    db: &Database,
    view: &View,
    queue: &mpsc::Receiver<Box<dyn Job>>,
    mut log: Log,
    mut checkpoints: Checkpoints,
) {
    loop {
        let next = match checkpoints.patience(view) {
            Some(patience) => queue.recv_timeout(patience),
            None => queue
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let first = match next {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                checkpoints.maybe_freeze(view, &mut log);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut pending = batch.into_iter();
        // One group per round; a round ends when the batch is done or a job broke the group
        // (the rest of the batch then goes into a fresh one).
        while !pending.as_slice().is_empty() {
            if let Some(why) = &log.broken {
                fail_all(pending.by_ref(), why);
                break;
            }
            run_group(db, view, &mut log, &mut pending);
        }
        checkpoints.maybe_freeze(view, &mut log);
    }
    close(db, view, &mut log, &mut checkpoints);
}

/// Runs jobs of `pending` as one group, until they are done or one breaks the group.
fn run_group(
    db: &Database,
    view: &View,
    log: &mut Log,
    pending: &mut std::vec::IntoIter<Box<dyn Job>>,
) {
    let seq = log.next_seq;
    let (active, frozen) = view.layers();
    let disk = Disk::new(db);
    let mut applied = Vec::new();
    let mut refused = Vec::new();
    let mut broken = None;
    let writes = {
        let mut rows = active.write();
        let older = frozen.as_ref().map(|f| f.read());
        let mut tables = Tables::new(&mut rows, older.as_deref(), &disk, seq);
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
        tables.take_writes()
    };
    drop(disk);
    for job in refused {
        job.answer(Ok(()));
    }
    let committed = match broken {
        None if writes.is_empty() => Ok(()),
        None => log.commit(seq, &writes),
        Some(job) => {
            job.answer(Ok(())); // its own store error
            Err("the store failed during the same commit".to_owned())
        }
    };
    match &committed {
        Ok(()) if !writes.is_empty() => {
            active.add_bytes(writes.len());
            view.publish(seq);
        }
        Ok(()) => {}
        Err(_) => undo_writes(&mut active.write(), seq, &writes),
    }
    let committed = committed.as_ref().map(|_| ()).map_err(String::as_str);
    for job in applied {
        job.answer(committed);
    }
}

/// Once the last job is done: every group still in memory is written into the file in a
/// durable checkpoint and both log files are emptied.
fn close(db: &Database, view: &View, log: &mut Log, checkpoints: &mut Checkpoints) {
    checkpoints.finish(log);
    view.forget_file();
    let (active, frozen) = view.layers();
    let layers: Vec<&Layer> = frozen.as_deref().into_iter().chain([&*active]).collect();
    if layers.iter().all(|layer| layer.is_empty()) && frozen.is_none() {
        return;
    }
    match write_layers(db, &layers, log.last_group()) {
        Ok(()) => {
            for wal in [Some(&mut log.wal), checkpoints.spare.as_mut()]
                .into_iter()
                .flatten()
            {
                if let Err(err) = wal.clear() {
                    tracing::warn!(error = %err, "a write-ahead log file was not emptied");
                }
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "no checkpoint at closing; the next opening replays the log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::{TABLES, TASKS};
    use crate::memtable::MemTables;
    use redb::ReadableDatabase;

    /// The log payload of a group that writes `rows` into the tasks table.
    fn group(seq: u64, rows: &[(&str, &str)]) -> Vec<u8> {
        let db_dir = tempfile::tempdir().expect("tempdir");
        let db = Database::create(db_dir.path().join("scratch.redb")).expect("db");
        let layer = Layer::new(compares());
        let disk = Disk::new(&db);
        let mut active = layer.write();
        let mut tables = Tables::new(&mut active, None, &disk, seq);
        for (key, value) in rows {
            tables.tasks.insert(*key, *value).expect("insert");
        }
        tables.take_writes()
    }

    fn task_rows(db: &Database) -> Vec<(String, String)> {
        let txn = db.begin_read().expect("read");
        let table = txn.open_table(TASKS.table).expect("table");
        table
            .iter()
            .expect("iter")
            .map(|row| {
                let (k, v) = row.expect("row");
                (k.value().to_owned(), v.value().to_owned())
            })
            .collect()
    }

    fn fresh(dir: &tempfile::TempDir) -> (Database, [PathBuf; 2]) {
        let db = Database::create(dir.path().join("tasks.redb")).expect("db");
        let txn = db.begin_write().expect("txn");
        drop(FileTables::open(&txn).expect("tables"));
        txn.commit().expect("commit");
        let paths = ["a.wal", "b.wal"].map(|name| dir.path().join(name));
        (db, paths)
    }

    fn append(path: &std::path::Path, records: &[(u64, Vec<u8>)]) {
        let (mut wal, _) = Wal::open(path).expect("open");
        for (seq, payload) in records {
            if let Err(err) = wal.append(*seq, payload) {
                panic!("{err}");
            }
        }
    }

    #[test]
    fn opening_replays_both_log_files_in_order_past_the_checkpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, paths) = fresh(&dir);
        // The second file holds the groups written while the first one's were checkpointed.
        append(
            &paths[0],
            &[
                (1, group(1, &[("t", "one")])),
                (2, group(2, &[("t", "two")])),
            ],
        );
        append(
            &paths[1],
            &[(3, group(3, &[("u", "three"), ("t", "three")]))],
        );
        let (log, _) = Log::recover(&db, &paths).expect("recover");
        assert_eq!(log.last_group(), 3);
        assert_eq!(
            task_rows(&db),
            [("t".into(), "three".into()), ("u".into(), "three".into())]
        );
        assert_eq!(Wal::peek(&paths[0]).expect("peek").len(), 0, "emptied");
        assert_eq!(Wal::peek(&paths[1]).expect("peek").len(), 0, "emptied");
    }

    #[test]
    fn groups_a_checkpoint_covers_are_not_replayed_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, paths) = fresh(&dir);
        // The checkpoint of group 2 was committed; its file was not emptied yet.
        let txn = db.begin_write().expect("txn");
        set_checkpoint(&txn, 2).expect("checkpoint");
        txn.open_table(TASKS.table)
            .expect("table")
            .insert("t", "checkpointed")
            .expect("insert");
        txn.commit().expect("commit");
        append(
            &paths[0],
            &[
                (1, group(1, &[("t", "one")])),
                (2, group(2, &[("t", "two")])),
            ],
        );
        append(&paths[1], &[(3, group(3, &[("u", "three")]))]);
        Log::recover(&db, &paths).expect("recover");
        assert_eq!(
            task_rows(&db),
            [
                ("t".into(), "checkpointed".into()),
                ("u".into(), "three".into())
            ]
        );

        // A group the log lacks between the checkpoint and the next one it holds.
        append(&paths[0], &[(5, group(5, &[("v", "five")]))]);
        let err = Log::recover(&db, &paths).err().expect("refused");
        assert!(err.to_string().contains("misses group 4"), "{err}");
    }

    #[test]
    fn a_reader_sees_a_group_only_once_it_is_published() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, _) = fresh(&dir);
        let view = View::new(0, &db).expect("view");
        let (active, _) = view.layers();
        {
            let disk = Disk::new(&db);
            let mut rows: std::sync::RwLockWriteGuard<'_, MemTables> = active.write();
            let mut tables = Tables::new(&mut rows, None, &disk, 1);
            tables.tasks.insert("t", "one").expect("insert");
            assert_eq!(
                tables
                    .tasks
                    .get("t")
                    .expect("get")
                    .map(|v| v.value().to_owned()),
                Some("one".to_owned()),
                "the writer sees its own group"
            );
        }
        let read = |view: &View| {
            let snapshot = view.snapshot(&db).expect("snapshot");
            snapshot
                .table(TASKS)
                .expect("table")
                .get("t")
                .expect("get")
                .map(|v| v.value().to_owned())
        };
        assert_eq!(read(&view), None, "not durable yet");
        view.publish(1);
        assert_eq!(read(&view), Some("one".to_owned()));

        // Frozen and written into the file: found there once the layer is dropped.
        let frozen = view.freeze();
        assert_eq!(read(&view), Some("one".to_owned()), "in the frozen layer");
        let before = view.snapshot(&db).expect("snapshot");
        write_layers(&db, &[&frozen], 1).expect("checkpoint");
        view.thaw(FileReader::begin(&db));
        assert_eq!(read(&view), Some("one".to_owned()), "in the file");
        assert_eq!(TABLES, frozen.read().len());
        let old = before.table(TASKS).expect("table").get("t").expect("get");
        assert_eq!(
            old.map(|v| v.value().to_owned()),
            Some("one".to_owned()),
            "a reader that began before the checkpoint keeps its layer and its file"
        );

        // Without a shared file (beginning one failed, or the store is closing), each reader
        // begins its own and sees the same.
        view.forget_file();
        assert_eq!(
            read(&view),
            Some("one".to_owned()),
            "in the file, read alone"
        );
    }
}
