//! `th`: the command-line client. Parses the command line, runs one command, and maps its
//! outcome to an exit code (0 ok, 2 usage, 3 not found or refused, 4 server or network).

mod args;
mod client;
mod messages;
mod render;
mod watch;

use a2a::jsonrpc::methods;
use clap::{CommandFactory, Parser};
use serde_json::{Value, json};

use args::{Cli, Command, PushCommand};
use client::{CliError, Client, checked};
use messages::{envelope_part, message, text_part};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    let code = match run(cli).await {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("th: {}", err.message());
            err.exit_code()
        }
    };
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let json_out = cli.global.json;
    let mut client = Client::new(&cli.global)?;
    let me = cli.global.participant.clone();
    let me = me.as_deref();
    match cli.command {
        Command::Card => {
            let card = client.card().await?;
            if json_out {
                render::print_json(&card);
            } else {
                println!("{}", render::card(&card));
            }
        }
        Command::Tasks(a) => {
            let mut params = json!({});
            if let Some(state) = &a.state {
                params["status"] = json!(render::wire_state(state));
            }
            if let Some(size) = a.page_size {
                params["pageSize"] = json!(size);
            }
            if let Some(token) = &a.page_token {
                params["pageToken"] = json!(token);
            }
            let list = client.call(methods::LIST_TASKS, params).await?;
            checked::<a2a::ListTasksResponse>(list.clone(), "task list")?;
            if json_out {
                render::print_json(&list);
            } else {
                for task in list["tasks"].as_array().into_iter().flatten() {
                    println!("{}", render::task_line(task));
                }
                if let Some(next) = list["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
                    eprintln!("next page: --page-token {next}");
                }
            }
        }
        Command::New(a) => {
            let mut envelope = json!({"name": a.name, "goal": a.goal});
            if let Some(d) = &a.description {
                envelope["description"] = json!(d);
            }
            if !a.criteria.is_empty() {
                envelope["acceptance_criteria"] = a
                    .criteria
                    .iter()
                    .map(|c| json!({"text": c, "met": false}))
                    .collect();
            }
            if !a.participants.is_empty() {
                envelope["participants"] = a
                    .participants
                    .iter()
                    .map(|p| messages::participant(p))
                    .collect::<Result<Vec<_>, _>>()?
                    .into();
            }
            let mut parts = Vec::new();
            if let Some(text) = &a.text {
                parts.push(text_part(text));
            }
            parts.push(envelope_part(envelope));
            send(&mut client, json_out, message(None, me, parts)).await?;
        }
        Command::Send(a) => {
            let mut m = message(Some(&a.task), me, vec![text_part(&a.text)]);
            if a.interrupt {
                let meta = m.get("metadata").cloned().unwrap_or_else(|| json!({}));
                m["metadata"] = meta;
                m["metadata"]["interrupt"] = json!(true);
            }
            send(&mut client, json_out, m).await?;
        }
        Command::Answer(a) => {
            send(
                &mut client,
                json_out,
                message(Some(&a.task), me, vec![text_part(&a.text)]),
            )
            .await?;
        }
        Command::Show(a) => {
            let task = client
                .call(methods::GET_TASK, json!({"id": a.task}))
                .await?;
            checked::<a2a::Task>(task.clone(), "task")?;
            if json_out {
                render::print_json(&task);
            } else {
                println!("{}", render::task_details(&task));
            }
        }
        Command::Cancel(a) => {
            let task = client
                .call(methods::CANCEL_TASK, json!({"id": a.task}))
                .await?;
            checked::<a2a::Task>(task.clone(), "task")?;
            print_task_outcome(&task, json_out);
        }
        Command::Model(a) => {
            let command = match &a.id {
                Some(id) => format!("/model {id}"),
                None => "/model".to_owned(),
            };
            let m = message(Some(&a.task), me, vec![text_part(&command)]);
            let answer = send(&mut client, json_out, m).await?;
            if let Some(id) = &a.id {
                applied(&answer, "model", id)?;
            }
        }
        Command::Effort(a) => {
            let command = format!("/effort {}", a.level.as_str());
            let m = message(Some(&a.task), me, vec![text_part(&command)]);
            let answer = send(&mut client, json_out, m).await?;
            applied(&answer, "reasoning_effort", a.level.as_str())?;
        }
        Command::Criteria(a) => {
            let task = client
                .call(methods::GET_TASK, json!({"id": a.task}))
                .await?;
            checked::<a2a::Task>(task.clone(), "task")?;
            let criteria = messages::mark_criteria(
                &render::extension(&task)["acceptance_criteria"],
                &a.met,
                &a.unmet,
            )?;
            let envelope = envelope_part(json!({"acceptance_criteria": criteria}));
            send(
                &mut client,
                json_out,
                message(Some(&a.task), me, vec![envelope]),
            )
            .await?;
        }
        Command::Push(p) => push(&mut client, json_out, p).await?,
        Command::Watch(a) => watch::watch(&mut client, &a.task, json_out).await?,
        Command::Completions(a) => {
            clap_complete::generate(a.shell, &mut Cli::command(), "th", &mut std::io::stdout());
        }
    }
    Ok(())
}

/// A blocking SendMessage; prints the task (or the agent's direct message). A refusal
/// (`message not accepted: ...`) goes to stderr with exit 3.
async fn send(client: &mut Client, json_out: bool, message: Value) -> Result<Value, CliError> {
    let spinner = watch::Spinner::start();
    let answer = client
        .call(methods::SEND_MESSAGE, json!({"message": message}))
        .await;
    spinner.stop();
    let answer = answer?;
    checked::<a2a::SendMessageResponse>(answer.clone(), "answer")?;
    if let Some(task) = answer.get("task") {
        let status = render::message_text(&task["status"]["message"]);
        let refused = status.starts_with("message not accepted");
        if json_out {
            render::print_json(task);
        } else if !refused {
            print_task_outcome(task, false);
        }
        if refused {
            return Err(CliError::Refused(status));
        }
    } else if let Some(reply) = answer.get("message") {
        if json_out {
            render::print_json(reply);
        } else {
            println!("{}", render::message_text(reply));
        }
    } else if json_out {
        render::print_json(&answer);
    }
    Ok(answer)
}

/// A command's answer carries no refusal marker: it was refused (the status text says why)
/// when the task's extension does not hold the new setting.
fn applied(answer: &Value, key: &str, wanted: &str) -> Result<(), CliError> {
    let task = answer.get("task").unwrap_or(answer);
    if render::extension(task)[key] == wanted {
        return Ok(());
    }
    let why = render::message_text(&task["status"]["message"]);
    Err(CliError::Refused(if why.is_empty() {
        format!("the {key} was not changed")
    } else {
        why
    }))
}

/// The id, the state and the status text of a task.
fn print_task_outcome(task: &Value, json_out: bool) {
    if json_out {
        render::print_json(task);
        return;
    }
    println!(
        "{}\t{}",
        task["id"].as_str().unwrap_or("?"),
        render::state_label(task["status"]["state"].as_str().unwrap_or("?"))
    );
    let status = render::message_text(&task["status"]["message"]);
    if !status.is_empty() {
        println!("{status}");
    }
}

async fn push(client: &mut Client, json_out: bool, command: PushCommand) -> Result<(), CliError> {
    match command {
        PushCommand::Add(a) => {
            let mut params = json!({"taskId": a.task, "url": a.webhook});
            if let Some(id) = &a.id {
                params["id"] = json!(id);
            }
            if let Some(token) = &a.push_token {
                params["token"] = json!(token);
            }
            let config = client.call(methods::CREATE_PUSH_CONFIG, params).await?;
            checked::<a2a::TaskPushNotificationConfig>(config.clone(), "push config")?;
            if json_out {
                render::print_json(&config);
            } else {
                println!("{}", push_line(&config));
            }
        }
        PushCommand::Ls(a) => {
            let list = client
                .call(methods::LIST_PUSH_CONFIGS, json!({"taskId": a.task}))
                .await?;
            checked::<a2a::ListTaskPushNotificationConfigsResponse>(list.clone(), "config list")?;
            if json_out {
                render::print_json(&list);
            } else {
                let configs = list
                    .get("configs")
                    .and_then(Value::as_array)
                    .or_else(|| list.as_array());
                for config in configs.into_iter().flatten() {
                    println!("{}", push_line(config));
                }
            }
        }
        PushCommand::Rm(a) => {
            let done = client
                .call(
                    methods::DELETE_PUSH_CONFIG,
                    json!({"taskId": a.task, "id": a.id}),
                )
                .await?;
            if json_out {
                render::print_json(&done);
            }
        }
    }
    Ok(())
}

fn push_line(config: &Value) -> String {
    format!(
        "{}\t{}",
        config["id"].as_str().unwrap_or("?"),
        config["url"].as_str().unwrap_or("?")
    )
}
