//! The adapter's error conversions: redb, I/O and log failures become `StoreError::Backend`,
//! rows that do not read back become `StoreError::Corrupt`.

use task_store::StoreError;

/// A failure of redb, the file system or the writer thread.
pub(crate) fn backend(err: impl std::fmt::Display) -> StoreError {
    StoreError::backend(std::io::Error::other(err.to_string()))
}

/// A stored row that does not read back as what was written.
pub(crate) fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}
