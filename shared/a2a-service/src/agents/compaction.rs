//! Context compaction: which of the oldest turns a call sees are summarized when the next
//! call would pass three quarters of the model's context window, and the call that
//! summarizes them (the task's model, no tools).

use models::{ModelRequest, Turn};

use super::transcript::{Seen, estimate, estimate_turn};

/// The newest turns are never summarized: the model keeps the thread of what it is doing.
pub(super) const KEEP_TURNS: usize = 6;

/// A result or a message longer than this is cut in what the summarizer reads.
const MAX_RENDERED_TURN: usize = 8_000;

const INSTRUCTIONS: &str = "You keep the memory of an agent that works on a task with \
participants. The conversation below is too long to keep whole: summarize it for the agent. \
Keep what the agent needs to go on: what the participants asked and decided, facts and \
numbers, what the agent did (tools it called and what they returned that matters), promises \
made, open questions, and what remains to do. Keep names and ids exactly. If a summary of \
earlier turns is given, fold it into yours. Answer with the summary only, in plain text, \
without preamble.";

/// The share of the window a call may fill before the conversation is compacted.
pub(super) fn threshold(window: u64) -> u64 {
    window / 4 * 3
}

/// Where to cut: the first `turns` seen turns are summarized, and later calls see the stored
/// entries from `covers` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    pub turns: usize,
    pub covers: usize,
}

/// The longest prefix of `seen` that may be summarized within `limit` tokens: stored turns
/// only, never the last [`KEEP_TURNS`], never between an assistant turn and its results.
/// At least one turn when any may go (a single huge one is cut when rendered).
pub(super) fn cut(seen: &[Seen], limit: u64) -> Option<Cut> {
    let last = seen.len().checked_sub(KEEP_TURNS)?;
    let mut best = None;
    let mut tokens = 0;
    for k in 1..=last {
        tokens += estimate_turn(&seen[k - 1].turn);
        let next = &seen[k];
        let boundary = !matches!(next.turn, Turn::ToolResults { .. });
        let Some(covers) = next.at else { break };
        if boundary && (tokens <= limit || best.is_none()) {
            best = Some(Cut { turns: k, covers });
        }
        if tokens > limit && best.is_some() {
            break;
        }
    }
    best
}

/// The call that summarizes `turns` (with the summary of earlier ones, if any), on the
/// model and effort of `base`.
pub(super) fn request(base: &ModelRequest, previous: Option<&str>, turns: &[Seen]) -> ModelRequest {
    let mut text = String::new();
    if let Some(previous) = previous {
        text.push_str("[Summary of earlier turns]\n");
        text.push_str(previous);
        text.push_str("\n\n");
    }
    text.push_str("[Conversation to summarize, oldest first]\n");
    for seen in turns {
        render(&mut text, &seen.turn);
    }
    ModelRequest {
        task_name: base.task_name.clone(),
        model: base.model.clone(),
        effort: base.effort,
        system: INSTRUCTIONS.to_owned(),
        turns: vec![Turn::User { text }],
        tools: Vec::new().into(),
    }
}

/// What a compaction call costs before its answer (to keep it within the window).
pub(super) fn overhead(previous: Option<&str>) -> u64 {
    estimate(INSTRUCTIONS) + previous.map_or(0, estimate) + 64
}

fn render(out: &mut String, turn: &Turn) {
    match turn {
        Turn::User { text } => line(out, "user", text),
        Turn::Assistant { text, tool_calls } => {
            if let Some(text) = text {
                line(out, "assistant", text);
            }
            for call in tool_calls {
                line(
                    out,
                    "assistant called",
                    &format!("{}({})", call.name, call.arguments),
                );
            }
        }
        Turn::ToolResults { results } => {
            for result in results {
                let label = if result.is_error {
                    format!("{} failed", result.name)
                } else {
                    format!("{} returned", result.name)
                };
                line(out, &label, &result.content);
            }
        }
    }
}

fn line(out: &mut String, label: &str, text: &str) {
    out.push_str(&format!("[{label}] "));
    if text.len() > MAX_RENDERED_TURN {
        let mut end = MAX_RENDERED_TURN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&text[..end]);
        out.push_str(" …[cut]");
    } else {
        out.push_str(text);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::{ToolCall, ToolResult};
    use serde_json::json;

    fn user(at: usize, text: &str) -> Seen {
        Seen {
            at: Some(at),
            turn: Turn::User { text: text.into() },
        }
    }

    fn call(at: usize) -> Seen {
        Seen {
            at: Some(at),
            turn: Turn::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "list_skills".into(),
                    arguments: json!({}),
                }],
            },
        }
    }

    fn results(at: usize) -> Seen {
        Seen {
            at: Some(at),
            turn: Turn::ToolResults {
                results: vec![ToolResult {
                    call_id: "c".into(),
                    name: "list_skills".into(),
                    content: "none".into(),
                    is_error: false,
                }],
            },
        }
    }

    #[test]
    fn the_last_turns_are_kept() {
        let seen: Vec<Seen> = (0..KEEP_TURNS).map(|i| user(i, "hi")).collect();
        assert_eq!(cut(&seen, 1_000), None);
        let seen: Vec<Seen> = (0..KEEP_TURNS + 2).map(|i| user(i, "hi")).collect();
        assert_eq!(
            cut(&seen, 1_000),
            Some(Cut {
                turns: 2,
                covers: 2
            })
        );
    }

    #[test]
    fn a_call_and_its_results_stay_together() {
        // user, call, results, then the kept turns: cutting after the call would split it.
        let mut seen = vec![user(0, "go"), call(1), results(2)];
        seen.extend((3..3 + KEEP_TURNS).map(|i| user(i, "hi")));
        let c = cut(&seen, 1_000).unwrap();
        assert_eq!(
            c,
            Cut {
                turns: 3,
                covers: 3
            }
        );
        let c = cut(&seen[..KEEP_TURNS + 2], 1_000).unwrap();
        assert_ne!(c.turns, 2, "never between a call and its results");
    }

    #[test]
    fn the_head_stays_within_the_limit_but_takes_at_least_one_turn() {
        let long = "x".repeat(4_000); // about 1,000 tokens
        let seen: Vec<Seen> = (0..KEEP_TURNS + 3).map(|i| user(i, &long)).collect();
        assert_eq!(cut(&seen, 2_100).unwrap().turns, 2);
        assert_eq!(cut(&seen, 10).unwrap().turns, 1);
    }

    #[test]
    fn pending_turns_are_never_summarized() {
        let pending = || Seen {
            at: None,
            turn: Turn::User { text: "new".into() },
        };
        let mut seen: Vec<Seen> = (0..2).map(|i| user(i, "hi")).collect();
        seen.extend((0..KEEP_TURNS + 3).map(|_| pending()));
        // The head ends where the stored turns end, however many turns could go.
        assert_eq!(
            cut(&seen, 1_000),
            Some(Cut {
                turns: 1,
                covers: 1
            })
        );
        let mut seen = vec![user(0, "hi")];
        seen.extend((0..KEEP_TURNS + 3).map(|_| pending()));
        assert_eq!(cut(&seen, 1_000), None);
    }

    #[test]
    fn the_summarizer_reads_every_turn_and_the_earlier_summary() {
        let base = models::ModelRequest {
            task_name: "t".into(),
            model: task_core::commands::ModelCatalog::echo_only()
                .default_model()
                .clone(),
            effort: None,
            system: "sys".into(),
            turns: vec![],
            tools: Vec::new().into(),
        };
        let r = request(
            &base,
            Some("before"),
            &[user(0, "hello"), call(1), results(2)],
        );
        let Turn::User { text } = &r.turns[0] else {
            panic!("one user turn")
        };
        for part in [
            "before",
            "[user] hello",
            "list_skills({})",
            "list_skills returned",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        assert!(r.tools.is_empty());
    }
}
