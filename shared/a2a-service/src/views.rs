//! Rendered task views, kept per task and version: a GetTask of a task that has not changed
//! since it was last rendered answers with the same JSON, after asking the store only
//! whether the version moved (`TaskStore::get_newer`).
//!
//! Why it is safe: every write of a task advances its version, and the view (document,
//! history, artifacts) changes only by writes; messages waiting in the inbox and push configs
//! are not part of it. A view is kept under the version of the document it was rendered
//! from and served only while the store still has that version. Who may read it is decided
//! on every request, from the participants of that same document.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::value::RawValue;
use task_core::extension::TaskExtension;

/// Views larger than this are not kept (a long conversation is rendered on each read).
const MAX_VIEW_BYTES: usize = 256 * 1024;

/// One task's rendered view.
pub(crate) struct View {
    pub(crate) version: u64,
    /// The participants and roles at that version (who may read it).
    pub(crate) extension: TaskExtension,
    pub(crate) json: Box<RawValue>,
}

/// The views of recently read tasks, within a byte budget (oldest kept first out).
pub(crate) struct Views {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    views: HashMap<String, Arc<View>>,
    /// Task ids in the order their views were kept.
    order: VecDeque<String>,
    bytes: usize,
}

impl Views {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change leaves the maps consistent; a panic elsewhere cannot break them.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self, task_id: &str) -> Option<Arc<View>> {
        self.lock().views.get(task_id).cloned()
    }

    /// Keeps `view` for `task_id` unless a view of a later version is kept already.
    pub(crate) fn keep(&self, task_id: &str, view: View) {
        let size = view.json.get().len();
        if size > MAX_VIEW_BYTES || size > self.budget {
            return;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        match inner.views.get(task_id) {
            Some(kept) if kept.version >= view.version => return,
            Some(kept) => inner.bytes -= kept.json.get().len(),
            None => inner.order.push_back(task_id.to_owned()),
        }
        inner.bytes += size;
        inner.views.insert(task_id.to_owned(), Arc::new(view));
        while inner.bytes > self.budget {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some(gone) = inner.views.remove(&oldest) {
                inner.bytes -= gone.json.get().len();
            }
        }
    }

    /// Drops a task's view (the task is gone).
    pub(crate) fn forget(&self, task_id: &str) {
        let mut inner = self.lock();
        if let Some(gone) = inner.views.remove(task_id) {
            inner.bytes -= gone.json.get().len();
            inner.order.retain(|id| id != task_id);
        }
    }

    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.views.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(version: u64, body: &str) -> View {
        View {
            version,
            extension: serde_json::from_value(serde_json::json!({
                "name": "t", "goal": "g"
            }))
            .expect("extension"),
            json: RawValue::from_string(format!("{{\"x\":\"{body}\"}}")).expect("json"),
        }
    }

    #[test]
    fn a_later_version_replaces_an_earlier_one_and_never_the_reverse() {
        let views = Views::new(1 << 20);
        views.keep("a", view(2, "two"));
        views.keep("a", view(1, "one"));
        assert_eq!(views.get("a").map(|v| v.version), Some(2));
        views.keep("a", view(3, "three"));
        assert_eq!(views.get("a").map(|v| v.version), Some(3));
        assert_eq!(views.kept(), (1, r#"{"x":"three"}"#.len()));
    }

    #[test]
    fn the_oldest_views_go_when_the_budget_is_spent() {
        let one = r#"{"x":"0123456789"}"#.len();
        let views = Views::new(3 * one);
        for id in ["a", "b", "c", "d"] {
            views.keep(id, view(1, "0123456789"));
        }
        assert!(views.get("a").is_none(), "the oldest went");
        assert!(views.get("b").is_some() && views.get("d").is_some());
        assert_eq!(views.kept(), (3, 3 * one));
        views.forget("c");
        assert!(views.get("c").is_none());
        assert_eq!(views.kept(), (2, 2 * one));
    }

    #[test]
    fn a_view_over_the_size_cap_is_not_kept() {
        let views = Views::new(1 << 30);
        views.keep("a", view(1, &"x".repeat(MAX_VIEW_BYTES)));
        assert!(views.get("a").is_none());
    }
}
