//! ListTasks: a participant's tasks, newest status timestamp first (ties: task id
//! descending), filtered, counted and paged. The page token is the (status timestamp, task
//! id) of the previous page's last task.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use task_store::{ListQuery, StoreError, StoreResult, TaskPage};

use crate::items::Items;

/// Where a task is in the listing order (larger first).
type Position = (DateTime<Utc>, String);

pub(crate) fn list(
    items: &Items,
    participant_id: &str,
    query: &ListQuery,
) -> StoreResult<TaskPage> {
    let after = query.page_token.as_deref().map(decode_token).transpose()?;
    let mut matching = Vec::new();
    for task in items.tasks.values() {
        let task = task.stored()?;
        let record = &task.record;
        if record.roles().any(|(p, _)| p == participant_id) && query.matches(record) {
            let timestamp = record.status_timestamp().unwrap_or_default();
            matching.push(((timestamp, record.id.clone()), task));
        }
    }
    matching.sort_by(|(a, _), (b, _)| b.cmp(a));
    let total_size = matching.len();
    let mut rest = matching
        .into_iter()
        .filter(|(position, _)| after.as_ref().is_none_or(|cursor| position < cursor));
    let page: Vec<_> = rest.by_ref().take(query.page_size).collect();
    let more = rest.next().is_some();
    let next_page_token = match (more, page.last()) {
        (true, Some((position, _))) => encode_token(position),
        _ => String::new(),
    };
    Ok(TaskPage {
        tasks: page.into_iter().map(|(_, task)| task).collect(),
        next_page_token,
        total_size,
    })
}

fn encode_token((timestamp, task_id): &Position) -> String {
    let text = format!(
        "{}:{}:{task_id}",
        timestamp.timestamp(),
        timestamp.timestamp_subsec_nanos()
    );
    URL_SAFE_NO_PAD.encode(text)
}

fn decode_token(token: &str) -> StoreResult<Position> {
    let invalid = || StoreError::Invalid("invalid page token".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut fields = text.splitn(3, ':');
    let (Some(secs), Some(nanos), Some(task_id)) = (fields.next(), fields.next(), fields.next())
    else {
        return Err(invalid());
    };
    let secs = secs.parse().map_err(|_| invalid())?;
    let nanos = nanos.parse().map_err(|_| invalid())?;
    let timestamp = DateTime::from_timestamp(secs, nanos).ok_or_else(invalid)?;
    Ok((timestamp, task_id.to_owned()))
}
