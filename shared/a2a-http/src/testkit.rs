//! Test double for the codec's unit tests: an [`A2aApi`] that records what it was called with
//! and answers canned values. Not the service; the real one is tested end to end elsewhere.

use std::sync::Mutex;

use a2a::{
    AgentCard, AgentExtension, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use a2a_service::api::{
    AuditLogPage, RecordsPage, TaskRecordsRequest, TranscriptEntry, TranscriptPage,
};
use a2a_service::{A2aApi, EventStream, RequestContext, ServiceConfig, ServiceError};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream;
use http::{Request, Response};
use serde_json::Value;

use crate::{Body, Caller, HttpConfig, Method};

pub(crate) const TASK_EXT: &str = "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";
pub(crate) const OTHER_EXT: &str = "urn:test:other";

/// The service's own card (the codec is tested against the card shape it serves) under a test
/// name, with every capability on and the two extensions the tests activate.
pub(crate) fn card() -> AgentCard {
    let mut config = ServiceConfig::local("http://localhost");
    config.name = "Test Agent".into();
    config.version = "1.0.0".into();
    let mut card = a2a_service::card::agent_card(&config);
    card.capabilities.extended_agent_card = Some(true);
    card.capabilities.extensions = Some(vec![
        AgentExtension {
            uri: TASK_EXT.into(),
            description: None,
            required: Some(false),
            params: None,
        },
        AgentExtension {
            uri: OTHER_EXT.into(),
            description: None,
            required: None,
            params: None,
        },
    ]);
    card
}

pub(crate) fn task(id: &str, state: TaskState) -> Task {
    Task {
        id: id.into(),
        context_id: "ctx-1".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: None,
        },
        artifacts: None,
        history: None,
        metadata: None,
    }
}

pub(crate) fn status_update(id: &str, state: TaskState) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.into(),
        context_id: "ctx-1".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: None,
        },
        metadata: None,
    })
}

/// What the fake was called with: the decoded operation the bindings handed the service.
pub(crate) use crate::ops::Operation as Call;

impl Call {
    /// The method the request was decoded for, and the tenant it carries.
    pub(crate) fn method_and_tenant(&self) -> (Method, Option<&str>) {
        match self {
            Call::SendMessage(r) => (Method::SendMessage, r.tenant.as_deref()),
            Call::SendStreamingMessage(r) => (Method::SendStreamingMessage, r.tenant.as_deref()),
            Call::GetTask(r) => (Method::GetTask, r.tenant.as_deref()),
            Call::ListTasks(r) => (Method::ListTasks, r.tenant.as_deref()),
            Call::CancelTask(r) => (Method::CancelTask, r.tenant.as_deref()),
            Call::SubscribeToTask(r) => (Method::SubscribeToTask, r.tenant.as_deref()),
            Call::CreatePushConfig(r) => (Method::CreatePushConfig, r.tenant.as_deref()),
            Call::GetPushConfig(r) => (Method::GetPushConfig, r.tenant.as_deref()),
            Call::ListPushConfigs(r) => (Method::ListPushConfigs, r.tenant.as_deref()),
            Call::DeletePushConfig(r) => (Method::DeletePushConfig, r.tenant.as_deref()),
            Call::GetExtendedAgentCard(r) => (Method::GetExtendedAgentCard, r.tenant.as_deref()),
            Call::GetTaskTranscript(_) => (Method::GetTaskTranscript, None),
            Call::GetTaskAuditLog(_) => (Method::GetTaskAuditLog, None),
        }
    }
}

type StreamFactory = Box<dyn FnOnce() -> EventStream + Send>;

pub(crate) struct FakeApi {
    pub card: AgentCard,
    pub calls: Mutex<Vec<(RequestContext, Call)>>,
    /// When set, the next call fails with this error.
    pub fail: Mutex<Option<ServiceError>>,
    /// When set, the next streaming call returns this stream (default: task, then COMPLETED).
    pub stream: Mutex<Option<StreamFactory>>,
}

impl FakeApi {
    pub(crate) fn new() -> Self {
        FakeApi::with_card(card())
    }

    pub(crate) fn with_card(card: AgentCard) -> Self {
        FakeApi {
            card,
            calls: Mutex::new(Vec::new()),
            fail: Mutex::new(None),
            stream: Mutex::new(None),
        }
    }

    pub(crate) fn failing(self, err: ServiceError) -> Self {
        *self.fail.lock().unwrap() = Some(err);
        self
    }

    pub(crate) fn streaming(self, factory: impl FnOnce() -> EventStream + Send + 'static) -> Self {
        *self.stream.lock().unwrap() = Some(Box::new(factory));
        self
    }

    pub(crate) fn calls(&self) -> Vec<(RequestContext, Call)> {
        self.calls.lock().unwrap().clone()
    }

    pub(crate) fn only_call(&self) -> (RequestContext, Call) {
        let calls = self.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        calls.into_iter().next().unwrap()
    }

    fn record(&self, ctx: &RequestContext, call: Call) -> Result<(), ServiceError> {
        self.calls.lock().unwrap().push((ctx.clone(), call));
        match self.fail.lock().unwrap().take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    fn events(&self, id: &str) -> EventStream {
        match self.stream.lock().unwrap().take() {
            Some(factory) => factory(),
            None => stream::iter(vec![
                Ok(StreamResponse::Task(task(id, TaskState::Submitted))),
                Ok(status_update(id, TaskState::Completed)),
            ])
            .boxed(),
        }
    }
}

#[async_trait]
impl A2aApi for FakeApi {
    fn agent_card(&self) -> &AgentCard {
        &self.card
    }

    async fn send_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ServiceError> {
        self.record(ctx, Call::SendMessage(req))?;
        Ok(SendMessageResponse::Task(task(
            "task-1",
            TaskState::Completed,
        )))
    }

    async fn send_streaming_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, ServiceError> {
        self.record(ctx, Call::SendStreamingMessage(req))?;
        Ok(self.events("task-1"))
    }

    async fn get_task(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Task, ServiceError> {
        let id = req.id.clone();
        self.record(ctx, Call::GetTask(req))?;
        Ok(task(&id, TaskState::Working))
    }

    async fn list_tasks(
        &self,
        ctx: &RequestContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ServiceError> {
        let page_size = req.page_size.unwrap_or(50);
        self.record(ctx, Call::ListTasks(req))?;
        Ok(ListTasksResponse {
            tasks: vec![task("task-1", TaskState::Working)],
            next_page_token: String::new(),
            page_size,
            total_size: 1,
        })
    }

    async fn cancel_task(
        &self,
        ctx: &RequestContext,
        req: CancelTaskRequest,
    ) -> Result<Task, ServiceError> {
        let id = req.id.clone();
        self.record(ctx, Call::CancelTask(req))?;
        Ok(task(&id, TaskState::Canceled))
    }

    async fn subscribe_to_task(
        &self,
        ctx: &RequestContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ServiceError> {
        let id = req.id.clone();
        self.record(ctx, Call::SubscribeToTask(req))?;
        Ok(self.events(&id))
    }

    async fn create_push_config(
        &self,
        ctx: &RequestContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        self.record(ctx, Call::CreatePushConfig(req.clone()))?;
        Ok(TaskPushNotificationConfig {
            id: Some("cfg-1".into()),
            ..req
        })
    }

    async fn get_push_config(
        &self,
        ctx: &RequestContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        self.record(ctx, Call::GetPushConfig(req.clone()))?;
        Ok(push_config(&req.task_id, &req.id))
    }

    async fn list_push_configs(
        &self,
        ctx: &RequestContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ServiceError> {
        let task_id = req.task_id.clone();
        self.record(ctx, Call::ListPushConfigs(req))?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: vec![push_config(&task_id, "cfg-1")],
            next_page_token: None,
        })
    }

    async fn delete_push_config(
        &self,
        ctx: &RequestContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ServiceError> {
        self.record(ctx, Call::DeletePushConfig(req))
    }

    async fn get_extended_agent_card(
        &self,
        ctx: &RequestContext,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ServiceError> {
        self.record(ctx, Call::GetExtendedAgentCard(req))?;
        Ok(AgentCard {
            name: "Extended Test Agent".into(),
            ..self.card.clone()
        })
    }

    async fn get_task_transcript(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<TranscriptPage, ServiceError> {
        let task_id = req.id.clone();
        self.record(ctx, Call::GetTaskTranscript(req))?;
        Ok(RecordsPage {
            task_id,
            entries: vec![TranscriptEntry {
                number: 0,
                entry: serde_json::json!({"turn": {"role": "user", "text": "hi"}}),
            }],
            next_page_token: "1".into(),
        })
    }

    async fn get_task_audit_log(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<AuditLogPage, ServiceError> {
        let task_id = req.id.clone();
        self.record(ctx, Call::GetTaskAuditLog(req))?;
        Ok(RecordsPage {
            task_id,
            entries: Vec::new(),
            next_page_token: String::new(),
        })
    }
}

pub(crate) fn push_config(task_id: &str, id: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: "https://hooks.example.com/a2a".into(),
        id: Some(id.into()),
        task_id: task_id.into(),
        token: None,
        authentication: None,
        tenant: None,
    }
}

/// A request builder with `A2A-Version: 1.0` preset.
pub(crate) struct Req {
    builder: http::request::Builder,
    body: Bytes,
}

impl Req {
    pub(crate) fn new(method: &str, uri: &str) -> Self {
        Req {
            builder: Request::builder()
                .method(method)
                .uri(uri)
                .header("a2a-version", "1.0"),
            body: Bytes::new(),
        }
    }

    pub(crate) fn get(uri: &str) -> Self {
        Req::new("GET", uri)
    }

    pub(crate) fn post(uri: &str) -> Self {
        Req::new("POST", uri)
    }

    /// A JSON-RPC request to `/`.
    pub(crate) fn rpc(method: &str, params: Value) -> Self {
        Req::post("/").json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    pub(crate) fn without_version(mut self) -> Self {
        if let Some(headers) = self.builder.headers_mut() {
            headers.remove("a2a-version");
        }
        self
    }

    /// This `A2A-Version` instead of 1.0.
    pub(crate) fn version(self, version: &str) -> Self {
        self.without_version().header("a2a-version", version)
    }

    pub(crate) fn json(self, value: &Value) -> Self {
        self.raw("application/json", serde_json::to_vec(value).unwrap())
    }

    pub(crate) fn raw(mut self, content_type: &str, body: impl Into<Bytes>) -> Self {
        self.builder = self.builder.header("content-type", content_type);
        self.body = body.into();
        self
    }

    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub(crate) fn build(self) -> Request<Bytes> {
        self.builder.body(self.body).unwrap()
    }
}

/// A finished response: status, headers, the body bytes.
pub(crate) struct Got {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub was_stream: bool,
}

impl Got {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).unwrap()
    }

    /// The JSON of every `data:` frame.
    pub(crate) fn events(&self) -> Vec<Value> {
        sse_data(&self.text())
    }
}

/// Splits an SSE body into frames and parses their `data:` lines; asserts the framing.
pub(crate) fn sse_data(text: &str) -> Vec<Value> {
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "frames end with a blank line: {text:?}"
    );
    text.split("\n\n")
        .filter(|frame| !frame.is_empty())
        .filter(|frame| !frame.starts_with(':'))
        .map(|frame| {
            let data = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            assert!(!data.contains('\n'), "one line per event");
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

pub(crate) async fn collect(resp: Response<Body>) -> Got {
    let (parts, body) = resp.into_parts();
    let was_stream = body.is_stream();
    Got {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await,
        was_stream,
    }
}

pub(crate) async fn send(api: &FakeApi, req: Req) -> Got {
    send_configured(api, &HttpConfig::default(), req).await
}

/// An anonymous caller's request under `config`.
pub(crate) async fn send_configured(api: &FakeApi, config: &HttpConfig, req: Req) -> Got {
    send_with(api, config, req, Caller::anonymous()).await
}

pub(crate) async fn send_with(api: &FakeApi, config: &HttpConfig, req: Req, caller: Caller) -> Got {
    collect(crate::handle(api, config, req.build(), caller).await).await
}
