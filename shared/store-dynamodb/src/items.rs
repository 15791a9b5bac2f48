//! The stored shapes: attribute maps of task, chunk, inbox and lease items, building them,
//! reading them back, and reassembling chunked documents.

use std::collections::{BTreeSet, HashMap};

use a2a::TaskState;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Duration;
use serde::de::DeserializeOwned;
use task_store::{InboxItem, Lease, StoreError, StoreResult, StoredTask, TaskCounters, TaskRecord};

use crate::error::DynamoDbError;
use crate::keys;
use crate::schema::{GSI2_PK, GSI2_SK, LEASE_PARTITION, PK, SK, TTL};

pub type Item = HashMap<String, AttributeValue>;

/// Attribute names of the items (besides the keys).
pub mod attr {
    /// A JSON document, or one chunk of it.
    pub const DOC: &str = "doc";
    /// How many chunks the document has (on every chunk).
    pub const CHUNKS: &str = "chunks";
    /// The task version that wrote an artifact chunk (tells a replaced artifact's leftovers).
    pub const GEN: &str = "gen";
    pub const VERSION: &str = "version";
    /// The task state, by its ProtoJSON name.
    pub const STATE: &str = "state";
    /// Participant id → role.
    pub const ROLES: &str = "roles";
    pub const EVENTS: &str = "events";
    pub const HISTORY: &str = "history";
    pub const TRANSCRIPT: &str = "transcript";
    pub const ARTIFACT_IDS: &str = "artifact_ids";
    pub const TASK: &str = "task";
    pub const AT: &str = "at";
    pub const MESSAGE_ID: &str = "mid";
    pub const SENDER: &str = "sender";
    /// A lease's holder; a push config's owner.
    pub const OWNER: &str = "owner";
    /// A push config counter's count.
    pub const COUNT: &str = "n";
    pub const TOKEN: &str = "token";
    pub const EXPIRES_AT: &str = "expires_at";
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    HashMap::from([(PK.to_owned(), s(pk)), (SK.to_owned(), s(sk))])
}

/// `PK/SK` of an item, for error texts.
pub fn describe_key(item: &Item) -> String {
    let part = |name| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .map_or("?", String::as_str)
    };
    format!("{}/{}", part(PK), part(SK))
}

pub fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, DynamoDbError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(DynamoDbError::corrupt(
            describe_key(item),
            format!("no string attribute {name}"),
        )),
    }
}

pub fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, DynamoDbError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| {
            DynamoDbError::corrupt(
                describe_key(item),
                format!("attribute {name} is not a count"),
            )
        }),
        _ => Err(DynamoDbError::corrupt(
            describe_key(item),
            format!("no number attribute {name}"),
        )),
    }
}

pub fn get_json<T: DeserializeOwned>(item: &Item, name: &str) -> Result<T, DynamoDbError> {
    serde_json::from_str(get_s(item, name)?)
        .map_err(|e| DynamoDbError::corrupt(describe_key(item), format!("attribute {name}: {e}")))
}

pub fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("cannot encode: {e}")))
}

/// A state's ProtoJSON name (`TASK_STATE_WORKING`), as the `state` attribute holds it.
pub fn state_name(state: &TaskState) -> StoreResult<String> {
    match serde_json::to_value(state) {
        Ok(serde_json::Value::String(name)) => Ok(name),
        _ => Err(StoreError::Invalid(format!(
            "task state {state:?} has no name"
        ))),
    }
}

/// The task item: the document plus what conditions and the index read without parsing it.
pub fn task_item(
    record: &TaskRecord,
    doc: String,
    version: u64,
    counters: &TaskCounters,
) -> StoreResult<Item> {
    // The status time orders the index; the task item needs none of its own (nor the
    // context): both are in the document, and leaving them out keeps a small task item
    // under 1 KB, half the write units per write.
    let status_time = record.status.timestamp.ok_or_else(|| {
        StoreError::Invalid(format!("task {} has no status timestamp", record.id))
    })?;
    keys::time(status_time)?;
    let roles: HashMap<String, AttributeValue> = record
        .roles()
        .map(|(participant, role)| (participant.to_owned(), s(role.as_str())))
        .collect();
    let mut item = key(keys::task_pk(&record.id), keys::TASK_SK);
    item.insert(attr::DOC.into(), s(doc));
    item.insert(attr::VERSION.into(), n(version));
    item.insert(attr::STATE.into(), s(state_name(record.state())?));
    item.insert(attr::ROLES.into(), AttributeValue::M(roles));
    item.insert(attr::EVENTS.into(), n(counters.events));
    item.insert(attr::HISTORY.into(), n(counters.history));
    item.insert(attr::TRANSCRIPT.into(), n(counters.transcript));
    item.insert(
        attr::ARTIFACT_IDS.into(),
        AttributeValue::L(counters.artifact_ids.iter().map(|a| s(a.clone())).collect()),
    );
    Ok(item)
}

/// An estimate of an item's stored size (names and values), for the 400 KB item limit.
pub fn approximate_size(item: &Item) -> usize {
    fn value_size(value: &AttributeValue) -> usize {
        match value {
            AttributeValue::S(v) | AttributeValue::N(v) => v.len(),
            AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
            AttributeValue::M(map) => {
                3 + map
                    .iter()
                    .map(|(k, v)| 1 + k.len() + value_size(v))
                    .sum::<usize>()
            }
            _ => 8,
        }
    }
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

pub fn parse_task(item: &Item) -> Result<StoredTask, DynamoDbError> {
    let record: TaskRecord = get_json(item, attr::DOC)?;
    let artifact_ids = match item.get(attr::ARTIFACT_IDS) {
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| {
                v.as_s().cloned().map_err(|_| {
                    DynamoDbError::corrupt(describe_key(item), "artifact id not a string")
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(DynamoDbError::corrupt(
                describe_key(item),
                "no artifact_ids list",
            ));
        }
    };
    Ok(StoredTask {
        record,
        version: get_n(item, attr::VERSION)?,
        counters: TaskCounters {
            events: get_n(item, attr::EVENTS)?,
            history: get_n(item, attr::HISTORY)?,
            // Absent on task items written before transcripts existed.
            transcript: match item.get(attr::TRANSCRIPT) {
                Some(_) => get_n(item, attr::TRANSCRIPT)?,
                None => 0,
            },
            artifact_ids,
        },
    })
}

/// Participant ids of a record, each once.
pub fn participants(record: &TaskRecord) -> BTreeSet<&str> {
    record.roles().map(|(p, _)| p).collect()
}

/// One stored chunk of a numbered document (event, history message, artifact).
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub n: u64,
    pub index: usize,
    pub count: usize,
    pub generation: Option<u64>,
    pub text: String,
}

/// The items of one chunked document; `sort_key(i)` is chunk `i`'s sort key.
pub fn chunk_items(
    pk: &str,
    sort_key: impl Fn(usize) -> String,
    json: &str,
    generation: Option<u64>,
) -> Vec<Item> {
    let pieces = task_store::limits::chunks(json);
    let count = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(index, text)| {
            let mut item = key(pk, sort_key(index));
            item.insert(attr::DOC.into(), s(text));
            item.insert(attr::CHUNKS.into(), n(count));
            if let Some(generation) = generation {
                item.insert(attr::GEN.into(), n(generation));
            }
            item
        })
        .collect()
}

/// The items of one queued message (`json`: its encoded message), chunk 0 first.
pub fn inbox_chunks(pk: &str, item: &InboxItem, json: &str) -> StoreResult<Vec<Item>> {
    let at = keys::time(item.key.enqueued_at)?;
    let message_id = &item.key.message_id;
    let mut chunks = chunk_items(pk, |c| keys::inbox_sk(&at, c, message_id), json, None);
    for (i, chunk) in chunks.iter_mut().enumerate() {
        chunk.insert(attr::AT.into(), s(at.clone()));
        chunk.insert(attr::MESSAGE_ID.into(), s(message_id.clone()));
        if i == 0 {
            chunk.insert(attr::SENDER.into(), s(item.sender.clone()));
        }
    }
    Ok(chunks)
}

pub fn parse_chunk(prefix: &str, item: &Item) -> Result<Chunk, DynamoDbError> {
    let sk = get_s(item, SK)?;
    let (number, index) = keys::parse_numbered(prefix, sk)
        .ok_or_else(|| DynamoDbError::corrupt(describe_key(item), "unreadable sort key"))?;
    Ok(Chunk {
        n: number,
        index,
        count: get_n(item, attr::CHUNKS)?,
        generation: item
            .get(attr::GEN)
            .map(|_| get_n(item, attr::GEN))
            .transpose()?,
        text: get_s(item, attr::DOC)?.to_owned(),
    })
}

/// A document some of whose chunks were not (yet) visible: a transaction in flight seen
/// by a query (queries are read-committed per item, not per transaction).
#[derive(Debug, PartialEq, Eq)]
pub struct Incomplete(pub u64);

/// Joins ascending chunks into documents `(n, json)`. Chunk 0 says how many chunks its
/// document has and (artifacts) which generation they belong to; chunks of another
/// generation or beyond the count are leftovers of a replaced artifact and skipped.
pub fn assemble(chunks: Vec<Chunk>) -> Result<Vec<(u64, String)>, Incomplete> {
    let mut docs: Vec<(u64, String)> = Vec::new();
    let mut current: Option<(Chunk, usize)> = None; // chunk 0 of the open document, chunks joined
    for chunk in chunks {
        if let Some((head, _)) = &current
            && head.n != chunk.n
        {
            let (head, joined) = current.take().ok_or(Incomplete(chunk.n))?;
            if joined != head.count {
                return Err(Incomplete(head.n));
            }
            docs.push((head.n, head.text));
        }
        match &mut current {
            None => {
                if chunk.index != 0 {
                    return Err(Incomplete(chunk.n));
                }
                current = Some((chunk, 1));
            }
            Some((head, joined)) => {
                let leftover = chunk.generation != head.generation || chunk.index >= head.count;
                if leftover {
                    continue;
                }
                if chunk.index != *joined {
                    return Err(Incomplete(head.n));
                }
                head.text.push_str(&chunk.text);
                *joined += 1;
            }
        }
    }
    if let Some((head, joined)) = current {
        if joined != head.count {
            return Err(Incomplete(head.n));
        }
        docs.push((head.n, head.text));
    }
    Ok(docs)
}

/// How long an expired lease stays for the sweeper before DynamoDB's TTL may delete it.
pub const LEASE_RETENTION: Duration = Duration::days(7);

/// The key of a task's lease item.
pub fn lease_key(task_id: &str) -> Item {
    key(keys::task_pk(task_id), keys::LEASE_SK)
}

/// The attributes of a lease expiring at `millis`: expiry, GSI2 keys, TTL.
pub fn expiry_attributes(task_id: &str, millis: u64) -> [(&'static str, AttributeValue); 4] {
    let ttl_seconds = millis / 1000 + LEASE_RETENTION.num_seconds().unsigned_abs();
    [
        (attr::EXPIRES_AT, n(millis)),
        (GSI2_PK, s(LEASE_PARTITION)),
        (GSI2_SK, s(keys::lease_index_sk(millis, task_id))),
        (TTL, n(ttl_seconds)),
    ]
}

/// The lease item of a held lease.
pub fn lease_item(lease: &Lease) -> Item {
    let millis = keys::epoch_millis(lease.expires_at);
    let mut item = lease_key(&lease.task_id);
    item.insert(attr::OWNER.into(), s(lease.owner.clone()));
    item.insert(attr::TOKEN.into(), s(lease.token.clone()));
    for (name, value) in expiry_attributes(&lease.task_id, millis) {
        item.insert(name.into(), value);
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: u64, index: usize, count: usize, generation: Option<u64>, text: &str) -> Chunk {
        Chunk {
            n,
            index,
            count,
            generation,
            text: text.into(),
        }
    }

    #[test]
    fn chunks_join_into_documents() {
        let docs = assemble(vec![
            chunk(0, 0, 1, None, "a"),
            chunk(1, 0, 3, None, "b1"),
            chunk(1, 1, 3, None, "b2"),
            chunk(1, 2, 3, None, "b3"),
            chunk(2, 0, 1, None, "c"),
        ])
        .unwrap();
        assert_eq!(
            docs,
            vec![(0, "a".into()), (1, "b1b2b3".into()), (2, "c".into())]
        );
        assert_eq!(assemble(vec![]).unwrap(), vec![]);
    }

    #[test]
    fn a_replaced_artifacts_leftover_chunks_are_skipped() {
        // Generation 5 wrote 1 chunk over generation 3's 3 chunks.
        let docs = assemble(vec![
            chunk(0, 0, 1, Some(5), "new"),
            chunk(0, 1, 3, Some(3), "old2"),
            chunk(0, 2, 3, Some(3), "old3"),
            chunk(1, 0, 2, Some(5), "x"),
            chunk(1, 1, 2, Some(5), "y"),
        ])
        .unwrap();
        assert_eq!(docs, vec![(0, "new".into()), (1, "xy".into())]);
    }

    #[test]
    fn a_partly_visible_document_is_incomplete() {
        assert_eq!(
            assemble(vec![chunk(0, 0, 2, None, "a")]),
            Err(Incomplete(0))
        );
        assert_eq!(
            assemble(vec![chunk(0, 1, 2, None, "b")]),
            Err(Incomplete(0))
        );
        assert_eq!(
            assemble(vec![chunk(0, 0, 2, None, "a"), chunk(1, 0, 1, None, "c")]),
            Err(Incomplete(0))
        );
        // Chunk 1 of the new generation is not visible yet, only the old one.
        assert_eq!(
            assemble(vec![
                chunk(0, 0, 2, Some(5), "n1"),
                chunk(0, 1, 2, Some(3), "o2")
            ]),
            Err(Incomplete(0))
        );
    }

    #[test]
    fn chunk_items_key_each_piece() {
        let json = "x".repeat(task_store::limits::CHUNK_BYTES + 10);
        let items = chunk_items("TASK#t", |i| keys::history_sk(4, i), &json, Some(2));
        assert_eq!(items.len(), 2);
        assert_eq!(get_s(&items[1], SK).unwrap(), keys::history_sk(4, 1));
        assert_eq!(get_n::<usize>(&items[1], attr::CHUNKS).unwrap(), 2);
        let parsed: Vec<Chunk> = items
            .iter()
            .map(|i| parse_chunk(keys::HISTORY_PREFIX, i).unwrap())
            .collect();
        assert_eq!(assemble(parsed).unwrap(), vec![(4, json)]);
    }

    #[test]
    fn a_task_item_reads_back_as_the_stored_task() {
        use chrono::TimeZone;
        use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
        let mut extension = TaskExtension::new("t", "d");
        extension.participants = vec![
            Participant::new("ops", ParticipantKind::Human, Role::Admin),
            Participant::new("agent", ParticipantKind::Agent, Role::Assignee),
        ];
        let record = TaskRecord {
            id: "t-1".into(),
            context_id: "ctx".into(),
            status: a2a::TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: Some(chrono::Utc.timestamp_opt(1_790_000_000, 0).unwrap()),
            },
            sub_state: None,
            extension,
            agent: Default::default(),
        };
        let counters = TaskCounters {
            events: 3,
            history: 2,
            artifact_ids: vec!["a#1".into()],
            transcript: 4,
        };
        let doc = serde_json::to_string(&record).unwrap();
        let item = task_item(&record, doc, 7, &counters).unwrap();
        assert_eq!(item[attr::STATE], s("TASK_STATE_WORKING"));
        assert_eq!(item[attr::ROLES].as_m().unwrap()["ops"], s("admin"));
        assert!(!item.contains_key("ts") && !item.contains_key("ctx"));
        assert!(approximate_size(&item) > item[attr::DOC].as_s().unwrap().len());
        let stored = parse_task(&item).unwrap();
        assert_eq!(
            (stored.record, stored.version, stored.counters),
            (record, 7, counters)
        );
        let mut broken = item.clone();
        broken.remove(attr::VERSION);
        let err = parse_task(&broken).unwrap_err().to_string();
        assert_eq!(err, "item TASK#t-1/TASK: no number attribute version");
    }

    #[test]
    fn states_are_stored_by_their_protojson_names() {
        assert_eq!(
            state_name(&TaskState::InputRequired).unwrap(),
            "TASK_STATE_INPUT_REQUIRED"
        );
        assert_eq!(
            state_name(&TaskState::Completed).unwrap(),
            "TASK_STATE_COMPLETED"
        );
    }
}
