//! How tasks, lists and cards are printed for people (plain text; colour only on a terminal
//! and never with `NO_COLOR`).

use std::io::IsTerminal;

use serde_json::Value;

pub const TASK_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/task";

/// Whether stdout gets ANSI colours.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `TASK_STATE_INPUT_REQUIRED` as `input-required`.
pub fn short_state(state: &str) -> String {
    state
        .strip_prefix("TASK_STATE_")
        .unwrap_or(state)
        .to_lowercase()
        .replace('_', "-")
}

/// `working`, `input-required` or `TASK_STATE_WORKING` as the wire name.
pub fn wire_state(state: &str) -> String {
    let upper = state.to_uppercase().replace('-', "_");
    if upper.starts_with("TASK_STATE_") {
        upper
    } else {
        format!("TASK_STATE_{upper}")
    }
}

pub fn state_label(state: &str) -> String {
    let short = short_state(state);
    if !colour() {
        return short;
    }
    let code = match short.as_str() {
        "completed" => "32",
        "failed" | "rejected" | "canceled" => "31",
        "input-required" | "auth-required" => "33",
        _ => "36",
    };
    format!("\x1b[{code}m{short}\x1b[0m")
}

pub fn extension(task: &Value) -> &Value {
    &task["metadata"][TASK_METADATA_KEY]
}

/// The text parts of a message, joined by new lines.
pub fn message_text(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn print_json(value: &Value) {
    println!("{value}");
}

/// One line of `th tasks`.
pub fn task_line(task: &Value) -> String {
    let name = extension(task)["name"].as_str().unwrap_or("");
    format!(
        "{}\t{}\t{}",
        task["id"].as_str().unwrap_or("?"),
        state_label(task["status"]["state"].as_str().unwrap_or("?")),
        name
    )
}

/// The plan's steps, one line each: state, name, and output when there is one.
pub fn plan_lines(ext: &Value) -> Vec<String> {
    ext["plan"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|step| {
            let mut line = format!(
                "  [{}] {}",
                step["state"].as_str().unwrap_or("pending"),
                step["name"].as_str().unwrap_or("?")
            );
            if let Some(output) = step["output"].as_str().filter(|o| !o.is_empty()) {
                line.push_str(&format!(" -> {output}"));
            }
            line
        })
        .collect()
}

/// The sub-tasks with their mirrored state, one line each.
pub fn sub_task_lines(ext: &Value) -> Vec<String> {
    ext["sub_tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|sub| {
            let mut line = format!(
                "  {} {}",
                sub["task_id"].as_str().unwrap_or("?"),
                sub["state"].as_str().map(short_state).unwrap_or_default()
            );
            if let Some(why) = sub["sub_state"].as_str() {
                line.push_str(&format!(" ({why})"));
            }
            if let Some(agent) = sub["agent"]["id"].as_str() {
                line.push_str(&format!(" on {agent}"));
            }
            line
        })
        .collect()
}

/// `th show`: the task in full.
pub fn task_details(task: &Value) -> String {
    let ext = extension(task);
    let mut out = Vec::new();
    out.push(format!("task:   {}", task["id"].as_str().unwrap_or("?")));
    if let Some(name) = ext["name"].as_str() {
        out.push(format!("name:   {name}"));
    }
    out.push(format!(
        "state:  {}",
        state_label(task["status"]["state"].as_str().unwrap_or("?"))
    ));
    let status = message_text(&task["status"]["message"]);
    if !status.is_empty() {
        out.push(format!("status: {status}"));
    }
    if let Some(goal) = ext["goal"].as_str() {
        out.push(format!("goal:   {goal}"));
    }
    if let Some(description) = ext["description"].as_str().filter(|d| !d.is_empty()) {
        out.push(format!("description: {description}"));
    }
    for (key, label) in [("model", "model"), ("reasoning_effort", "effort")] {
        if let Some(v) = ext[key].as_str() {
            out.push(format!("{label}:  {v}"));
        }
    }
    if let Some(criteria) = ext["acceptance_criteria"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        out.push("criteria:".to_owned());
        for (i, c) in criteria.iter().enumerate() {
            let mark = if c["met"].as_bool().unwrap_or(false) {
                "x"
            } else {
                " "
            };
            out.push(format!(
                "  {}. [{mark}] {}",
                i + 1,
                c["text"].as_str().unwrap_or("")
            ));
        }
    }
    if let Some(people) = ext["participants"].as_array().filter(|p| !p.is_empty()) {
        out.push("participants:".to_owned());
        for p in people {
            out.push(format!(
                "  {} ({}, {})",
                p["id"].as_str().unwrap_or("?"),
                p["role"].as_str().unwrap_or("?"),
                p["kind"].as_str().unwrap_or("?")
            ));
        }
    }
    let plan = plan_lines(ext);
    if !plan.is_empty() {
        out.push("plan:".to_owned());
        out.extend(plan);
    }
    let subs = sub_task_lines(ext);
    if !subs.is_empty() {
        out.push("sub-tasks:".to_owned());
        out.extend(subs);
    }
    out.join("\n")
}

/// `th card`.
pub fn card(card: &Value) -> String {
    let mut out = vec![format!(
        "{} {}",
        card["name"].as_str().unwrap_or("?"),
        card["version"].as_str().unwrap_or("")
    )];
    if let Some(d) = card["description"].as_str() {
        out.push(d.to_owned());
    }
    for i in card["supportedInterfaces"].as_array().into_iter().flatten() {
        out.push(format!(
            "binding: {} {}",
            i["protocolBinding"].as_str().unwrap_or("?"),
            i["url"].as_str().unwrap_or("?")
        ));
    }
    let caps = &card["capabilities"];
    out.push(format!(
        "streaming: {}, push notifications: {}",
        caps["streaming"].as_bool().unwrap_or(false),
        caps["pushNotifications"].as_bool().unwrap_or(false)
    ));
    for e in caps["extensions"].as_array().into_iter().flatten() {
        out.push(format!("extension: {}", e["uri"].as_str().unwrap_or("?")));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_both_ways() {
        assert_eq!(short_state("TASK_STATE_INPUT_REQUIRED"), "input-required");
        assert_eq!(wire_state("input-required"), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(wire_state("TASK_STATE_WORKING"), "TASK_STATE_WORKING");
    }
}
