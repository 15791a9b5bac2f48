//! ListTasks with a context filter: the participant's tasks in that context (GSI3).

use std::collections::HashMap;

use task_store::{ListQuery, StoreResult, StoredTask, TaskPage};

use crate::DynamoDbStore;
use crate::items::{self, s};
use crate::keys::{self, PageToken};
use crate::list::token_at;
use crate::schema::{GSI3, GSI3_PK, GSI3_SK};

impl DynamoDbStore {
    /// A context filter: the participant's tasks in that context (GSI3), each checked
    /// against its task, then filtered, ordered and paged here. A context is one
    /// conversation: its size, not the participant's task count, sets the cost.
    pub(crate) async fn list_context(
        &self,
        participant_id: &str,
        query: &ListQuery,
        context: &str,
        start: Option<PageToken>,
    ) -> StoreResult<TaskPage> {
        let entries = self
            .query_all(
                self.query()
                    .index_name(GSI3)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", GSI3_PK)
                    .expression_attribute_values(
                        ":pk",
                        s(keys::context_partition(participant_id, context)),
                    ),
            )
            .await?;
        let ids: Vec<&str> = entries
            .iter()
            .map(|e| items::get_s(e, GSI3_SK))
            .collect::<Result<_, _>>()?;
        let mut matched: Vec<(String, StoredTask)> = Vec::new();
        for task in self.tasks_by_id(ids).await?.into_values() {
            let member = task
                .record
                .extension
                .participants
                .iter()
                .any(|p| p.id == participant_id);
            if member && query.matches(&task.record) {
                let time = keys::time(task.record.status.timestamp.unwrap_or_default())?;
                matched.push((keys::index_sk(&time, &task.record.id), task));
            }
        }
        matched.sort_by(|a, b| b.0.cmp(&a.0));
        let total_size = matched.len();
        let before = start.as_ref().map(PageToken::index_sk);
        let mut page: Vec<(String, StoredTask)> = matched
            .into_iter()
            .filter(|(sk, _)| before.as_ref().is_none_or(|b| sk < b))
            .take(query.page_size + 1)
            .collect();
        let more = page.len() > query.page_size;
        page.truncate(query.page_size);
        let next_page_token = match (more, page.last()) {
            (true, Some((sk, _))) => token_at(sk, &HashMap::new())?,
            _ => String::new(),
        };
        Ok(TaskPage {
            tasks: page.into_iter().map(|(_, task)| task).collect(),
            next_page_token,
            total_size,
        })
    }
}
