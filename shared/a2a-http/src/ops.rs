//! The 11 A2A operations and the task extension's two record reads, independent of the
//! binding that carried them: the method list, the
//! checks every method gets before the service is called (version, extensions, participant
//! header, declared capabilities), and the call into [`A2aApi`].
//!
//! Why one place: JSON-RPC and REST differ only in how a request is addressed and how the
//! answer is framed; what is checked and called must be identical (A2A §5.1).

use a2a::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, SendMessageRequest,
    SubscribeToTaskRequest, TaskPushNotificationConfig, methods,
};
use a2a_service::api::{GET_TASK_AUDIT_LOG, GET_TASK_TRANSCRIPT, TaskRecordsRequest};
use a2a_service::{A2aApi, EventStream, RequestContext};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use serde::Serialize;
use serde_json::value::RawValue;
use tracing::Instrument as _;

use crate::Caller;
use crate::body::Body;
use crate::error::{ErrorKind, ProtocolError};
use crate::{headers, reply};

/// The A2A 1.0 methods, then the methods of the task extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreatePushConfig,
    GetPushConfig,
    ListPushConfigs,
    DeletePushConfig,
    GetExtendedAgentCard,
    /// The task extension's `GetTaskTranscript` (`GET /tasks/{id}/transcript`).
    GetTaskTranscript,
    /// The task extension's `GetTaskAuditLog` (`GET /tasks/{id}/auditLog`).
    GetTaskAuditLog,
}

impl Method {
    pub const ALL: [Method; 13] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreatePushConfig,
        Method::GetPushConfig,
        Method::ListPushConfigs,
        Method::DeletePushConfig,
        Method::GetExtendedAgentCard,
        Method::GetTaskTranscript,
        Method::GetTaskAuditLog,
    ];

    /// The JSON-RPC method name (case-sensitive, as in a2a-lf's `methods`).
    pub(crate) fn from_jsonrpc(name: &str) -> Option<Method> {
        Some(match name {
            methods::SEND_MESSAGE => Method::SendMessage,
            methods::SEND_STREAMING_MESSAGE => Method::SendStreamingMessage,
            methods::GET_TASK => Method::GetTask,
            methods::LIST_TASKS => Method::ListTasks,
            methods::CANCEL_TASK => Method::CancelTask,
            methods::SUBSCRIBE_TO_TASK => Method::SubscribeToTask,
            methods::CREATE_PUSH_CONFIG => Method::CreatePushConfig,
            methods::GET_PUSH_CONFIG => Method::GetPushConfig,
            methods::LIST_PUSH_CONFIGS => Method::ListPushConfigs,
            methods::DELETE_PUSH_CONFIG => Method::DeletePushConfig,
            methods::GET_EXTENDED_AGENT_CARD => Method::GetExtendedAgentCard,
            GET_TASK_TRANSCRIPT => Method::GetTaskTranscript,
            GET_TASK_AUDIT_LOG => Method::GetTaskAuditLog,
            _ => return None,
        })
    }

    /// The JSON-RPC method name.
    pub fn jsonrpc_name(self) -> &'static str {
        match self {
            Method::SendMessage => methods::SEND_MESSAGE,
            Method::SendStreamingMessage => methods::SEND_STREAMING_MESSAGE,
            Method::GetTask => methods::GET_TASK,
            Method::ListTasks => methods::LIST_TASKS,
            Method::CancelTask => methods::CANCEL_TASK,
            Method::SubscribeToTask => methods::SUBSCRIBE_TO_TASK,
            Method::CreatePushConfig => methods::CREATE_PUSH_CONFIG,
            Method::GetPushConfig => methods::GET_PUSH_CONFIG,
            Method::ListPushConfigs => methods::LIST_PUSH_CONFIGS,
            Method::DeletePushConfig => methods::DELETE_PUSH_CONFIG,
            Method::GetExtendedAgentCard => methods::GET_EXTENDED_AGENT_CARD,
            Method::GetTaskTranscript => GET_TASK_TRANSCRIPT,
            Method::GetTaskAuditLog => GET_TASK_AUDIT_LOG,
        }
    }

    /// Whether the method is the task extension's rather than A2A's own.
    pub fn is_extension(self) -> bool {
        matches!(self, Method::GetTaskTranscript | Method::GetTaskAuditLog)
    }

    /// Whether the method answers a stream (SSE).
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }

    fn is_push_config(self) -> bool {
        matches!(
            self,
            Method::CreatePushConfig
                | Method::GetPushConfig
                | Method::ListPushConfigs
                | Method::DeletePushConfig
        )
    }
}

/// A decoded request, ready for the service.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operation {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(CancelTaskRequest),
    SubscribeToTask(SubscribeToTaskRequest),
    CreatePushConfig(TaskPushNotificationConfig),
    GetPushConfig(GetTaskPushNotificationConfigRequest),
    ListPushConfigs(ListTaskPushNotificationConfigsRequest),
    DeletePushConfig(DeleteTaskPushNotificationConfigRequest),
    GetExtendedAgentCard(GetExtendedAgentCardRequest),
    GetTaskTranscript(TaskRecordsRequest),
    GetTaskAuditLog(TaskRecordsRequest),
}

/// What the service answered: one JSON document (the `result`, serialized once from the
/// service's typed answer), or a stream of events.
pub(crate) enum Outcome {
    Unary(Box<RawValue>),
    Stream(EventStream),
}

/// Both bindings' step once the method is known: the [`preflight`], then the binding's `call`
/// with the request context. Any error is answered in the binding's framing (`error_reply`);
/// every answer echoes the activated extensions. Each call is counted and timed by method and
/// outcome (a stream: to its first byte).
///
/// The request's span (`a2a.request`) starts here, its parent the W3C trace context of the
/// request (`traceparent`), unless the host already set one (a Lambda function: the
/// invocation's X-Ray trace).
pub(crate) async fn preflight_and_call(
    api: &dyn A2aApi,
    method: Method,
    binding: &'static str,
    req: &Request<Bytes>,
    caller: &Caller,
    error_reply: impl Fn(&ProtocolError) -> Response<Body>,
    call: impl AsyncFnOnce(&RequestContext) -> Result<Response<Body>, ProtocolError>,
) -> Response<Body> {
    let started = telemetry::metrics::Timer::start();
    let span = tracing::debug_span!(
        "a2a.request",
        a2a.method = method.jsonrpc_name(),
        a2a.binding = binding,
        a2a.outcome = tracing::field::Empty,
        a2a.error = tracing::field::Empty,
    );
    let incoming = match telemetry::traces::current() {
        Some(_) => None,
        None => headers::trace_context(req.headers()),
    };
    let answer = telemetry::traces::scope(incoming, async {
        telemetry::traces::adopt(&span);
        // The status the error table gives, also in JSON-RPC (whose errors travel in a 200).
        let failed = |err: &ProtocolError| {
            span.record("a2a.outcome", "error");
            span.record("a2a.error", tracing::field::debug(err.kind));
            (error_reply(err), err.http_status())
        };
        let ctx = match preflight(
            api.agent_card(),
            method,
            req.headers(),
            req.uri().query(),
            caller,
        ) {
            Ok(ctx) => ctx,
            Err(err) => return failed(&err),
        };
        let (resp, status) = match call(&ctx).instrument(span.clone()).await {
            Ok(resp) => {
                span.record("a2a.outcome", "ok");
                let status = resp.status();
                (resp, status)
            }
            Err(err) => failed(&err),
        };
        (reply::with_extensions(resp, &ctx.extensions), status)
    });
    let (resp, status) = answer.await;
    telemetry::metrics::request(method.jsonrpc_name(), status.as_u16(), started);
    resp
}

/// The checks every A2A method gets before its parameters are read: `A2A-Version`,
/// `A2A-Extensions` against the card, `X-Participant-Id`, and the capability the method needs
/// (the card must declare `streaming`, `pushNotifications`, `extendedAgentCard` for those
/// methods). Returns the service's request context.
fn preflight(
    card: &AgentCard,
    method: Method,
    headers: &HeaderMap,
    query: Option<&str>,
    caller: &Caller,
) -> Result<RequestContext, ProtocolError> {
    headers::check_version(headers, query)?;
    let extensions = headers::activated_extensions(headers, card)?;
    let participant_header = headers::participant_header(headers)?;
    check_capability(card, method)?;
    Ok(RequestContext {
        participant_header,
        verified_principal: caller.verified_principal.clone(),
        extensions,
    })
}

fn check_capability(card: &AgentCard, method: Method) -> Result<(), ProtocolError> {
    let caps = &card.capabilities;
    if method.is_streaming() && caps.streaming != Some(true) {
        return Err(ProtocolError::new(
            ErrorKind::UnsupportedOperation,
            "streaming is not supported by this agent (capabilities.streaming is not true)",
        ));
    }
    if method.is_push_config() && caps.push_notifications != Some(true) {
        return Err(ProtocolError::new(
            ErrorKind::PushNotificationNotSupported,
            "push notifications are not supported by this agent",
        ));
    }
    if method == Method::GetExtendedAgentCard && caps.extended_agent_card != Some(true) {
        return Err(ProtocolError::new(
            ErrorKind::UnsupportedOperation,
            "this agent has no extended agent card (capabilities.extendedAgentCard is not true)",
        ));
    }
    Ok(())
}

/// Calls the service.
pub(crate) async fn dispatch(
    api: &dyn A2aApi,
    ctx: &RequestContext,
    op: Operation,
) -> Result<Outcome, ProtocolError> {
    match op {
        Operation::SendMessage(req) => unary(api.send_message(ctx, req).await?),
        Operation::SendStreamingMessage(req) => {
            Ok(Outcome::Stream(api.send_streaming_message(ctx, req).await?))
        }
        Operation::GetTask(req) => Ok(Outcome::Unary(api.get_task_json(ctx, req).await?)),
        Operation::ListTasks(req) => unary(api.list_tasks(ctx, req).await?),
        Operation::CancelTask(req) => unary(api.cancel_task(ctx, req).await?),
        Operation::SubscribeToTask(req) => {
            Ok(Outcome::Stream(api.subscribe_to_task(ctx, req).await?))
        }
        Operation::CreatePushConfig(req) => unary(api.create_push_config(ctx, req).await?),
        Operation::GetPushConfig(req) => unary(api.get_push_config(ctx, req).await?),
        Operation::ListPushConfigs(req) => unary(api.list_push_configs(ctx, req).await?),
        Operation::DeletePushConfig(req) => {
            api.delete_push_config(ctx, req).await?;
            // google.protobuf.Empty
            unary(serde_json::Map::new())
        }
        Operation::GetExtendedAgentCard(req) => unary(api.get_extended_agent_card(ctx, req).await?),
        Operation::GetTaskTranscript(req) => unary(api.get_task_transcript(ctx, req).await?),
        Operation::GetTaskAuditLog(req) => unary(api.get_task_audit_log(ctx, req).await?),
    }
}

fn unary<T: Serialize>(result: T) -> Result<Outcome, ProtocolError> {
    serde_json::value::to_raw_value(&result)
        .map(Outcome::Unary)
        .map_err(|e| {
            tracing::error!(error = %e, "serializing a service result failed");
            ProtocolError::internal()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jsonrpc_name_round_trips() {
        for method in Method::ALL {
            assert_eq!(Method::from_jsonrpc(method.jsonrpc_name()), Some(method));
            // A2A's own names, and the task extension's, which A2A does not know.
            assert_eq!(
                methods::is_valid(method.jsonrpc_name()),
                !method.is_extension(),
                "{method:?}"
            );
            assert_eq!(
                method.is_streaming(),
                methods::is_streaming(method.jsonrpc_name())
            );
        }
        for old in [
            "message/send",
            "tasks/get",
            "sendMessage",
            "sendmessage",
            "getTaskTranscript",
            "tasks/transcript",
            "",
        ] {
            assert_eq!(Method::from_jsonrpc(old), None, "{old}");
        }
    }

    #[test]
    fn capabilities_gate_methods() {
        let mut card = crate::testkit::card();
        card.capabilities.streaming = None;
        card.capabilities.push_notifications = Some(false);
        card.capabilities.extended_agent_card = None;
        let unsupported = Some(ErrorKind::UnsupportedOperation);
        let no_push = Some(ErrorKind::PushNotificationNotSupported);
        let cases = [
            (Method::SendStreamingMessage, unsupported),
            (Method::SubscribeToTask, unsupported),
            (Method::CreatePushConfig, no_push),
            (Method::DeletePushConfig, no_push),
            (Method::GetExtendedAgentCard, unsupported),
            (Method::SendMessage, None),
            (Method::GetTask, None),
        ];
        for (method, refused) in cases {
            let kind = check_capability(&card, method).err().map(|e| e.kind);
            assert_eq!(kind, refused, "{method:?}");
        }
    }
}
