//! ListTasks' merge of a participant's state partitions (GSI1), newest status first.

use std::collections::VecDeque;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use task_store::StoreResult;

use crate::DynamoDbStore;
use crate::items::{self, Item};
use crate::schema::GSI1_SK;

/// One GSI1 partition (a participant's tasks in one state) read newest first, a call at a
/// time, into a buffer the merge takes from.
pub(crate) struct Cursor {
    pub query: QueryFluentBuilder,
    pub start: Option<Item>,
    pub buffer: VecDeque<Item>,
    pub ended: bool,
    pub limit: i32,
    /// An entry with this sort key or a later one is the previous page's (the token's own
    /// entry, which `BETWEEN` includes): skipped.
    pub before: Option<String>,
}

fn sort_key_of(entry: &Item) -> &str {
    items::get_s(entry, GSI1_SK).unwrap_or_default()
}

impl DynamoDbStore {
    async fn fill(&self, cursor: &mut Cursor) -> StoreResult<()> {
        let out = self
            .query_page(
                cursor
                    .query
                    .clone()
                    .limit(cursor.limit)
                    .set_exclusive_start_key(cursor.start.take()),
            )
            .await?;
        let before = cursor.before.as_deref();
        cursor.buffer.extend(
            out.items
                .unwrap_or_default()
                .into_iter()
                .filter(|e| before.is_none_or(|b| sort_key_of(e) < b)),
        );
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => cursor.start = Some(k),
            _ => cursor.ended = true,
        }
        // Entries left out call for more reading: read more per call.
        cursor.limit = cursor.limit.saturating_mul(2).min(1000);
        Ok(())
    }

    /// The next `n` entries of the merged partitions, newest first (fewer at the end).
    pub(crate) async fn next_entries(
        &self,
        cursors: &mut [Cursor],
        n: usize,
    ) -> StoreResult<Vec<Item>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let empty = cursors
                .iter_mut()
                .filter(|c| c.buffer.is_empty() && !c.ended)
                .map(|c| self.fill(c));
            futures::future::try_join_all(empty).await?;
            let newest = cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.buffer.front().map(|e| (sort_key_of(e), i)))
                .max()
                .map(|(_, i)| i);
            match newest {
                Some(i) => out.extend(cursors[i].buffer.pop_front()),
                None if cursors.iter().all(|c| c.ended) => break,
                None => {}
            }
        }
        Ok(out)
    }
}
