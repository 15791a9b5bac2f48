//! Retention: which terminal tasks a purge may take, shared by every adapter. A task is
//! eligible once it has been in a terminal state for the retention period (counted from its
//! status time, the instant it reached that state) and no parent on this service still
//! links it: a sub-task goes with or after its parent, never before.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};

use crate::model::StoredTask;

/// What a purge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purged {
    /// Tasks removed, every row of each, parents before their children.
    pub removed: Vec<String>,
    /// Tasks marked to be removed by the store itself (DynamoDB's TTL): each with the instant
    /// its items expire, which may be in the future (a task marked as soon as it may be) and
    /// is never before its parent's.
    pub expiring: Vec<(String, DateTime<Utc>)>,
}

/// A terminal task as a purge weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub task_id: String,
    /// The version read: the removal is conditional on it (a task written since is weighed
    /// again by the next purge).
    pub version: u64,
    /// When it reached its terminal state (its status time).
    pub terminal_at: DateTime<Utc>,
    /// The parents on this service (`parent_tasks` without an agent).
    pub local_parents: Vec<String>,
}

impl Candidate {
    /// The task as a candidate, if it is in a terminal state with a status time.
    pub fn of(task: &StoredTask) -> Option<Self> {
        let record = &task.record;
        if !record.state().is_terminal() {
            return None;
        }
        Some(Self {
            task_id: record.id.clone(),
            version: task.version,
            terminal_at: record.status_timestamp()?,
            local_parents: record
                .extension
                .parent_tasks
                .iter()
                .filter(|r| r.agent.is_none())
                .map(|r| r.task_id.clone())
                .collect(),
        })
    }

    /// When its retention ends.
    pub fn expires_at(&self, keep: Duration) -> DateTime<Utc> {
        self.terminal_at
            .checked_add_signed(keep)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// The candidates a purge at `now` removes, parents before children: those whose retention
/// `keep` has ended and whose every local parent either no longer exists (`parent_exists`
/// says, for a task that is not a candidate taken here) or is taken here too.
pub fn eligible(
    candidates: &[Candidate],
    now: DateTime<Utc>,
    keep: Duration,
    parent_exists: impl Fn(&str) -> bool,
) -> Vec<&Candidate> {
    let mut taken: Vec<&Candidate> = Vec::new();
    let mut ids: HashSet<&str> = HashSet::new();
    let expired: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.expires_at(keep) <= now)
        .collect();
    // A child may come before its parent in `candidates`: take in rounds until none moves.
    loop {
        let before = taken.len();
        for c in &expired {
            if ids.contains(c.task_id.as_str()) {
                continue;
            }
            let free = c
                .local_parents
                .iter()
                .all(|p| ids.contains(p.as_str()) || !parent_exists(p));
            if free {
                ids.insert(&c.task_id);
                taken.push(c);
            }
        }
        if taken.len() == before {
            return taken;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn c(id: &str, secs: i64, parents: &[&str]) -> Candidate {
        Candidate {
            task_id: id.into(),
            version: 1,
            terminal_at: DateTime::from_timestamp(secs, 0).unwrap(),
            local_parents: parents.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    #[test]
    fn children_go_with_or_after_their_parents() {
        let keep = Duration::seconds(10);
        let now = DateTime::from_timestamp(100, 0).unwrap();
        // The child is listed first; its parent is taken in the same purge.
        let all = [
            c("p.1", 0, &["p"]),
            c("p", 0, &[]),
            c("q.1", 0, &["q"]),
            c("young", 95, &[]),
            c("gone.1", 0, &["gone"]),
        ];
        let exists = |id: &str| id == "q" || id == "p";
        let ids: Vec<&str> = eligible(&all, now, keep, exists)
            .iter()
            .map(|c| c.task_id.as_str())
            .collect();
        assert_eq!(ids, ["p", "gone.1", "p.1"]);
    }
}
