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
//! Reading stops at the first record that is short, foreign or fails its checksum (the tail of
//! an append a crash cut short, whose group was never acknowledged), or whose sequence does not
//! follow the one before it. The log is emptied only after a checkpoint covers all of it, so
//! any record found past the checkpoint's sequence is a group that was synced.
//!
//! The file is reused, not truncated: emptying the log only moves the write position back to
//! the start, and the file is grown ahead of the records in zero-filled steps. An append then
//! overwrites blocks the file already has, so its sync writes the data alone; an append that
//! grows the file also syncs the file's size and block map, which on this kind of disk takes
//! about two thirds longer (250 µs against 150). What lies past the last record written since
//! the log was emptied is zeros or older records, all at or below the checkpoint, so reading
//! stops there: at zeros, at a record cut in two, or at a sequence that goes back.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use task_store::StoreResult;

use crate::error::backend;

const MAGIC: u32 = 0x5448_574c; // "THWL"
const HEADER_LEN: usize = 4 + 4 + 8 + 4;
/// Larger payloads are refused (a group is at most 512 jobs of at most a few MB each).
const MAX_PAYLOAD: usize = 1 << 30;
/// The file grows ahead of the records by at least this much.
const GROWTH: u64 = 4 << 20;
/// Emptying the log shrinks the file to no less than this.
const KEPT: u64 = 16 << 20;
/// The largest record buffer kept for the next append.
const KEPT_BUFFER: usize = 1 << 20;

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
    /// The file's size: the blocks an append overwrites without growing it.
    size: u64,
    /// The record being written, kept between appends (a group's record takes tens of KB).
    buf: Vec<u8>,
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
        let (records, len) = read_records(&bytes);
        let wal = Self {
            file,
            len,
            size: bytes.len() as u64,
            buf: Vec::new(),
        };
        Ok((wal, records))
    }

    /// The records of the log at `path`, without opening it for writing.
    pub(crate) fn peek(path: &Path) -> io::Result<Vec<Record>> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(read_records(&bytes).0),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(err) => Err(err),
        }
    }

    /// Appends one record and syncs it. On failure the log is cut back to where it was, so a
    /// torn record never hides the records after it; if even that fails the error says so and
    /// the log must not be appended to again.
    pub(crate) fn append(&mut self, seq: u64, payload: &[u8]) -> Result<(), AppendError> {
        let record = &mut self.buf;
        encode(record, seq, payload);
        let end = self.len + record.len() as u64;
        let size = if end > self.size {
            // Grow the file now, zero-filled, so the next appends only overwrite.
            let size = end.max(self.size + GROWTH);
            record.resize(usize::try_from(size - self.len).unwrap_or(record.len()), 0);
            size
        } else {
            self.size
        };
        let written = self
            .file
            .write_all_at(record, self.len)
            .and_then(|()| self.file.sync_data());
        if record.capacity() > KEPT_BUFFER {
            *record = Vec::new(); // a growth's zeros or a huge group: not kept
        }
        match written {
            Ok(()) => {
                self.len = end;
                self.size = size;
                Ok(())
            }
            // The record may be whole in the file though its sync failed: cut it off, lest
            // a group its callers were told failed be replayed.
            Err(err) => match self.file.set_len(self.len) {
                Ok(()) => {
                    self.size = self.len;
                    Err(AppendError::NotWritten(err))
                }
                Err(cut) => Err(AppendError::Torn(format!("{err}; cutting it back: {cut}"))),
            },
        }
    }

    /// Empties the log, once a durable commit covers everything in it: the next record goes at
    /// the start of the file again. Not synced: the records left in the file are at or below
    /// the checkpoint, so after a crash they are skipped, or reading stops at them.
    /// The first record is also unmarked (its magic zeroed), so that reading the log finds
    /// nothing until the next append, as after a crash it may find only skipped records.
    ///
    /// The file keeps the room the emptied records took (the next interval likely needs as
    /// much: shrinking then growing again would cost a sync of the file's size each time),
    /// at least [`KEPT`]; more than that goes once an interval needed less.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        let keep = KEPT.max(self.len + GROWTH);
        if self.size > keep {
            self.file.set_len(keep)?;
            self.size = keep;
        }
        if self.len > 0 {
            self.file.write_all_at(&[0; 4], 0)?;
        }
        self.len = 0;
        Ok(())
    }

    #[cfg(test)]
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

/// Writes the record of `payload` into `record` (emptied first).
fn encode(record: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    record.clear();
    record.reserve(HEADER_LEN + payload.len());
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
}

/// The log's records from the start of `bytes`, and where the last one ends.
fn read_records(bytes: &[u8]) -> (Vec<Record>, u64) {
    let mut records: Vec<Record> = Vec::new();
    let mut at = 0;
    while let Some((record, next)) = decode(bytes, at) {
        if records
            .last()
            .is_some_and(|last| last.seq.checked_add(1) != Some(record.seq))
        {
            break; // an older record the current ones did not overwrite
        }
        records.push(record);
        at = next;
    }
    (records, at as u64)
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

/// How many groups of writes the write-ahead log beside the database file at `path` holds:
/// those committed since the last checkpoint, which the next opening replays unless the store
/// was closed cleanly (closing checkpoints). While the store is open, a log whose checkpoint is
/// being written still counts. For operators and tests; it reads the log only.
pub fn groups_in_log(path: impl AsRef<Path>) -> StoreResult<usize> {
    let mut groups = 0;
    for log in wal_paths(path.as_ref()) {
        groups += Wal::peek(&log).map_err(backend)?.len();
    }
    Ok(groups)
}

/// The write-ahead log of the store at `path`: two files beside it, its name with `.wal`
/// and `.wal2` appended. Groups go to one until its groups are checkpointed, then to the
/// other while the checkpoint is written.
pub(crate) fn wal_paths(path: &Path) -> [std::path::PathBuf; 2] {
    ["wal", "wal2"].map(|ext| {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".");
        name.push(ext);
        path.with_file_name(name)
    })
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
        assert!(wal.len() < std::fs::metadata(log_in(&dir)).expect("meta").len());
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
        let mut torn = Vec::new();
        encode(&mut torn, 3, b"cut short");
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
    fn older_records_after_the_ones_written_since_clearing_are_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = log_in(&dir);
        let (mut wal, _) = Wal::open(&path).expect("open");
        for seq in 1..=3 {
            if let Err(err) = wal.append(seq, b"old group") {
                panic!("{err}");
            }
        }
        let size = std::fs::metadata(&path).expect("meta").len();
        wal.clear().expect("clear");
        assert_eq!(
            Wal::peek(&path).expect("peek"),
            Vec::new(),
            "nothing until the next append"
        );
        // Exactly as long as the first old record: the old second one stays whole after it.
        if let Err(err) = wal.append(4, b"new group") {
            panic!("{err}");
        }
        drop(wal);
        assert_eq!(
            std::fs::metadata(&path).expect("meta").len(),
            size,
            "the file is reused"
        );
        let (mut wal, records) = Wal::open(&path).expect("reopen");
        assert_eq!(
            records,
            vec![Record {
                seq: 4,
                payload: b"new group".to_vec()
            }]
        );
        // Longer than the old first record: the old second one is cut, and not read either.
        wal.clear().expect("clear");
        for seq in 5..=6 {
            if let Err(err) = wal.append(seq, b"a longer new group") {
                panic!("{err}");
            }
        }
        drop(wal);
        let (_, records) = Wal::open(&path).expect("reopen");
        assert_eq!(
            records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![5, 6]
        );
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

    #[test]
    fn emptying_keeps_the_room_the_records_took_and_gives_back_the_rest_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = log_in(&dir);
        let (mut wal, _) = Wal::open(&path).expect("open");
        let size = || std::fs::metadata(&path).expect("metadata").len();
        let payload = vec![7u8; 1 << 20];
        for seq in 1..=20 {
            if let Err(err) = wal.append(seq, &payload) {
                panic!("{err}");
            }
        }
        let used = wal.len();
        assert!(used > KEPT);
        wal.clear().expect("clear");
        assert!(size() >= used, "the room taken stays for the next interval");
        if let Err(err) = wal.append(21, b"small") {
            panic!("{err}");
        }
        wal.clear().expect("clear");
        assert_eq!(
            size(),
            KEPT,
            "an interval that needed little gives the rest back"
        );
        let (_, records) = Wal::open(&path).expect("reopen");
        assert!(records.is_empty());
    }
}
