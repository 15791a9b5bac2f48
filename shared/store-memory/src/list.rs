//! ListTasks: a participant's tasks, newest status timestamp first (ties: task id
//! descending), filtered, counted and paged from the listing ([`Listing`]:
//! `task_store::listing`'s entries and counts, changed by each commit), so a page costs what
//! it returns whatever the participant's task count. The page token is the (status
//! timestamp, task id) of the previous page's last task.

use std::collections::{BTreeSet, HashMap};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use task_store::listing::{ListingChange, state_key};
use task_store::{ListQuery, StoreError, StoreResult, StoredTask, TaskPage};

use crate::items::Items;

/// Where a task is in the listing order (larger first).
type Position = (DateTime<Utc>, String);

/// The listing's entries and counts.
#[derive(Default)]
pub(crate) struct Listing {
    /// (participant, state, status time, task id).
    by_state: BTreeSet<(String, String, DateTime<Utc>, String)>,
    /// (participant, context, task id).
    by_context: BTreeSet<(String, String, String)>,
    /// (participant, state or "" for all) → tasks.
    counts: HashMap<(String, String), u64>,
}

impl Listing {
    /// A commit's change of the listing.
    pub(crate) fn apply(&mut self, task_id: &str, change: &ListingChange) {
        let has_context = |entries: &[task_store::listing::Listed], p: &str, ctx: &str| {
            entries
                .iter()
                .any(|l| l.participant == p && l.context == ctx)
        };
        for l in &change.removed {
            self.by_state.remove(&(
                l.participant.clone(),
                l.state.clone(),
                l.status_time,
                task_id.to_owned(),
            ));
            if !has_context(&change.added, &l.participant, &l.context) {
                self.by_context.remove(&(
                    l.participant.clone(),
                    l.context.clone(),
                    task_id.to_owned(),
                ));
            }
        }
        for l in &change.added {
            self.by_state.insert((
                l.participant.clone(),
                l.state.clone(),
                l.status_time,
                task_id.to_owned(),
            ));
            self.by_context
                .insert((l.participant.clone(), l.context.clone(), task_id.to_owned()));
        }
        for ((p, state), delta) in change.count_deltas() {
            let count = self
                .counts
                .entry((p, state.unwrap_or_default()))
                .or_default();
            *count = count.saturating_add_signed(delta);
        }
    }

    fn count(&self, p: &str, state: &str) -> u64 {
        self.counts
            .get(&(p.to_owned(), state.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

pub(crate) fn list(
    items: &Items,
    participant_id: &str,
    query: &ListQuery,
) -> StoreResult<TaskPage> {
    let cursor = query.page_token.as_deref().map(decode_token).transpose()?;
    let p = participant_id.to_owned();
    let listing = &items.listing;
    let (positions, total): (Vec<Position>, u64) = match &query.context_id {
        Some(context) => {
            // Every task of the participant in the context, filtered and ordered here.
            let mut matching = Vec::new();
            let from = (p.clone(), context.clone(), String::new());
            for (_, _, task_id) in listing
                .by_context
                .range(from..)
                .take_while(|(q, c, _)| *q == p && c == context)
            {
                let record = task(items, task_id)?.record;
                if query.matches(&record) {
                    matching.push((
                        record.status_timestamp().unwrap_or_default(),
                        task_id.clone(),
                    ));
                }
            }
            matching.sort_by(|a, b| b.cmp(a));
            let total = matching.len() as u64;
            let rest = matching
                .into_iter()
                .filter(|position| cursor.as_ref().is_none_or(|c| position < c))
                .take(query.page_size + 1)
                .collect();
            (rest, total)
        }
        None => {
            let states = match &query.state {
                Some(state) => vec![state_key(state)],
                None => task_store::listing::state_keys(),
            };
            let lowest = query.status_after.unwrap_or(DateTime::<Utc>::MIN_UTC);
            let mut merged = Vec::new();
            let mut in_window = 0;
            for state in &states {
                let low = (p.clone(), state.clone(), lowest, String::new());
                let high = match &cursor {
                    Some((time, task)) => (p.clone(), state.clone(), *time, task.clone()),
                    None => (
                        p.clone(),
                        state.clone(),
                        DateTime::<Utc>::MAX_UTC,
                        String::new(),
                    ),
                };
                merged.extend(
                    listing
                        .by_state
                        .range(low.clone()..high)
                        .rev()
                        .take(query.page_size + 1)
                        .map(|(_, _, time, task)| (*time, task.clone())),
                );
                if query.status_after.is_some() {
                    let end = (
                        p.clone(),
                        state.clone(),
                        DateTime::<Utc>::MAX_UTC,
                        String::new(),
                    );
                    in_window += listing.by_state.range(low..end).count() as u64;
                }
            }
            merged.sort_by(|a, b| b.cmp(a));
            merged.truncate(query.page_size + 1);
            let total = match (&query.status_after, &query.state) {
                (Some(_), _) => in_window,
                (None, Some(state)) => listing.count(&p, &state_key(state)),
                (None, None) => listing.count(&p, ""),
            };
            (merged, total)
        }
    };
    let more = positions.len() > query.page_size;
    let page: Vec<&Position> = positions.iter().take(query.page_size).collect();
    let next_page_token = match (more, page.last()) {
        (true, Some(position)) => encode_token(position),
        _ => String::new(),
    };
    let tasks = page
        .iter()
        .map(|(_, task_id)| task(items, task_id))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(TaskPage {
        tasks,
        next_page_token,
        total_size: usize::try_from(total).unwrap_or(usize::MAX),
    })
}

fn task(items: &Items, task_id: &str) -> StoreResult<StoredTask> {
    items
        .tasks
        .get(task_id)
        .ok_or_else(|| StoreError::Corrupt(format!("listing names task {task_id}, which is gone")))?
        .stored()
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
