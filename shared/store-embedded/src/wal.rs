//! The write-ahead log: what makes a group commit durable.
//!
//! A durable redb commit writes every page the transaction copied (a few dozen scattered
//! pages for a group of SendMessages) and syncs them; on a virtual disk the sync of scattered
//! pages costs several times that of one sequential append. So the writer appends each group's
//! changes (the key/value writes of its jobs, [`crate::logged`]) to this log and syncs the
//! log, and only then commits the redb transaction without a sync: readers see a write only
//! once it is in the log on disk, and no caller is answered before. Every so often a group is
//! committed durably instead (a *checkpoint*, recording the last group it covers); the log is
//! then emptied. Opening the store replays the groups the log holds beyond the checkpoint.
//!
//! A record is `magic, payload length, sequence, CRC-32 of sequence and payload, payload`.
//! Reading stops at the first record that is short, foreign or fails its checksum: the tail of
//! an append a crash cut short, whose group was never acknowledged. Records are only ever
//! appended, and the log is emptied only after a checkpoint covers all of it, so any record
//! found past the checkpoint's sequence is a group that was synced.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

const MAGIC: u32 = 0x5448_574c; // "THWL"
const HEADER_LEN: usize = 4 + 4 + 8 + 4;
/// Larger payloads are refused (a group is at most 512 jobs of at most a few MB each).
const MAX_PAYLOAD: usize = 1 << 30;

/// One group commit as the log holds it.
#[derive(Debug, PartialEq)]
pub(crate) struct Record {
    pub seq: u64,
    pub payload: Vec<u8>,
}

pub(crate) struct Wal {
    file: File,
    /// Where the next record goes: the end of the last whole record.
    len: u64,
}

impl Wal {
    /// Opens the log at `path` (creating it) and returns every whole record it holds, in order.
    pub(crate) fn open(path: &Path) -> io::Result<(Self, Vec<Record>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut records = Vec::new();
        let mut at = 0;
        while let Some((record, next)) = decode(&bytes, at) {
            records.push(record);
            at = next;
        }
        let wal = Self {
            file,
            len: at as u64,
        };
        Ok((wal, records))
    }

    /// Appends one record and syncs it. On failure the log is cut back to where it was, so a
    /// torn record never hides the records after it; if even that fails the error says so and
    /// the log must not be appended to again.
    pub(crate) fn append(&mut self, seq: u64, payload: &[u8]) -> Result<(), AppendError> {
        let record = encode(seq, payload);
        let written = self
            .file
            .write_all_at(&record, self.len)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += record.len() as u64;
                Ok(())
            }
            Err(err) => match self.file.set_len(self.len) {
                Ok(()) => Err(AppendError::NotWritten(err)),
                Err(cut) => Err(AppendError::Torn(format!("{err}; cutting it back: {cut}"))),
            },
        }
    }

    /// Empties the log, once a durable commit covers everything in it. Not synced: should the
    /// old records reappear after a crash, they are at or below the checkpoint and skipped.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.len = 0;
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

pub(crate) enum AppendError {
    /// Nothing of the record is in the log.
    NotWritten(io::Error),
    /// Part of the record may be in the log and could not be cut off.
    Torn(String),
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotWritten(err) => write!(f, "the write-ahead log failed: {err}"),
            Self::Torn(why) => write!(f, "the write-ahead log is damaged: {why}"),
        }
    }
}

fn checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

fn encode(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(HEADER_LEN + payload.len());
    record.extend_from_slice(&MAGIC.to_le_bytes());
    // A payload over MAX_PAYLOAD would not be read back; the writer never builds one.
    record.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    record.extend_from_slice(&seq.to_le_bytes());
    record.extend_from_slice(&checksum(seq, payload).to_le_bytes());
    record.extend_from_slice(payload);
    record
}

/// The record at `at`, and where the next one starts; `None` at the end or at damage.
fn decode(bytes: &[u8], at: usize) -> Option<(Record, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER_LEN)?)?;
    let word = |i: usize| header.get(i..i + 4).and_then(|b| b.try_into().ok());
    let magic = u32::from_le_bytes(word(0)?);
    let len = u32::from_le_bytes(word(4)?) as usize;
    let seq = u64::from_le_bytes(header.get(8..16)?.try_into().ok()?);
    let crc = u32::from_le_bytes(word(16)?);
    if magic != MAGIC || len > MAX_PAYLOAD {
        return None;
    }
    let start = at + HEADER_LEN;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    if checksum(seq, payload) != crc {
        return None;
    }
    Some((
        Record {
            seq,
            payload: payload.to_vec(),
        },
        start + len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_in(dir: &tempfile::TempDir) -> std::path::PathBuf {
        dir.path().join("tasks.wal")
    }

    #[test]
    fn records_come_back_in_order_after_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut wal, none) = Wal::open(&log_in(&dir)).expect("open");
        assert!(none.is_empty());
        for seq in 1..=3 {
            if let Err(err) = wal.append(seq, format!("group {seq}").as_bytes()) {
                panic!("{err}");
            }
        }
        drop(wal);
        let (wal, records) = Wal::open(&log_in(&dir)).expect("reopen");
        assert_eq!(
            records,
            (1..=3)
                .map(|seq| Record {
                    seq,
                    payload: format!("group {seq}").into_bytes()
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(
            wal.len(),
            std::fs::metadata(log_in(&dir)).expect("meta").len()
        );
    }

    #[test]
    fn reading_stops_at_a_torn_or_damaged_record_and_appends_go_after_the_last_whole_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = log_in(&dir);
        let (mut wal, _) = Wal::open(&path).expect("open");
        for seq in 1..=2 {
            if let Err(err) = wal.append(seq, b"whole") {
                panic!("{err}");
            }
        }
        let whole = wal.len();
        drop(wal);
        // A crash mid-append: half a record at the end.
        let torn = encode(3, b"cut short");
        let file = OpenOptions::new().write(true).open(&path).expect("file");
        file.write_all_at(&torn[..torn.len() / 2], whole)
            .expect("write");
        let (mut wal, records) = Wal::open(&path).expect("reopen");
        assert_eq!(records.len(), 2, "the torn record is not read");
        assert_eq!(wal.len(), whole);
        if let Err(err) = wal.append(3, b"again") {
            panic!("{err}");
        }
        drop(wal);
        let (_, records) = Wal::open(&path).expect("reopen");
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].payload, b"again");

        // A flipped bit in the second record: reading stops before it.
        let mut bytes = std::fs::read(&path).expect("read");
        let second = (HEADER_LEN + 5) + HEADER_LEN;
        bytes[second] ^= 1;
        std::fs::write(&path, bytes).expect("write");
        let (_, records) = Wal::open(&path).expect("reopen");
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn a_cleared_log_is_empty_and_takes_new_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut wal, _) = Wal::open(&log_in(&dir)).expect("open");
        if let Err(err) = wal.append(1, b"old") {
            panic!("{err}");
        }
        wal.clear().expect("clear");
        if let Err(err) = wal.append(2, b"new") {
            panic!("{err}");
        }
        drop(wal);
        let (_, records) = Wal::open(&log_in(&dir)).expect("reopen");
        assert_eq!(
            records,
            vec![Record {
                seq: 2,
                payload: b"new".to_vec()
            }]
        );
    }
}
