//! The model agent's transcript: the entries it stores (model turns, compactions), and what a
//! model call sees of them (the turns after the last compaction, whose summary joins the
//! system prompt), with the token estimates compaction is decided on.

use models::{Turn, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One stored transcript entry: a model turn or a compaction, and the message whose run
/// wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Entry {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Turn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// On an assistant turn: the model that answered and what the call cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The oldest turns summarized: later calls see the summary instead of the entries before
/// `covers` (an index in the stored transcript).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Compaction {
    pub summary: String,
    pub covers: usize,
}

impl Entry {
    pub fn turn(message_id: &str, turn: Turn) -> Self {
        Self {
            message_id: message_id.to_owned(),
            turn: Some(turn),
            compaction: None,
            model: None,
            usage: None,
        }
    }

    pub fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn is_user(&self) -> bool {
        matches!(self.turn, Some(Turn::User { .. }))
    }
}

/// The transcript as a run knows it: the stored entries, and those of this run not yet
/// committed.
#[derive(Debug, Default)]
pub(super) struct Transcript {
    stored: Vec<Entry>,
    pending: Vec<Entry>,
}

/// A turn a call sees, and where it is stored (`None`: not committed yet).
pub(super) struct Seen {
    pub at: Option<usize>,
    pub turn: Turn,
}

impl Transcript {
    pub fn new(stored: Vec<Value>) -> Self {
        Self {
            stored: stored
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
            pending: Vec::new(),
        }
    }

    /// Whether the run on `message_id` was under way before (a runner died mid-run): its
    /// user turn is the last one stored.
    pub fn resumes(&self, message_id: &str) -> bool {
        self.stored
            .iter()
            .rev()
            .find(|e| e.is_user())
            .is_some_and(|e| e.message_id == message_id)
    }

    /// Model calls the resumed run already made (assistant turns after its user turn).
    pub fn calls_made(&self) -> usize {
        self.stored
            .iter()
            .rev()
            .take_while(|e| !e.is_user())
            .filter(|e| matches!(e.turn, Some(Turn::Assistant { .. })))
            .count()
    }

    pub fn push(&mut self, entry: Entry) {
        self.pending.push(entry);
    }

    /// The entries not committed yet, with `more` after them: what a commit writes.
    pub fn to_write(&self, more: &[Entry]) -> Vec<Entry> {
        self.pending.iter().chain(more).cloned().collect()
    }

    /// `written` (the pending entries and more) is committed.
    pub fn committed(&mut self, written: Vec<Entry>) {
        self.pending.clear();
        self.stored.extend(written);
    }

    /// The pending entries as values, for the run's outcome.
    pub fn pending_values(&self) -> Vec<Value> {
        self.pending.iter().map(Entry::value).collect()
    }

    /// The summary of the turns compacted so far, and the first stored entry after them.
    pub fn summary(&self) -> (Option<&str>, usize) {
        self.stored
            .iter()
            .rev()
            .find_map(|e| e.compaction.as_ref())
            .map_or((None, 0), |c| (Some(c.summary.as_str()), c.covers))
    }

    /// What a call sees: the turns after the last compaction, then the pending ones. A
    /// message's user turn written twice (by an interrupted run, then by the run it had
    /// begun) is seen once.
    pub fn seen(&self) -> Vec<Seen> {
        let (_, covers) = self.summary();
        let mut users = std::collections::HashSet::new();
        let stored = self.stored.iter().enumerate().skip(covers);
        let pending = self.pending.iter().map(|e| (None, e));
        stored
            .map(|(i, e)| (Some(i), e))
            .chain(pending)
            .filter_map(|(at, e)| {
                let turn = e.turn.clone()?;
                if matches!(turn, Turn::User { .. }) && !users.insert(e.message_id.as_str()) {
                    return None;
                }
                Some(Seen { at, turn })
            })
            .collect()
    }
}

/// A rough token count of `text`: about four characters a token, as for English text on the
/// common tokenizers (compaction starts well before the window, so rough is enough).
pub(super) fn estimate(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// The estimate of one turn as a call sends it.
pub(super) fn estimate_turn(turn: &Turn) -> u64 {
    // Each message costs a few tokens of framing besides its content.
    const FRAMING: u64 = 4;
    FRAMING
        + match turn {
            Turn::User { text } => estimate(text),
            Turn::Assistant { text, tool_calls } => {
                text.as_deref().map_or(0, estimate)
                    + tool_calls
                        .iter()
                        .map(|c| estimate(&c.name) + estimate(&c.arguments.to_string()))
                        .sum::<u64>()
            }
            Turn::ToolResults { results } => results.iter().map(|r| estimate(&r.content)).sum(),
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::ToolCall;
    use serde_json::json;

    fn user(mid: &str, text: &str) -> Entry {
        Entry::turn(mid, Turn::User { text: text.into() })
    }

    fn assistant(mid: &str, text: &str) -> Entry {
        Entry::turn(
            mid,
            Turn::Assistant {
                text: Some(text.into()),
                tool_calls: vec![],
            },
        )
    }

    fn texts(t: &Transcript) -> Vec<String> {
        t.seen()
            .into_iter()
            .map(|s| match s.turn {
                Turn::User { text } => format!("u:{text}"),
                Turn::Assistant { text, .. } => format!("a:{}", text.unwrap_or_default()),
                Turn::ToolResults { .. } => "r".into(),
            })
            .collect()
    }

    #[test]
    fn entries_stored_before_usage_and_compaction_still_read() {
        let old = json!({"message_id": "m1", "turn": {"role": "user", "text": "hi"}});
        let t = Transcript::new(vec![old]);
        assert_eq!(texts(&t), ["u:hi"]);
        assert!(t.resumes("m1"));
    }

    #[test]
    fn a_compaction_hides_what_it_covers_and_gives_its_summary() {
        let mut stored: Vec<Value> = [
            user("m1", "one"),
            assistant("m1", "1"),
            user("m2", "two"),
            assistant("m2", "2"),
        ]
        .iter()
        .map(Entry::value)
        .collect();
        let compaction = Entry {
            compaction: Some(Compaction {
                summary: "they said one".into(),
                covers: 2,
            }),
            turn: None,
            ..user("m2", "")
        };
        stored.push(compaction.value());
        let mut t = Transcript::new(stored);
        t.push(user("m3", "three"));
        assert_eq!(t.summary(), (Some("they said one"), 2));
        assert_eq!(texts(&t), ["u:two", "a:2", "u:three"]);
        let at: Vec<_> = t.seen().iter().map(|s| s.at).collect();
        assert_eq!(at, [Some(2), Some(3), None]);
        assert!(!t.resumes("m3"), "the pending turn is not stored");
    }

    #[test]
    fn a_user_turn_written_twice_is_seen_once() {
        let stored = [user("m1", "one"), user("m1", "one"), assistant("m1", "1")]
            .iter()
            .map(Entry::value)
            .collect();
        assert_eq!(texts(&Transcript::new(stored)), ["u:one", "a:1"]);
    }

    #[test]
    fn a_resumed_run_counts_its_calls() {
        let call = Entry::turn(
            "m1",
            Turn::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "list_skills".into(),
                    arguments: json!({}),
                }],
            },
        );
        let stored = [user("m1", "go"), call.clone(), call]
            .iter()
            .map(Entry::value)
            .collect();
        let t = Transcript::new(stored);
        assert!(t.resumes("m1"));
        assert_eq!(t.calls_made(), 2);
    }

    #[test]
    fn estimates_grow_with_the_text() {
        assert_eq!(estimate(""), 0);
        assert_eq!(estimate("abcd"), 1);
        assert_eq!(estimate("abcde"), 2);
        assert!(
            estimate_turn(&Turn::User {
                text: "x".repeat(400)
            }) >= 100
        );
    }
}
