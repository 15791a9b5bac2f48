//! The command line: global options, commands and their help.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// th: a command-line client of the tiny-harness A2A service, for people and scripts.
///
/// It reads the agent card at URL/.well-known/agent-card.json to find the JSON-RPC endpoint and
/// speaks A2A 1.0 with the tiny-harness task extension. Exit codes: 0 ok, 2 usage error, 3 not
/// found or refused, 4 server or network failure.
#[derive(Debug, Parser)]
#[command(name = "th", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Base URL of the service (its agent card is read there).
    #[arg(
        long,
        env = "TH_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Who you are: sent as `X-Participant-Id` and as the messages' `metadata.participant_id`.
    #[arg(long = "as", env = "TH_PARTICIPANT", value_name = "ID", global = true)]
    pub participant: Option<String>,
    /// Bearer token sent as `Authorization: Bearer TOKEN` (deployments behind an authorizer).
    #[arg(long, env = "TH_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the A2A objects the server answered as JSON (one document per line for `watch`).
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the agent card: name, bindings, capabilities and extensions.
    Card,
    /// List your tasks (ListTasks): id, state and name, one per line.
    Tasks(TasksArgs),
    /// Create a task from a task envelope (name, goal, criteria, participants) and a first text.
    New(NewArgs),
    /// Send a text message to a task.
    Send(SendArgs),
    /// Show a task: state, status text, goal, criteria, participants, plan and sub-tasks.
    Show(TaskArg),
    /// Follow a task live until it ends; answer a help request addressed to you when asked.
    ///
    /// Prints state changes, the plan with its step states, sub-task states and the agent's
    /// text. When the task waits on a help request and `--as` is one of its participants: on
    /// a terminal, th prompts for the answer and sends it as `--as`; otherwise it prints the
    /// question and exits with 0 (answer with `th answer`). The request's message does not
    /// name whom it asks; the server records an answer from anyone else as a comment.
    Watch(TaskArg),
    /// Answer a help request: send TEXT to a task waiting on you.
    Answer(AnswerArgs),
    /// Cancel a task (reporters and admins).
    Cancel(TaskArg),
    /// Set the task's model (`/model ID`), or show the current one and the catalog.
    Model(ModelArgs),
    /// Set the task's reasoning effort (`/effort LEVEL`).
    Effort(EffortArgs),
    /// Mark acceptance criteria as met (or not met) with a task envelope.
    Criteria(CriteriaArgs),
    /// Manage a task's push notification configs.
    #[command(subcommand)]
    Push(PushCommand),
    /// Print a shell completion script (e.g. `th completions bash > ~/.local/share/bash-completion/completions/th`).
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct TaskArg {
    /// The task id.
    pub task: String,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Only tasks in this state (e.g. working, input-required, completed, or TASK_STATE_WORKING).
    #[arg(long)]
    pub state: Option<String>,
    /// How many tasks per page (1 to 100).
    #[arg(long)]
    pub page_size: Option<u32>,
    /// Where the page starts: the `next page:` token a previous page printed.
    #[arg(long)]
    pub page_token: Option<String>,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The task's name.
    #[arg(long)]
    pub name: String,
    /// What the task is to achieve.
    #[arg(long)]
    pub goal: String,
    /// A longer description.
    #[arg(long)]
    pub description: Option<String>,
    /// An acceptance criterion (repeat for several).
    #[arg(long = "criterion", value_name = "TEXT")]
    pub criteria: Vec<String>,
    /// A participant as `id:role` (a human) or `id:role:agent`; role is assignee, reporter,
    /// watcher or admin (repeat for several). The agent is added as assignee when none is.
    #[arg(long = "participant", value_name = "ID:ROLE[:KIND]")]
    pub participants: Vec<String>,
    /// The first message of the task.
    pub text: Option<String>,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The task id.
    pub task: String,
    /// The message.
    pub text: String,
    /// Mark the message as an interrupt (`metadata.interrupt: true`): it stops the agent's
    /// run in progress on the task, which goes on with this message.
    #[arg(long)]
    pub interrupt: bool,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The task id.
    pub task: String,
    /// The answer.
    pub text: String,
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// The task id.
    pub task: String,
    /// A model id of the service's catalog; without it, the current model and the catalog.
    pub id: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

#[derive(Debug, Args)]
pub struct EffortArgs {
    /// The task id.
    pub task: String,
    /// The reasoning effort.
    pub level: Effort,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("change").required(true).multiple(true))]
pub struct CriteriaArgs {
    /// The task id.
    pub task: String,
    /// Mark criterion N as met (numbered from 1, as `th show` prints them; repeatable).
    #[arg(long, value_name = "N", group = "change")]
    pub met: Vec<usize>,
    /// Mark criterion N as not met (repeatable).
    #[arg(long, value_name = "N", group = "change")]
    pub unmet: Vec<usize>,
}

#[derive(Debug, Subcommand)]
pub enum PushCommand {
    /// Register a webhook for a task's updates.
    Add(PushAddArgs),
    /// List a task's push notification configs.
    Ls(TaskArg),
    /// Delete a push notification config.
    Rm(PushRmArgs),
}

#[derive(Debug, Args)]
pub struct PushAddArgs {
    /// The task id.
    pub task: String,
    /// The webhook URL (HTTPS; private addresses only when the server allows them).
    pub webhook: String,
    /// The config id (the server picks one when absent).
    #[arg(long)]
    pub id: Option<String>,
    /// A token the webhook receives back with each notification.
    #[arg(long = "push-token", value_name = "TOKEN")]
    pub push_token: Option<String>,
}

#[derive(Debug, Args)]
pub struct PushRmArgs {
    /// The task id.
    pub task: String,
    /// The config id.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}
