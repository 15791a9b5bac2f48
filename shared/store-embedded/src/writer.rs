//! The one writer: a thread that applies every write transaction, with group commit.
//!
//! redb runs one write transaction at a time and a durable commit costs an `fdatasync`. The
//! writer takes the jobs queued while the previous sync ran and commits each in its own
//! transaction without syncing (`Durability::None`: a job's conditions and writes still stand
//! or fall alone), then makes them all durable with one `Durability::Immediate` commit, and
//! only then answers their callers. A caller is therefore never told "done" before its write
//! is on disk, and a crash loses only writes nobody was told about. Under load one sync
//! serves many writes; alone, a write costs one sync, as before.
//!
//! Readers (which read the database directly) may see a write a moment before its sync
//! completes; if the process dies in that moment, the write is gone and its caller got an
//! error or no answer.

use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use redb::{Database, Durability, WriteTransaction};
use task_store::{StoreError, StoreResult};

/// What a job does once the batch's durable commit is known: answer its caller.
type Answer = Box<dyn FnOnce(Result<(), &str>) + Send>;
/// A write job: runs its transaction; says whether it committed anything, and how to answer.
type Job = Box<dyn FnOnce(&Database) -> (bool, Answer) + Send>;

/// Most jobs one durable commit covers (bounds a caller's wait under a flood of writes).
const MAX_BATCH: usize = 256;

fn backend(err: impl std::fmt::Display) -> StoreError {
    StoreError::backend(std::io::Error::other(err.to_string()))
}

pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    pub(crate) fn start(db: Arc<Database>) -> StoreResult<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("embedded-store-writer".to_owned())
            .spawn(move || run(&db, &queue))
            .map_err(backend)?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Runs `work` in a write transaction of its own, committed only if it succeeds, and
    /// returns once the commit is durable.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let (reply, answer) = tokio::sync::oneshot::channel::<StoreResult<T>>();
        let job: Job = Box::new(move |db| {
            let outcome = apply(db, work);
            let committed = outcome.is_ok();
            let answer: Answer = Box::new(move |durable| {
                let result = match (outcome, durable) {
                    (Ok(value), Ok(())) => Ok(value),
                    (Err(err), _) => Err(err),
                    (Ok(_), Err(why)) => Err(backend(format!("the commit did not persist: {why}"))),
                };
                // The caller may have gone away (a dropped request); the write stands.
                let _ = reply.send(result);
            });
            (committed, answer)
        });
        self.jobs
            .as_ref()
            .ok_or_else(|| backend("the store is closed"))?
            .send(job)
            .map_err(|_| backend("the store's writer stopped"))?;
        answer
            .await
            .map_err(|_| backend("the store's writer stopped"))?
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

/// One job's transaction, without a sync.
fn apply<T>(
    db: &Database,
    work: impl FnOnce(&WriteTransaction) -> StoreResult<T>,
) -> StoreResult<T> {
    let mut txn = db.begin_write().map_err(backend)?;
    txn.set_durability(Durability::None).map_err(backend)?;
    let out = work(&txn)?; // dropping an uncommitted transaction aborts it
    txn.commit().map_err(backend)?;
    Ok(out)
}

/// Makes every commit so far durable.
fn persist(db: &Database) -> Result<(), String> {
    let mut txn = db.begin_write().map_err(|e| e.to_string())?;
    txn.set_durability(Durability::Immediate)
        .map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())
}

fn run(db: &Database, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut answers = Vec::new();
        let mut wrote = false;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            let (committed, answer) = job(db);
            wrote |= committed;
            answers.push(answer);
            if answers.len() < MAX_BATCH {
                next = queue.try_recv().ok();
            }
        }
        let durable = if wrote { persist(db) } else { Ok(()) };
        for answer in answers {
            answer(durable.as_ref().map(|_| ()).map_err(String::as_str));
        }
    }
}
