//! The table's shape as the adapter uses it: key attributes, indexes, TTL attribute.
//!
//! `infra/template.yaml` (resource `TasksTable`) defines the table; a test checks that the
//! template declares exactly these names, so the two cannot drift apart.

/// Partition key of the table (string).
pub const PK: &str = "PK";
/// Sort key of the table (string).
pub const SK: &str = "SK";

/// The participant index: a participant's tasks in one state, newest status first.
pub const GSI1: &str = "GSI1";
/// `PART#<participant>#<state>` (`keys::listing_partition`).
pub const GSI1_PK: &str = "GSI1PK";
/// `<status timestamp, fixed width>#<task id>`.
pub const GSI1_SK: &str = "GSI1SK";

/// The lease index (sparse: only lease items carry its keys): leases by expiry.
pub const GSI2: &str = "GSI2";
/// Always [`LEASE_PARTITION`].
pub const GSI2_PK: &str = "GSI2PK";
/// `<expiry in epoch milliseconds, 20 digits>#<task id>`.
pub const GSI2_SK: &str = "GSI2SK";

/// The context index (keys only): a participant's tasks in one context.
pub const GSI3: &str = "GSI3";
/// `PCTX#<participant length>#<participant>#<context>` (`keys::context_partition`).
pub const GSI3_PK: &str = "GSI3PK";
/// The task id: a key that no status change moves.
pub const GSI3_SK: &str = "GSI3SK";

/// The TTL attribute (epoch seconds): lease items, and the items of a task whose retention
/// has started other than its index entries.
pub const TTL: &str = "ttl";

/// The end of an index entry's retention (epoch seconds). Not the TTL attribute: the
/// retention pass deletes the entry itself, with its count (`retention_index.rs`).
pub const EXPIRES: &str = "expires";

/// The one GSI2 partition every lease lives in.
pub const LEASE_PARTITION: &str = "LEASE";

/// The logical id of the table resource in `infra/template.yaml`.
pub const TEMPLATE_RESOURCE: &str = "TasksTable";

/// Every key attribute (all strings), as `AttributeDefinitions` must list them.
pub const KEY_ATTRIBUTES: [&str; 8] =
    [PK, SK, GSI1_PK, GSI1_SK, GSI2_PK, GSI2_SK, GSI3_PK, GSI3_SK];

/// An index: its name, partition and sort key, and projection type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexShape {
    pub name: &'static str,
    pub partition_key: &'static str,
    pub sort_key: &'static str,
    /// `ALL` or `KEYS_ONLY`.
    pub projection: &'static str,
}

/// The global secondary indexes the adapter queries.
pub const INDEXES: [IndexShape; 3] = [
    // ListTasks reads the task id and the entry's version: ALL keeps it one query.
    IndexShape {
        name: GSI1,
        partition_key: GSI1_PK,
        sort_key: GSI1_SK,
        projection: "ALL",
    },
    // The sweeper needs only the task id, which is in the keys.
    IndexShape {
        name: GSI2,
        partition_key: GSI2_PK,
        sort_key: GSI2_SK,
        projection: "KEYS_ONLY",
    },
    // ListTasks' context filter needs only the task ids, which are in the keys; a status
    // change rewrites the entry with the same GSI3 keys, which writes nothing to it.
    IndexShape {
        name: GSI3,
        partition_key: GSI3_PK,
        sort_key: GSI3_SK,
        projection: "KEYS_ONLY",
    },
];

/// DynamoDB's limit on the items of one `TransactWriteItems`.
pub const MAX_TRANSACTION_ITEMS: usize = 100;
/// DynamoDB's item size limit (bytes, names and values).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
