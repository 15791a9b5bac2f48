//! Background upkeep of the store: the retention purge (once at start, then every few
//! minutes) and, for the embedded store, the online backup an operator triggers with
//! `SIGUSR1` (a signal only someone with access to the machine can send, never an A2A
//! client).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use store_embedded::EmbeddedStore;
use task_store::Store;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// How often the purge runs.
const PURGE_EVERY: Duration = Duration::from_secs(300);

/// Purges the tasks past `keep` now and every [`PURGE_EVERY`].
pub(crate) fn spawn_purge(store: Arc<dyn Store>, keep: chrono::Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PURGE_EVERY);
        loop {
            tick.tick().await;
            match store.purge(chrono::Utc::now(), keep).await {
                Ok(purged) if purged.removed.is_empty() && purged.expiring.is_empty() => {}
                Ok(purged) => info!(
                    removed = purged.removed.len(),
                    marked = purged.expiring.len(),
                    "retention: purged terminal tasks past their retention"
                ),
                Err(err) => warn!(error = %err, "retention: the purge failed; it runs again later"),
            }
        }
    })
}

/// Writes a backup of the embedded `store` under `<data_dir>/backups/<UTC time>/` on every
/// `SIGUSR1`. Without one (`--store dynamodb`) the signal is only logged: its default action
/// would end the process.
pub(crate) fn spawn_backups(
    store: Option<EmbeddedStore>,
    data_dir: PathBuf,
) -> anyhow::Result<JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut requests = signal(SignalKind::user_defined1())?;
    Ok(tokio::spawn(async move {
        while requests.recv().await.is_some() {
            let Some(store) = store.clone() else {
                warn!("backup: this store is DynamoDB's; use its point-in-time recovery");
                continue;
            };
            let dir = backup_dir(&data_dir);
            let written = tokio::task::spawn_blocking(move || store.backup_to(&dir)).await;
            match written {
                Ok(Ok(path)) => info!(path = %path.display(), "backup: wrote a copy of the store"),
                Ok(Err(err)) => warn!(error = %err, "backup: failed"),
                Err(err) => warn!(error = %err, "backup: failed"),
            }
        }
    }))
}

/// `<data_dir>/backups/<UTC time to the millisecond>`.
fn backup_dir(data_dir: &Path) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y-%m-%dT%H-%M-%S%.3fZ");
    data_dir.join("backups").join(stamp.to_string())
}
