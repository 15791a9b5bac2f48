//! `th watch`: a task followed live over SubscribeToTask (state, plan, sub-tasks, the agent's
//! text), help requests answered from the terminal; and the spinner of blocking sends.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};

use a2a::jsonrpc::methods;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::client::{CliError, Client};
use crate::messages::{self, message, text_part};
use crate::render::{self, TASK_METADATA_KEY};

const TERMINAL: [&str; 4] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
];

/// What has been printed, so that only changes are printed again.
#[derive(Default)]
struct Seen {
    state: Option<String>,
    status_id: Option<String>,
    plan: Vec<String>,
    sub_tasks: Vec<String>,
    answered: HashSet<String>,
}

/// What one event asks of the watcher.
enum Next {
    Continue,
    Done,
    /// A help request (its status message id and question) is open.
    Help(String, String),
}

pub async fn watch(client: &mut Client, task: &str, json_out: bool) -> Result<(), CliError> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut seen = Seen::default();
    loop {
        let events = match client.subscribe(task).await {
            Ok(events) => events,
            // A finished task cannot be subscribed to: show how it ended.
            Err(err) => return finished(client, task, err, &mut seen, json_out).await,
        };
        let mut events = Box::pin(events);
        let mut help = None;
        while let Some(event) = events.next().await {
            let event = event?;
            if json_out {
                render::print_json(&event);
            }
            match observe(&event, &mut seen, client.participant.as_deref(), json_out) {
                Next::Continue => {}
                Next::Done => return Ok(()),
                Next::Help(id, question) => {
                    help = Some((id, question));
                    break;
                }
            }
        }
        drop(events);
        if let Some((id, _question)) = help {
            if !interactive {
                // A script answers with `th answer`.
                return Ok(());
            }
            seen.answered.insert(id);
            let answer = prompt().await?;
            let m = message(
                Some(task),
                client.participant.as_deref(),
                vec![text_part(&answer)],
            );
            let params = json!({"message": m, "configuration": {"returnImmediately": true}});
            let sent = client
                .call(a2a::jsonrpc::methods::SEND_MESSAGE, params)
                .await?;
            let status = render::message_text(&sent["task"]["status"]["message"]);
            if status.starts_with("message not accepted") {
                return Err(CliError::Refused(status));
            }
        }
        // The stream ended at an interrupted state (or an answer was sent): follow on.
    }
}

/// The task, read when SubscribeToTask refused with `err`: printed if it is over, else `err`.
async fn finished(
    client: &mut Client,
    task: &str,
    err: CliError,
    seen: &mut Seen,
    json_out: bool,
) -> Result<(), CliError> {
    let Ok(current) = client.call(methods::GET_TASK, json!({"id": task})).await else {
        return Err(err);
    };
    let state = current["status"]["state"].as_str().unwrap_or("");
    if !TERMINAL.contains(&state) {
        return Err(err);
    }
    let event = json!({"task": current});
    if json_out {
        render::print_json(&event);
    }
    observe(&event, seen, None, json_out);
    Ok(())
}

/// Prints what changed with this event; says whether to stop or answer.
fn observe(event: &Value, seen: &mut Seen, me: Option<&str>, json_out: bool) -> Next {
    let (status, extension, task) = if let Some(task) = event.get("task") {
        (&task["status"], render::extension(task).clone(), Some(task))
    } else if let Some(update) = event.get("statusUpdate") {
        (
            &update["status"],
            update["metadata"][TASK_METADATA_KEY].clone(),
            None,
        )
    } else {
        if !json_out {
            if let Some(update) = event.get("artifactUpdate") {
                let artifact = &update["artifact"];
                // A chunk appended to an artifact goes on under its first chunk's heading.
                if update["append"] != true {
                    let name = artifact["name"]
                        .as_str()
                        .or(artifact["artifactId"].as_str());
                    println!("artifact {}:", name.unwrap_or("?"));
                }
                let text = render::message_text(artifact);
                if !text.is_empty() {
                    println!("{text}");
                }
            } else if let Some(message) = event.get("message") {
                println!("{}", render::message_text(message));
            }
        }
        return Next::Continue;
    };
    let state = status["state"].as_str().unwrap_or("").to_owned();
    if !json_out {
        if !state.is_empty() && seen.state.as_deref() != Some(state.as_str()) {
            println!("state: {}", render::state_label(&state));
        }
        let status_id = status["message"]["messageId"].as_str().map(str::to_owned);
        if status_id.is_some() && status_id != seen.status_id {
            if let Some(question) = messages::help_request(status) {
                println!("help request: {question}");
            } else {
                let text = render::message_text(&status["message"]);
                if !text.is_empty() {
                    println!("{text}");
                }
            }
        }
        if !extension.is_null() {
            let plan = render::plan_lines(&extension);
            if !plan.is_empty() && plan != seen.plan {
                println!("plan:\n{}", plan.join("\n"));
            }
            seen.plan = plan;
            let subs = render::sub_task_lines(&extension);
            if !subs.is_empty() && subs != seen.sub_tasks {
                println!("sub-tasks:\n{}", subs.join("\n"));
            }
            seen.sub_tasks = subs;
        }
    }
    if !state.is_empty() {
        seen.state = Some(state.clone());
    }
    let status_id = status["message"]["messageId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    seen.status_id = Some(status_id.clone());
    if TERMINAL.contains(&state.as_str()) {
        return Next::Done;
    }
    if state == "TASK_STATE_INPUT_REQUIRED"
        && let Some(question) = messages::help_request(status)
        && !seen.answered.contains(&status_id)
        && is_participant(task, me)
    {
        return Next::Help(status_id, question);
    }
    Next::Continue
}

/// Whether `me` may answer: a participant of the task (when the event shows them).
fn is_participant(task: Option<&Value>, me: Option<&str>) -> bool {
    let Some(me) = me else { return false };
    let people = task.and_then(|t| render::extension(t)["participants"].as_array());
    people.is_none_or(|people| people.iter().any(|p| p["id"] == me))
}

/// Reads the answer (one line) on the terminal, the question being printed above.
async fn prompt() -> Result<String, CliError> {
    eprint!("answer> ");
    let _ = std::io::stderr().flush();
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|_| CliError::Failure("cannot read the answer".to_owned()))?
    .map_err(|_| CliError::Failure("cannot read the answer".to_owned()))?;
    let answer = line.trim().to_owned();
    if answer.is_empty() {
        return Err(CliError::Usage("no answer given".to_owned()));
    }
    Ok(answer)
}

/// A spinner on stderr while a blocking send waits (only on a terminal).
pub struct Spinner(Option<tokio::task::JoinHandle<()>>);

impl Spinner {
    pub fn start() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        Self(Some(tokio::spawn(async {
            let frames = ['|', '/', '-', '\\'];
            for frame in frames.iter().cycle() {
                eprint!("\r{frame} waiting for the agent");
                tokio::time::sleep(std::time::Duration::from_millis(120)).await;
            }
        })))
    }

    pub fn stop(self) {
        if let Some(handle) = self.0 {
            handle.abort();
            eprint!("\r\x1b[2K");
        }
    }
}
