//! Decoding the 13 methods' parameters from one JSON object into a2a-lf's request types (the
//! task extension's two into the service's), with `google.rpc.BadRequest` field violations.
//!
//! Why by hand rather than `serde_json::from_value`: serde stops at the first problem and does
//! not name the field, while A2A clients (and the TCK) expect -32602 naming `message.parts`,
//! `pageSize`… Both bindings build one JSON object per request (JSON-RPC: `params`; REST: body,
//! path and query merged) and come here, so they validate identically. ProtoJSON leniencies
//! that cost nothing are accepted: `null` means unset, integers may be strings (as query
//! parameters are), enums may be their numbers; unknown fields are ignored.

use a2a::{
    AuthenticationInfo, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SubscribeToTaskRequest,
    TaskPushNotificationConfig,
};
use a2a_service::api::TaskRecordsRequest;
use serde_json::{Map, Value};

use crate::error::ProtocolError;
use crate::ops::{Method, Operation};

mod fields;

use fields::{Check, member, path};

/// Largest `pageSize` of ListTasks (A2A §3.1.4).
pub(crate) const MAX_PAGE_SIZE: i32 = 100;

/// Decodes the parameters of `method`.
pub(crate) fn decode(
    method: Method,
    params: &Map<String, Value>,
) -> Result<Operation, ProtocolError> {
    let mut c = Check::default();
    let op = match method {
        Method::SendMessage => Operation::SendMessage(c.send_message_request(params)),
        Method::SendStreamingMessage => {
            Operation::SendStreamingMessage(c.send_message_request(params))
        }
        Method::GetTask => Operation::GetTask(GetTaskRequest {
            id: c.required_string(params, "", "id"),
            history_length: c.non_negative_int(params, "", "historyLength"),
            tenant: c.string(params, "", "tenant"),
        }),
        Method::ListTasks => Operation::ListTasks(c.list_tasks_request(params)),
        Method::CancelTask => Operation::CancelTask(CancelTaskRequest {
            id: c.required_string(params, "", "id"),
            metadata: c.struct_map(params, "", "metadata"),
            tenant: c.string(params, "", "tenant"),
        }),
        Method::SubscribeToTask => Operation::SubscribeToTask(SubscribeToTaskRequest {
            id: c.required_string(params, "", "id"),
            tenant: c.string(params, "", "tenant"),
        }),
        Method::CreatePushConfig => Operation::CreatePushConfig(c.push_config(params, "", true)),
        Method::GetPushConfig => Operation::GetPushConfig(GetTaskPushNotificationConfigRequest {
            task_id: c.required_string(params, "", "taskId"),
            id: c.required_string(params, "", "id"),
            tenant: c.string(params, "", "tenant"),
        }),
        Method::ListPushConfigs => {
            Operation::ListPushConfigs(ListTaskPushNotificationConfigsRequest {
                task_id: c.required_string(params, "", "taskId"),
                // Not `optional` in the proto: 0 means unset.
                page_size: c
                    .non_negative_int(params, "", "pageSize")
                    .filter(|n| *n > 0),
                page_token: c.string(params, "", "pageToken"),
                tenant: c.string(params, "", "tenant"),
            })
        }
        Method::DeletePushConfig => {
            Operation::DeletePushConfig(DeleteTaskPushNotificationConfigRequest {
                task_id: c.required_string(params, "", "taskId"),
                id: c.required_string(params, "", "id"),
                tenant: c.string(params, "", "tenant"),
            })
        }
        Method::GetExtendedAgentCard => {
            Operation::GetExtendedAgentCard(GetExtendedAgentCardRequest {
                tenant: c.string(params, "", "tenant"),
            })
        }
        Method::GetTaskTranscript => Operation::GetTaskTranscript(c.records_request(params)),
        Method::GetTaskAuditLog => Operation::GetTaskAuditLog(c.records_request(params)),
    };
    c.finish()?;
    Ok(op)
}

/// The requests that are more than a few fields, read with the field readers of [`fields`].
impl Check {
    fn send_message_request(&mut self, obj: &Map<String, Value>) -> SendMessageRequest {
        let message = match member(obj, "message") {
            Some(Value::Object(m)) => self.message(m, "message"),
            Some(_) => {
                self.violation("message".into(), "must be an object");
                empty_message()
            }
            None => {
                self.violation("message".into(), "is required");
                empty_message()
            }
        };
        let configuration = self
            .object(obj, "", "configuration")
            .map(|m| self.configuration(m, "configuration"));
        SendMessageRequest {
            message,
            configuration,
            metadata: self.struct_map(obj, "", "metadata"),
            tenant: self.string(obj, "", "tenant"),
        }
    }

    fn message(&mut self, obj: &Map<String, Value>, prefix: &str) -> Message {
        let message_id = self.required_string(obj, prefix, "messageId");
        let role = self.role(obj, prefix, "role");
        let parts = match member(obj, "parts") {
            None => {
                self.violation(path(prefix, "parts"), "is required");
                Vec::new()
            }
            Some(Value::Array(items)) if items.is_empty() => {
                self.violation(path(prefix, "parts"), "must contain at least one part");
                Vec::new()
            }
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.part(item, &format!("{}[{i}]", path(prefix, "parts"))))
                .collect(),
            Some(_) => {
                self.violation(path(prefix, "parts"), "must be an array");
                Vec::new()
            }
        };
        Message {
            message_id,
            context_id: self.string(obj, prefix, "contextId"),
            task_id: self.string(obj, prefix, "taskId"),
            role,
            parts,
            metadata: self.struct_map(obj, prefix, "metadata"),
            extensions: self.string_list(obj, prefix, "extensions"),
            reference_task_ids: self.string_list(obj, prefix, "referenceTaskIds"),
        }
    }

    /// One part: exactly one of `text`, `raw` (base64), `url`, `data` (any JSON, `null` too).
    fn part(&mut self, value: &Value, field: &str) -> Option<Part> {
        let Value::Object(obj) = value else {
            self.violation(field.to_string(), "must be an object");
            return None;
        };
        let mut content: Vec<&str> = ["text", "raw", "url"]
            .into_iter()
            .filter(|k| member(obj, k).is_some())
            .collect();
        if obj.contains_key("data") {
            content.push("data");
        }
        match content.as_slice() {
            [] => {
                self.violation(field.to_string(), "must have one of text, raw, url, data");
                return None;
            }
            [_] => {}
            _ => {
                self.violation(
                    field.to_string(),
                    "must have exactly one of text, raw, url, data",
                );
                return None;
            }
        }
        let before = self.violations.len();
        for key in ["text", "raw", "url", "filename", "mediaType"] {
            if member(obj, key).is_some_and(|v| !v.is_string()) {
                self.violation(path(field, key), "must be a string");
            }
        }
        self.object(obj, field, "metadata");
        if self.violations.len() > before {
            return None;
        }
        let mut value = value.clone();
        if let Value::Object(part) = &mut value
            && !part.contains_key("mediaType")
            && let Some(media_type) = part.remove("media_type")
        {
            part.insert("mediaType".to_owned(), media_type);
        }
        match serde_json::from_value::<Part>(value) {
            Ok(part) => Some(part),
            Err(_) if content == ["raw"] => {
                self.violation(path(field, "raw"), "must be base64");
                None
            }
            Err(e) => {
                self.violation(field.to_string(), &e.to_string());
                None
            }
        }
    }

    fn configuration(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
    ) -> SendMessageConfiguration {
        let push_key = if member(obj, "taskPushNotificationConfig").is_some() {
            "taskPushNotificationConfig"
        } else {
            "pushNotificationConfig"
        };
        let push_prefix = path(prefix, push_key);
        SendMessageConfiguration {
            accepted_output_modes: self.string_list(obj, prefix, "acceptedOutputModes"),
            task_push_notification_config: self
                .object(obj, prefix, push_key)
                .map(|m| self.push_config(m, &push_prefix, false)),
            history_length: self.non_negative_int(obj, prefix, "historyLength"),
            return_immediately: self.boolean(obj, prefix, "returnImmediately"),
        }
    }

    fn push_config(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        task_id_required: bool,
    ) -> TaskPushNotificationConfig {
        let task_id = if task_id_required {
            self.required_string(obj, prefix, "taskId")
        } else {
            self.string(obj, prefix, "taskId").unwrap_or_default()
        };
        let auth_prefix = path(prefix, "authentication");
        TaskPushNotificationConfig {
            url: self.required_string(obj, prefix, "url"),
            id: self.string(obj, prefix, "id"),
            task_id,
            token: self.string(obj, prefix, "token"),
            authentication: self.object(obj, prefix, "authentication").map(|m| {
                AuthenticationInfo {
                    scheme: self.required_string(m, &auth_prefix, "scheme"),
                    credentials: self.string(m, &auth_prefix, "credentials"),
                }
            }),
            tenant: self.string(obj, prefix, "tenant"),
        }
    }

    /// `{id, pageSize?, pageToken?}`; the service reads the token (its format is the
    /// service's own) and checks the page size again for its other callers.
    fn records_request(&mut self, obj: &Map<String, Value>) -> TaskRecordsRequest {
        self.string(obj, "", "tenant");
        let page_size = self.int(obj, "", "pageSize");
        if page_size.is_some_and(|n| !(1..=MAX_PAGE_SIZE).contains(&n)) {
            self.violation("pageSize".into(), "must be between 1 and 100");
        }
        TaskRecordsRequest {
            id: self.required_string(obj, "", "id"),
            page_size,
            page_token: self.string(obj, "", "pageToken"),
        }
    }

    fn list_tasks_request(&mut self, obj: &Map<String, Value>) -> ListTasksRequest {
        let page_size = self.int(obj, "", "pageSize");
        if page_size.is_some_and(|n| !(1..=MAX_PAGE_SIZE).contains(&n)) {
            self.violation("pageSize".into(), "must be between 1 and 100");
        }
        ListTasksRequest {
            context_id: self.string(obj, "", "contextId"),
            status: self.task_state(obj, "", "status"),
            page_size,
            page_token: self.string(obj, "", "pageToken"),
            history_length: self.non_negative_int(obj, "", "historyLength"),
            status_timestamp_after: self.timestamp(obj, "", "statusTimestampAfter"),
            include_artifacts: self.boolean(obj, "", "includeArtifacts"),
            tenant: self.string(obj, "", "tenant"),
        }
    }
}

fn empty_message() -> Message {
    Message {
        message_id: String::new(),
        context_id: None,
        task_id: None,
        role: Role::Unspecified,
        parts: Vec::new(),
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    }
}

#[cfg(test)]
mod tests {
    use super::fields::proto_name;
    use super::*;
    use crate::error::ErrorKind;
    use a2a::{PartContent, TaskState};
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn fields(err: ProtocolError) -> Vec<String> {
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        err.violations.into_iter().map(|v| v.field).collect()
    }

    fn send(params: Value) -> Result<SendMessageRequest, ProtocolError> {
        match decode(Method::SendMessage, &obj(params))? {
            Operation::SendMessage(req) => Ok(req),
            other => panic!("{other:?}"),
        }
    }

    fn good_message() -> Value {
        json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    }

    #[test]
    fn a_good_send_message_decodes_with_unknown_fields_ignored() {
        let req = send(json!({
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [
                {"text": "hi", "mediaType": "text/plain"},
                {"raw": "dGNr", "filename": "x.bin"},
                {"url": "https://example.com/a.pdf"},
                {"data": {"k": 1}},
                {"data": null}
            ], "contextId": "c1", "taskId": "", "metadata": {"participant_id": "alice"}, "surprise": 1},
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": "3", "returnImmediately": true,
                "taskPushNotificationConfig": {"url": "https://hook", "authentication": {"scheme": "Bearer"}}},
            "metadata": {"a": 1},
            "tenant": "acme",
            "unknown": {"x": 1}
        }))
        .unwrap();
        assert_eq!(req.message.message_id, "m1");
        assert_eq!(req.message.role, Role::User);
        assert_eq!(req.message.parts.len(), 5);
        assert_eq!(
            req.message.parts[1].content,
            PartContent::Raw(b"tck".to_vec())
        );
        assert_eq!(req.message.parts[4].content, PartContent::Data(Value::Null));
        assert_eq!(req.message.context_id.as_deref(), Some("c1"));
        assert_eq!(req.message.task_id, None);
        let config = req.configuration.unwrap();
        assert_eq!(config.history_length, Some(3));
        assert_eq!(config.return_immediately, Some(true));
        assert_eq!(
            config
                .task_push_notification_config
                .unwrap()
                .authentication
                .unwrap()
                .scheme,
            "Bearer"
        );
        assert_eq!(req.tenant.as_deref(), Some("acme"));
    }

    #[test]
    fn send_message_violations_name_their_fields() {
        assert_eq!(fields(send(json!({})).unwrap_err()), vec!["message"]);
        assert_eq!(
            fields(send(json!({"message": "hi"})).unwrap_err()),
            vec!["message"]
        );
        assert_eq!(
            fields(send(json!({"message": {"parts": []}})).unwrap_err()),
            vec!["message.messageId", "message.role", "message.parts"]
        );
        assert_eq!(
            fields(
                send(
                    json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}})
                )
                .unwrap_err()
            ),
            vec!["message.role"]
        );
        assert_eq!(
            fields(send(json!({"message": {"messageId": "m", "role": "ROLE_USER"}})).unwrap_err()),
            vec!["message.parts"]
        );
        let bad_parts = json!({"message": {"messageId": "m", "role": 1, "parts": [
            {"text": "ok"}, {}, {"text": "a", "url": "b"}, {"raw": "***"}, {"text": 5}, 7
        ]}});
        assert_eq!(
            fields(send(bad_parts).unwrap_err()),
            vec![
                "message.parts[1]",
                "message.parts[2]",
                "message.parts[3].raw",
                "message.parts[4].text",
                "message.parts[5]"
            ]
        );
        let bad_config = json!({"message": good_message(), "configuration": {
            "historyLength": -1, "returnImmediately": "maybe", "acceptedOutputModes": "text/plain",
            "taskPushNotificationConfig": {"token": "t"}}});
        assert_eq!(
            fields(send(bad_config).unwrap_err()),
            vec![
                "configuration.acceptedOutputModes",
                "configuration.taskPushNotificationConfig.url",
                "configuration.historyLength",
                "configuration.returnImmediately"
            ]
        );
    }

    #[test]
    fn list_tasks_rules() {
        let decode_list = |v: Value| match decode(Method::ListTasks, &obj(v)) {
            Ok(Operation::ListTasks(req)) => Ok(req),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        let req = decode_list(json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": "100",
            "pageToken": "p", "historyLength": 0, "statusTimestampAfter": "2026-01-31T12:00:00.123Z",
            "includeArtifacts": "true"}))
        .unwrap();
        assert_eq!(req.status, Some(TaskState::Working));
        assert_eq!(req.page_size, Some(100));
        assert_eq!(req.history_length, Some(0));
        assert_eq!(req.include_artifacts, Some(true));
        assert_eq!(
            req.status_timestamp_after.unwrap().to_rfc3339(),
            "2026-01-31T12:00:00.123+00:00"
        );
        assert_eq!(
            decode_list(json!({"status": "TASK_STATE_UNSPECIFIED"}))
                .unwrap()
                .status,
            None
        );
        assert_eq!(
            decode_list(json!({"status": 6})).unwrap().status,
            Some(TaskState::InputRequired)
        );
        assert_eq!(decode_list(json!({})).unwrap().page_size, None);
        for bad in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": "ten"}),
        ] {
            assert_eq!(fields(decode_list(bad).unwrap_err()), vec!["pageSize"]);
        }
        assert_eq!(
            fields(decode_list(json!({"status": "working"})).unwrap_err()),
            vec!["status"]
        );
        assert_eq!(
            fields(decode_list(json!({"statusTimestampAfter": "yesterday"})).unwrap_err()),
            vec!["statusTimestampAfter"]
        );
        assert_eq!(
            fields(decode_list(json!({"includeArtifacts": "yes"})).unwrap_err()),
            vec!["includeArtifacts"]
        );
    }

    #[test]
    fn ids_are_required() {
        for (method, expected) in [
            (Method::GetTask, vec!["id"]),
            (Method::CancelTask, vec!["id"]),
            (Method::SubscribeToTask, vec!["id"]),
            (Method::CreatePushConfig, vec!["taskId", "url"]),
            (Method::GetPushConfig, vec!["taskId", "id"]),
            (Method::ListPushConfigs, vec!["taskId"]),
            (Method::DeletePushConfig, vec!["taskId", "id"]),
        ] {
            assert_eq!(
                fields(decode(method, &Map::new()).unwrap_err()),
                expected,
                "{method:?}"
            );
        }
        assert!(decode(Method::GetExtendedAgentCard, &Map::new()).is_ok());
        assert_eq!(
            fields(decode(Method::GetTask, &obj(json!({"id": 5}))).unwrap_err()),
            vec!["id"]
        );
    }

    #[test]
    fn proto_field_names_are_accepted_like_json_names() {
        // The TCK's JSON-RPC client sends `history_length`, `task_id`, `page_size`…
        let Operation::GetTask(get) = decode(
            Method::GetTask,
            &obj(json!({"id": "t", "history_length": 1})),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(get.history_length, Some(1));
        let Operation::CreatePushConfig(cfg) = decode(
            Method::CreatePushConfig,
            &obj(json!({"task_id": "t", "url": "https://h"})),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(cfg.task_id, "t");
        let Operation::ListTasks(list) = decode(
            Method::ListTasks,
            &obj(json!({"context_id": "c", "page_size": 5, "include_artifacts": true})),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                list.context_id.as_deref(),
                list.page_size,
                list.include_artifacts
            ),
            (Some("c"), Some(5), Some(true))
        );
        let req = send(json!({"message": {"message_id": "m1", "role": "ROLE_USER",
            "parts": [{"text": "hi", "media_type": "text/plain"}], "context_id": "c1"},
            "configuration": {"return_immediately": true,
                "task_push_notification_config": {"url": "https://h"}}}))
        .unwrap();
        assert_eq!(req.message.message_id, "m1");
        assert_eq!(req.message.context_id.as_deref(), Some("c1"));
        assert_eq!(
            req.message.parts[0].media_type.as_deref(),
            Some("text/plain")
        );
        let config = req.configuration.unwrap();
        assert_eq!(config.return_immediately, Some(true));
        assert_eq!(
            config.task_push_notification_config.unwrap().url,
            "https://h"
        );
        // The JSON name wins when both are sent; violations name the JSON name.
        let Operation::GetTask(both) = decode(
            Method::GetTask,
            &obj(json!({"id": "t", "historyLength": 2, "history_length": 1})),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(both.history_length, Some(2));
        assert_eq!(
            fields(
                decode(
                    Method::GetTask,
                    &obj(json!({"id": "t", "history_length": -1}))
                )
                .unwrap_err()
            ),
            vec!["historyLength"]
        );
        assert_eq!(
            proto_name("statusTimestampAfter").as_deref(),
            Some("status_timestamp_after")
        );
        assert_eq!(proto_name("id"), None);
    }

    #[test]
    fn push_config_decodes() {
        let op = decode(
            Method::CreatePushConfig,
            &obj(
                json!({"taskId": "t", "url": "https://h", "id": "c1", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "s"}}),
            ),
        )
        .unwrap();
        let Operation::CreatePushConfig(cfg) = op else {
            panic!()
        };
        assert_eq!(
            (cfg.task_id.as_str(), cfg.url.as_str(), cfg.id.as_deref()),
            ("t", "https://h", Some("c1"))
        );
        assert_eq!(
            cfg.authentication.unwrap().credentials.as_deref(),
            Some("s")
        );
        let err = decode(
            Method::CreatePushConfig,
            &obj(json!({"taskId": "t", "url": "u", "authentication": {}})),
        )
        .unwrap_err();
        assert_eq!(fields(err), vec!["authentication.scheme"]);
        let Operation::ListPushConfigs(list) = decode(
            Method::ListPushConfigs,
            &obj(json!({"taskId": "t", "pageSize": 0})),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(list.page_size, None);
    }
}
