//! The 11 A2A methods through one binding, each answering its result document or the error
//! in one shape, and polling a task until it gets somewhere.

use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{Binding, Client};
use crate::fixtures::{self, TaskRef, keys, on, send_req, state};
use crate::outcome::{ApiError, rest_outcome, rpc_outcome};
use crate::sse::Events;
use crate::wait::poll;

/// A query string from a JSON object of parameters (strings as they are, others as JSON).
fn query(params: &Value) -> String {
    let Some(obj) = params.as_object() else {
        return String::new();
    };
    let mut out = String::new();
    for (k, v) in obj {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.push_str(&v);
    }
    out
}

/// The 11 methods through one binding, answering the method's result document (for
/// SendMessage: the task) or the error in one shape.
#[derive(Clone)]
pub struct Api {
    pub client: Client,
    pub binding: Binding,
}

impl Api {
    pub fn as_participant(&self, id: &str) -> Api {
        self.client.as_participant(id).api(self.binding)
    }

    async fn unary(
        &self,
        rpc_method: &str,
        params: Value,
        rest: (Method, String, Option<Value>),
    ) -> Result<Value, ApiError> {
        match self.binding {
            Binding::JsonRpc => rpc_outcome(&self.client.rpc(rpc_method, params).await),
            Binding::Rest => {
                let (method, path, body) = rest;
                rest_outcome(&self.client.rest(method, &path, body).await)
            }
        }
    }

    /// SendMessage: the whole `SendMessageResponse`.
    pub async fn send_response(&self, req: Value) -> Result<Value, ApiError> {
        self.unary(
            "SendMessage",
            req.clone(),
            (Method::POST, "/message:send".to_owned(), Some(req)),
        )
        .await
    }

    /// A text message from `from` opening a new task, which must succeed: the task.
    pub async fn send_text(&self, from: &str, text: &str) -> Value {
        self.send_ok(send_req(fixtures::text(from, text))).await
    }

    /// A text message from `from` on `task`, which must succeed: the task.
    pub async fn follow_up<T: TaskRef + ?Sized>(&self, task: &T, from: &str, text: &str) -> Value {
        self.send_ok(send_req(on(fixtures::text(from, text), task)))
            .await
    }

    /// ListTasks without a filter as `participant`, which must succeed.
    pub async fn list_as(&self, participant: &str) -> Value {
        self.as_participant(participant)
            .list_tasks(json!({}))
            .await
            .unwrap_or_else(|e| panic!("{:?} ListTasks as {participant}: {e:?}", self.binding))
    }

    /// GetTask as `participant`, which must succeed.
    pub async fn read_as(&self, participant: &str, id: &str) -> Value {
        self.as_participant(participant)
            .get_task(id, None)
            .await
            .unwrap_or_else(|e| panic!("{:?} GetTask as {participant}: {e:?}", self.binding))
    }

    /// SendMessage answered with a task: the task.
    pub async fn send(&self, req: Value) -> Result<Value, ApiError> {
        let resp = self.send_response(req).await?;
        assert_eq!(
            keys(&resp),
            ["task"],
            "a SendMessageResponse with a task: {resp}"
        );
        Ok(resp["task"].clone())
    }

    /// A send that must succeed.
    pub async fn send_ok(&self, req: Value) -> Value {
        self.send(req)
            .await
            .unwrap_or_else(|e| panic!("{:?} SendMessage failed: {e:?}", self.binding))
    }

    pub async fn send_streaming(&self, req: Value) -> Result<Events, ApiError> {
        match self.binding {
            Binding::JsonRpc => {
                let (id, body) = Client::rpc_body("SendStreamingMessage", req);
                Events::open(self.client.request(Method::POST, "/").json(&body), Some(id)).await
            }
            Binding::Rest => {
                Events::open(
                    self.client
                        .request(Method::POST, "/message:stream")
                        .json(&req),
                    None,
                )
                .await
            }
        }
    }

    pub async fn get_task(&self, id: &str, history_length: Option<i64>) -> Result<Value, ApiError> {
        let mut params = json!({ "id": id });
        let mut path = format!("/tasks/{id}");
        if let Some(n) = history_length {
            params["historyLength"] = json!(n);
            path.push_str(&format!("?historyLength={n}"));
        }
        self.unary("GetTask", params, (Method::GET, path, None))
            .await
    }

    /// ListTasks with these parameters (a JSON object; sent as the query over REST).
    pub async fn list_tasks(&self, params: Value) -> Result<Value, ApiError> {
        let path = format!("/tasks{}", query(&params));
        self.unary("ListTasks", params, (Method::GET, path, None))
            .await
    }

    pub async fn cancel(&self, id: &str) -> Result<Value, ApiError> {
        self.unary(
            "CancelTask",
            json!({ "id": id }),
            (Method::POST, format!("/tasks/{id}:cancel"), None),
        )
        .await
    }

    /// SubscribeToTask (REST: POST with an empty body).
    pub async fn subscribe(&self, id: &str) -> Result<Events, ApiError> {
        match self.binding {
            Binding::JsonRpc => {
                let (rpc_id, body) = Client::rpc_body("SubscribeToTask", json!({ "id": id }));
                Events::open(
                    self.client.request(Method::POST, "/").json(&body),
                    Some(rpc_id),
                )
                .await
            }
            Binding::Rest => {
                Events::open(
                    self.client
                        .request(Method::POST, &format!("/tasks/{id}:subscribe")),
                    None,
                )
                .await
            }
        }
    }

    /// SubscribeToTask over REST with GET (the proto's verb).
    pub async fn subscribe_get(&self, id: &str) -> Result<Events, ApiError> {
        assert_eq!(self.binding, Binding::Rest);
        Events::open(
            self.client
                .request(Method::GET, &format!("/tasks/{id}:subscribe")),
            None,
        )
        .await
    }

    /// CreateTaskPushNotificationConfig; `config` holds url, id, token, authentication.
    pub async fn create_push(&self, task_id: &str, config: Value) -> Result<Value, ApiError> {
        let mut params = config.clone();
        params["taskId"] = json!(task_id);
        self.unary(
            "CreateTaskPushNotificationConfig",
            params,
            (
                Method::POST,
                format!("/tasks/{task_id}/pushNotificationConfigs"),
                Some(config),
            ),
        )
        .await
    }

    pub async fn get_push(&self, task_id: &str, id: &str) -> Result<Value, ApiError> {
        self.one_push_config("GetTaskPushNotificationConfig", Method::GET, task_id, id)
            .await
    }

    pub async fn list_push(&self, task_id: &str) -> Result<Value, ApiError> {
        self.unary(
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": task_id }),
            (
                Method::GET,
                format!("/tasks/{task_id}/pushNotificationConfigs"),
                None,
            ),
        )
        .await
    }

    pub async fn delete_push(&self, task_id: &str, id: &str) -> Result<Value, ApiError> {
        self.one_push_config(
            "DeleteTaskPushNotificationConfig",
            Method::DELETE,
            task_id,
            id,
        )
        .await
    }

    /// A method on one push config, at the same path over REST for every verb.
    async fn one_push_config(
        &self,
        rpc_method: &str,
        verb: Method,
        task_id: &str,
        id: &str,
    ) -> Result<Value, ApiError> {
        self.unary(
            rpc_method,
            json!({ "taskId": task_id, "id": id }),
            (
                verb,
                format!("/tasks/{task_id}/pushNotificationConfigs/{id}"),
                None,
            ),
        )
        .await
    }

    pub async fn extended_card(&self) -> Result<Value, ApiError> {
        self.unary(
            "GetExtendedAgentCard",
            json!({}),
            (Method::GET, "/extendedAgentCard".to_owned(), None),
        )
        .await
    }

    /// The task extension's GetTaskTranscript; `paging` holds `pageSize` and `pageToken` (a
    /// JSON object; sent as the query over REST).
    pub async fn transcript(&self, id: &str, paging: Value) -> Result<Value, ApiError> {
        self.task_records("GetTaskTranscript", "transcript", id, paging)
            .await
    }

    /// The task extension's GetTaskAuditLog, paged as [`transcript`](Self::transcript).
    pub async fn audit_log(&self, id: &str, paging: Value) -> Result<Value, ApiError> {
        self.task_records("GetTaskAuditLog", "auditLog", id, paging)
            .await
    }

    async fn task_records(
        &self,
        rpc_method: &str,
        route: &str,
        id: &str,
        paging: Value,
    ) -> Result<Value, ApiError> {
        let path = format!("/tasks/{id}/{route}{}", query(&paging));
        let mut params = paging;
        params["id"] = json!(id);
        self.unary(rpc_method, params, (Method::GET, path, None))
            .await
    }
}

impl Client {
    /// The A2A methods through `binding`, with this client's headers.
    pub fn api(&self, binding: Binding) -> Api {
        Api {
            client: self.clone(),
            binding,
        }
    }
}

/// Reads the task until `done` says so, fails the test after [`WAIT`](crate::WAIT) saying it
/// waited for `what`.
pub async fn poll_task(api: &Api, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll(
        what,
        || async { api.get_task(id, None).await.expect("GetTask") },
        done,
    )
    .await
}

/// Reads the task until it is in `expected` state.
pub async fn poll_state(api: &Api, id: &str, expected: &str) -> Value {
    poll_task(api, id, expected, |t| state(t) == expected).await
}
