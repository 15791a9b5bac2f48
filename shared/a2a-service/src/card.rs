//! The agent card: both interfaces, streaming and push, the task extension with the channel
//! and A2UI extensions, and honest input/output modes.

use std::collections::HashMap;

use a2a::{AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill};
use serde_json::json;
use task_core::{
    A2UI_BASIC_CATALOG_ID, A2UI_EXTENSION_URI, A2UI_MEDIA_TYPE, CHANNEL_EXTENSION_URI,
    CHANNEL_MEDIA_TYPE, EVENT_MEDIA_TYPE, TASK_EXTENSION_URI, TASK_MEDIA_TYPE,
};

use crate::api::{GET_TASK_AUDIT_LOG, GET_TASK_TRANSCRIPT};
use crate::config::ServiceConfig;

/// Media types a message part may have. Data parts without a media type count as
/// `application/json`; they enter the history as JSON text.
pub fn input_modes() -> Vec<String> {
    [
        "text/plain",
        "application/json",
        TASK_MEDIA_TYPE,
        CHANNEL_MEDIA_TYPE,
        EVENT_MEDIA_TYPE,
        A2UI_MEDIA_TYPE,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Media types the agent's messages and artifacts carry.
pub fn output_modes() -> Vec<String> {
    [
        "text/plain",
        TASK_MEDIA_TYPE,
        CHANNEL_MEDIA_TYPE,
        A2UI_MEDIA_TYPE,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn extension(uri: &str, description: &str) -> AgentExtension {
    AgentExtension {
        uri: uri.to_owned(),
        description: Some(description.to_owned()),
        required: None,
        params: None,
    }
}

/// The methods the task extension adds, by JSON-RPC name, with their REST route and who may
/// call them (docs/api.md).
fn task_methods() -> serde_json::Value {
    json!({
        GET_TASK_TRANSCRIPT: {
            "rest": "GET /tasks/{id}/transcript",
            "description": "the agent's transcript of a task (model turns, tool calls with arguments and results), paged; for the task's participants",
        },
        GET_TASK_AUDIT_LOG: {
            "rest": "GET /tasks/{id}/auditLog",
            "description": "the task's audit log (messages accepted and refused), paged; for the task's admins",
        },
    })
}

pub fn agent_card(config: &ServiceConfig) -> AgentCard {
    // A2A's example interfaces end without a slash: clients append `/message:send` (HTTP+JSON)
    // or post to the URL itself (JSON-RPC), and a router that maps paths literally (API
    // Gateway's, `cargo lambda watch`'s) has no route for `//message:send`.
    let url = config.base_url.trim_end_matches('/').to_owned();
    let interface = |binding: &str| AgentInterface {
        url: url.clone(),
        protocol_binding: binding.to_owned(),
        tenant: None,
        protocol_version: "1.0".to_owned(),
    };
    let mut a2ui = extension(
        A2UI_EXTENSION_URI,
        "A2UI 0.9.1 surfaces and actions as application/a2ui+json parts",
    );
    a2ui.params = Some(HashMap::from([
        ("acceptsInlineCatalogs".to_owned(), json!(false)),
        (
            "supportedCatalogIds".to_owned(),
            json!([A2UI_BASIC_CATALOG_ID]),
        ),
    ]));
    let mut task = extension(
        TASK_EXTENSION_URI,
        "tiny-harness task extension: name, goal, acceptance criteria, participants, plan and sub-tasks in Task.metadata; event envelopes as data parts",
    );
    task.params = Some(HashMap::from([("methods".to_owned(), task_methods())]));
    AgentCard {
        name: config.name.clone(),
        description: config.description.clone(),
        version: config.version.clone(),
        supported_interfaces: vec![interface("JSONRPC"), interface("HTTP+JSON")],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: Some(vec![
                task,
                extension(CHANNEL_EXTENSION_URI, "tiny-harness channels: messages, help requests and replies as data parts"),
                a2ui,
            ]),
            extended_agent_card: Some(config.extended_card.is_some()),
        },
        default_input_modes: input_modes(),
        default_output_modes: output_modes(),
        skills: vec![AgentSkill {
            id: "tasks".to_owned(),
            name: "Tasks".to_owned(),
            description: "Works through a task with a goal, acceptance criteria, participants with roles, a plan of steps, sub-tasks and help requests; /model and /effort choose the model per task.".to_owned(),
            tags: vec!["tasks".to_owned(), "planning".to_owned(), "delegation".to_owned()],
            examples: Some(vec!["Refund order 48213: it arrived late.".to_owned(), "/model".to_owned()]),
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_interfaces_advertise_the_base_url_without_a_trailing_slash() {
        for base in ["https://api.example/a2a", "https://api.example/a2a/"] {
            let mut config = ServiceConfig::local("http://unused");
            config.base_url = base.to_owned();
            let card = agent_card(&config);
            let urls: Vec<&str> = card
                .supported_interfaces
                .iter()
                .map(|i| i.url.as_str())
                .collect();
            assert_eq!(urls, ["https://api.example/a2a", "https://api.example/a2a"]);
        }
    }
}
