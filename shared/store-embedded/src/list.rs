//! ListTasks: a participant's tasks, newest status first, read from the participant index
//! (`participant_index`), filtered, in pages whose token is the last index key of the page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use task_store::{ListQuery, StoreError, StoreResult, TaskPage};

use crate::EmbeddedStore;
use crate::error::backend;
use crate::items::{INDEX, json};
use crate::reads;

impl EmbeddedStore {
    /// One page of `participant_id`'s tasks that match `query`.
    pub(crate) fn list_tasks(
        &self,
        participant_id: &str,
        query: &ListQuery,
    ) -> StoreResult<TaskPage> {
        let after = query.page_token.as_deref().map(decode_token).transpose()?;
        self.read(|snapshot| {
            let p = participant_id;
            let entries = snapshot
                .table(INDEX)?
                .range((p, i64::MIN, 0, "")..(p, i64::MAX, 0, ""), true)?;
            let mut page = Vec::new();
            let mut total = 0;
            let mut last_key = None;
            let mut more = false;
            for entry in entries {
                let (key, _) = entry.map_err(backend)?;
                let (_, secs, nanos, task_id) = key.value();
                let Some(task) = reads::task(snapshot, task_id)? else {
                    continue;
                };
                if !query.matches(&task.record) {
                    continue;
                }
                total += 1;
                let before_cursor = after
                    .as_ref()
                    .is_none_or(|c| (secs, nanos, task_id) < (c.secs, c.nanos, c.task.as_str()));
                if !before_cursor {
                    continue;
                }
                if page.len() < query.page_size {
                    last_key = Some(PageToken {
                        secs,
                        nanos,
                        task: task_id.to_owned(),
                    });
                    page.push(task);
                } else {
                    more = true;
                }
            }
            let next_page_token = match (more, last_key) {
                (true, Some(key)) => encode_token(&key)?,
                _ => String::new(),
            };
            Ok(TaskPage {
                tasks: page,
                next_page_token,
                total_size: total,
            })
        })
    }
}

/// Page tokens: the index key of the last task of the previous page.
#[derive(Serialize, Deserialize)]
struct PageToken {
    secs: i64,
    nanos: u32,
    task: String,
}

fn encode_token(token: &PageToken) -> StoreResult<String> {
    Ok(URL_SAFE_NO_PAD.encode(json(token)?))
}

fn decode_token(text: &str) -> StoreResult<PageToken> {
    let invalid = || StoreError::Invalid("invalid page token".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
    serde_json::from_slice(&bytes).map_err(|_| invalid())
}
