//! Key encoding: every item's partition and sort key, fixed-width times and numbers so that
//! DynamoDB's byte order of the sort keys is the order the port promises, and the opaque
//! ListTasks page token.
//!
//! All of a task's items share the partition `TASK#<task id>`; the sort key says what the
//! item is:
//!
//! | sort key | item |
//! |---|---|
//! | `TASK` | the task document, version, state, roles, counters |
//! | `EVT#<seq:020>#<chunk:03>` | a chunk of event `seq` |
//! | `MSG#<n:020>#<chunk:03>` | a chunk of history message `n` |
//! | `TRN#<n:020>#<chunk:03>` | a chunk of transcript entry `n` |
//! | `ART#<position:020>#<chunk:03>` | a chunk of the artifact first written at `position` |
//! | `MID#<message id>` | a message id the task received |
//! | `INBOX#<time>#<chunk:03>#<message id>` | a chunk of a waiting message |
//! | `AUD#<time>#<message id>` | an audit entry |
//! | `PUSH#<config id>` | a push config |
//! | `PCOUNT#<participant id>` | how many push configs the participant owns on the task |
//! | `PCOUNT` | how many owned push configs the task has |
//! | `PART#<participant id>` | a participant-index entry (GSI1, GSI3) |
//! | `LEASE` | the run lease (GSI2) |
//!
//! A participant's ListTasks counts live in partition `COUNT#<participant id>`, one item per
//! shard: `SHARD#<nn>` (`counts.rs`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Datelike, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use task_store::{StoreError, StoreResult};

pub const TASK_SK: &str = "TASK";
pub const LEASE_SK: &str = "LEASE";
pub const EVENT_PREFIX: &str = "EVT#";
pub const HISTORY_PREFIX: &str = "MSG#";
pub const TRANSCRIPT_PREFIX: &str = "TRN#";
pub const ARTIFACT_PREFIX: &str = "ART#";
pub const MESSAGE_ID_PREFIX: &str = "MID#";
pub const INBOX_PREFIX: &str = "INBOX#";
pub const AUDIT_PREFIX: &str = "AUD#";
pub const PUSH_PREFIX: &str = "PUSH#";
/// Push config counters (not under `PUSH#`, so listing the configs does not meet them).
pub const PUSH_COUNT_SK: &str = "PCOUNT";
pub const PARTICIPANT_PREFIX: &str = "PART#";

/// Width of an encoded time: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
pub const TIME_WIDTH: usize = 30;
/// Width of a sequence number, history number or artifact position (any u64).
const NUMBER_WIDTH: usize = 20;
/// Width of a chunk index.
const CHUNK_WIDTH: usize = 3;

pub fn task_pk(task_id: &str) -> String {
    format!("TASK#{task_id}")
}

/// The task id of a task partition key.
pub fn task_of_pk(pk: &str) -> Option<&str> {
    pk.strip_prefix("TASK#")
}

/// (task id, seq) when the keys are those of the first chunk of an event: what the push
/// notifier looks for in the table's stream (one new event per first chunk).
pub fn event_of_keys<'a>(pk: &'a str, sk: &str) -> Option<(&'a str, u64)> {
    let task = task_of_pk(pk)?;
    match parse_numbered(EVENT_PREFIX, sk)? {
        (seq, 0) => Some((task, seq)),
        _ => None,
    }
}

/// An instant as a fixed-width UTC string (nanoseconds), whose byte order is time order.
/// Years outside 0000–9999 have no fixed-width form and are refused.
pub fn time(t: DateTime<Utc>) -> StoreResult<String> {
    if !(0..=9999).contains(&t.year()) {
        return Err(StoreError::Invalid(format!(
            "time {t} is outside the years 0000-9999 the store can order"
        )));
    }
    Ok(t.to_rfc3339_opts(SecondsFormat::Nanos, true))
}

pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn numbered(prefix: &str, n: u64, chunk: usize) -> String {
    format!("{prefix}{n:0NUMBER_WIDTH$}#{chunk:0CHUNK_WIDTH$}")
}

pub fn event_sk(seq: u64, chunk: usize) -> String {
    numbered(EVENT_PREFIX, seq, chunk)
}

pub fn history_sk(n: u64, chunk: usize) -> String {
    numbered(HISTORY_PREFIX, n, chunk)
}

pub fn transcript_sk(n: u64, chunk: usize) -> String {
    numbered(TRANSCRIPT_PREFIX, n, chunk)
}

pub fn artifact_sk(position: u64, chunk: usize) -> String {
    numbered(ARTIFACT_PREFIX, position, chunk)
}

/// The lowest and highest sort key of numbers `from..=to` of a numbered item kind.
pub fn numbered_range(prefix: &str, from: u64, to: u64) -> (String, String) {
    (numbered(prefix, from, 0), numbered(prefix, to, 999))
}

/// (number, chunk) of a numbered sort key with this prefix.
pub fn parse_numbered(prefix: &str, sk: &str) -> Option<(u64, usize)> {
    let rest = sk.strip_prefix(prefix)?;
    let (n, chunk) = rest.split_once('#')?;
    if n.len() != NUMBER_WIDTH || chunk.len() != CHUNK_WIDTH {
        return None;
    }
    Some((n.parse().ok()?, chunk.parse().ok()?))
}

pub fn message_id_sk(message_id: &str) -> String {
    format!("{MESSAGE_ID_PREFIX}{message_id}")
}

/// The chunk index sits before the message id, so every chunk's key is known exactly from
/// (time, message id, chunk) whatever characters the message id holds.
pub fn inbox_sk(enqueued_at: &str, chunk: usize, message_id: &str) -> String {
    format!("{INBOX_PREFIX}{enqueued_at}#{chunk:0CHUNK_WIDTH$}#{message_id}")
}

/// The chunk index of an inbox sort key.
pub fn parse_inbox_chunk(sk: &str) -> Option<usize> {
    let rest = sk.strip_prefix(INBOX_PREFIX)?;
    let chunk = rest.get(TIME_WIDTH + 1..TIME_WIDTH + 1 + CHUNK_WIDTH)?;
    chunk.parse().ok()
}

/// Unique per (time, message id), like the embedded store's audit key: a second entry with
/// both equal replaces the first.
pub fn audit_sk(at: &str, message_id: &str) -> String {
    format!("{AUDIT_PREFIX}{at}#{message_id}")
}

pub fn push_sk(config_id: &str) -> String {
    format!("{PUSH_PREFIX}{config_id}")
}

/// The counter of `owner`'s push configs on a task, or (`None`) of all its owned configs.
pub fn push_count_sk(owner: Option<&str>) -> String {
    match owner {
        Some(owner) => format!("{PUSH_COUNT_SK}#{owner}"),
        None => PUSH_COUNT_SK.to_owned(),
    }
}

pub fn participant_sk(participant: &str) -> String {
    format!("{PARTICIPANT_PREFIX}{participant}")
}

/// GSI1 partition of a participant's tasks in one state (`TASK_STATE_…`). State names hold
/// no `#`, so the text after the last `#` is the state whatever the participant id holds.
pub fn listing_partition(participant: &str, state: &str) -> String {
    format!("{PARTICIPANT_PREFIX}{participant}#{state}")
}

/// GSI3 partition of a participant's tasks in one context: the participant's length first,
/// so that no (participant, context) pair shares a key with another whatever `#` they hold.
pub fn context_partition(participant: &str, context: &str) -> String {
    format!("PCTX#{}#{participant}#{context}", participant.len())
}

/// The partition of a participant's ListTasks counts.
pub fn count_pk(participant: &str) -> String {
    format!("COUNT#{participant}")
}

/// The sort key of one shard of a participant's counts.
pub fn count_sk(shard: u32) -> String {
    format!("SHARD#{shard:02}")
}

/// GSI1 sort key: newest-first order is (status time, task id) descending.
pub fn index_sk(status_time: &str, task_id: &str) -> String {
    format!("{status_time}#{task_id}")
}

/// Epoch milliseconds, clamped at 0 (no lease expires before 1970).
pub fn epoch_millis(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_millis()).unwrap_or(0)
}

/// GSI2 sort key of a lease: expiry order, then task id.
pub fn lease_index_sk(expires_at_millis: u64, task_id: &str) -> String {
    format!("{expires_at_millis:0NUMBER_WIDTH$}#{task_id}")
}

/// The GSI2 sort key bound below which leases have expired at `now`: every lease expiring at
/// or before `now_millis` ([`task_store::Lease::expired`]) sorts before it, since expiries
/// are whole milliseconds and the bound is the next one.
pub fn lease_index_bound(now_millis: u64) -> String {
    format!("{:0NUMBER_WIDTH$}", now_millis.saturating_add(1))
}

/// A ListTasks position: the GSI1 sort key of the last task of the previous page. With the
/// participant (from the request) it gives the full `ExclusiveStartKey`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageToken {
    /// The fixed-width status time.
    pub ts: String,
    pub task: String,
}

impl PageToken {
    pub fn encode(&self) -> String {
        // Serializing two strings cannot fail; an empty token would end the listing early,
        // so fall back to a hand-made object rather than to "".
        let json = serde_json::to_string(self)
            .unwrap_or_else(|_| format!("{{\"ts\":{:?},\"task\":{:?}}}", self.ts, self.task));
        URL_SAFE_NO_PAD.encode(json)
    }

    /// `StoreError::Invalid` for anything this adapter did not make.
    pub fn decode(text: &str) -> StoreResult<Self> {
        let invalid = || StoreError::Invalid("invalid page token".to_owned());
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let token: PageToken = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if token.ts.len() != TIME_WIDTH || parse_time(&token.ts).is_none() || token.task.is_empty()
        {
            return Err(invalid());
        }
        Ok(token)
    }

    pub fn index_sk(&self) -> String {
        index_sk(&self.ts, &self.task)
    }

    /// The token of an index item's GSI1 sort key.
    pub fn from_index_sk(sk: &str) -> Option<Self> {
        let ts = sk.get(..TIME_WIDTH)?;
        let task = sk.get(TIME_WIDTH + 1..)?;
        (sk.as_bytes().get(TIME_WIDTH) == Some(&b'#') && !task.is_empty()).then(|| PageToken {
            ts: ts.to_owned(),
            task: task.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_are_fixed_width_and_ordered() {
        let a = Utc.timestamp_opt(1_790_000_000, 0).unwrap();
        let b = Utc.timestamp_opt(1_790_000_000, 5).unwrap();
        let c = Utc.timestamp_opt(1_790_000_001, 0).unwrap();
        let early = Utc.timestamp_opt(0, 0).unwrap();
        let encoded: Vec<String> = [early, a, b, c].iter().map(|t| time(*t).unwrap()).collect();
        assert_eq!(encoded[1], "2026-09-21T14:13:20.000000000Z");
        assert!(encoded.iter().all(|e| e.len() == TIME_WIDTH));
        assert!(encoded.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(parse_time(&encoded[2]), Some(b));
        let far = Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap();
        assert!(matches!(time(far), Err(StoreError::Invalid(_))));
    }

    #[test]
    fn numbered_keys_sort_by_number_then_chunk_and_parse_back() {
        let keys = [
            event_sk(2, 0),
            event_sk(2, 1),
            event_sk(10, 0),
            event_sk(u64::MAX, 4),
        ];
        assert_eq!(keys[0], "EVT#00000000000000000002#000");
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(parse_numbered(EVENT_PREFIX, &keys[3]), Some((u64::MAX, 4)));
        assert_eq!(
            parse_numbered(HISTORY_PREFIX, &history_sk(7, 2)),
            Some((7, 2))
        );
        assert_eq!(
            parse_numbered(ARTIFACT_PREFIX, &artifact_sk(3, 0)),
            Some((3, 0))
        );
        assert_eq!(parse_numbered(EVENT_PREFIX, &history_sk(7, 2)), None);
        assert_eq!(parse_numbered(EVENT_PREFIX, "EVT#12#000"), None);
        assert_eq!(
            event_of_keys("TASK#t#1", &event_sk(7, 0)),
            Some(("t#1", 7)),
            "the first chunk of event 7 of task t#1"
        );
        assert_eq!(
            event_of_keys("TASK#t", &event_sk(7, 1)),
            None,
            "a later chunk"
        );
        assert_eq!(event_of_keys("TASK#t", TASK_SK), None);
        assert_eq!(event_of_keys("PART#x", &event_sk(7, 0)), None);
        let (lo, hi) = numbered_range(EVENT_PREFIX, 4, 5);
        assert!(
            lo <= event_sk(4, 0)
                && event_sk(5, 999) <= hi
                && event_sk(6, 0) > hi
                && event_sk(3, 999) < lo
        );
    }

    #[test]
    fn inbox_keys_are_exact_whatever_the_message_id() {
        let at = time(Utc.timestamp_opt(1_790_000_000, 0).unwrap()).unwrap();
        let a = inbox_sk(&at, 0, "m#1");
        let b = inbox_sk(&at, 1, "m");
        assert_eq!(a, "INBOX#2026-09-21T14:13:20.000000000Z#000#m#1");
        assert_ne!(a, inbox_sk(&at, 0, "m"));
        assert_eq!(parse_inbox_chunk(&a), Some(0));
        assert_eq!(parse_inbox_chunk(&b), Some(1));
        assert_eq!(parse_inbox_chunk("INBOX#short"), None);
    }

    #[test]
    fn audit_and_index_keys_order_by_time_then_id() {
        let t0 = time(Utc.timestamp_opt(1_790_000_000, 0).unwrap()).unwrap();
        let t1 = time(Utc.timestamp_opt(1_790_000_001, 0).unwrap()).unwrap();
        assert!(audit_sk(&t0, "m-2") < audit_sk(&t1, "m-1"));
        assert!(audit_sk(&t1, "m-1") < audit_sk(&t1, "m-2"));
        assert!(index_sk(&t0, "t-9") < index_sk(&t1, "t-0"));
        assert!(index_sk(&t1, "t-0") < index_sk(&t1, "t-1"));
        // "status at or after t1" is `GSI1SK >= t1`: a bare time sorts before its tasks.
        assert!(t1 < index_sk(&t1, "t-0"));
        assert_eq!(task_pk("p.1"), "TASK#p.1");
        assert_eq!(participant_sk("alice"), "PART#alice");
        assert_eq!(message_id_sk("m-1"), "MID#m-1");
        assert_eq!(push_sk("c1"), "PUSH#c1");
        assert_eq!(push_count_sk(Some("alice")), "PCOUNT#alice");
        assert_eq!(push_count_sk(None), "PCOUNT");
        assert!(!push_count_sk(None).starts_with(PUSH_PREFIX));
    }

    #[test]
    fn lease_keys_order_by_expiry_and_bound_at_now() {
        let early = lease_index_sk(1_000, "t-2");
        let late = lease_index_sk(81_000, "t-1");
        assert_eq!(early, "00000000000000001000#t-2");
        assert!(early < late);
        // Expired at `now` (`Lease::expired`): a lease expiring at `now` is below the bound,
        // one a millisecond later is not.
        assert!(lease_index_sk(5_000, "t") < lease_index_bound(5_000));
        assert!(lease_index_sk(4_999, "t") < lease_index_bound(5_000));
        assert!(lease_index_sk(5_001, "t") > lease_index_bound(5_000));
        assert_eq!(epoch_millis(Utc.timestamp_opt(-5, 0).unwrap()), 0);
    }

    #[test]
    fn page_tokens_round_trip_and_refuse_anything_else() {
        let ts = time(Utc.timestamp_opt(1_790_000_000, 0).unwrap()).unwrap();
        let token = PageToken {
            ts: ts.clone(),
            task: "t#1".into(),
        };
        let text = token.encode();
        assert!(
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{text}"
        );
        assert_eq!(PageToken::decode(&text).unwrap(), token);
        assert_eq!(PageToken::from_index_sk(&token.index_sk()), Some(token));
        for bad in [
            "not a token".to_owned(),
            String::new(),
            URL_SAFE_NO_PAD.encode("{}"),
            URL_SAFE_NO_PAD.encode(r#"{"ts":"yesterday","task":"t"}"#),
            URL_SAFE_NO_PAD.encode(format!(r#"{{"ts":"{ts}","task":""}}"#)),
        ] {
            assert!(
                matches!(PageToken::decode(&bad), Err(StoreError::Invalid(_))),
                "{bad}"
            );
        }
        assert_eq!(PageToken::from_index_sk("short"), None);
    }
}
