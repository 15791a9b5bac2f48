//! Bedrock's failures (Converse, ConverseStream and the stream's own exception events) as
//! [`ModelError`]s: by the modeled exception, else by the error's code, else by HTTP status.

use aws_sdk_bedrockruntime::config::http::HttpResponse as Response;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseError;
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_smithy_types::event_stream::RawMessage;

use super::ERROR_MESSAGE_CHARS;
use crate::ModelError;
use crate::text::{error_chain, truncate};

/// What a modeled exception means for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Throttled,
    Unavailable,
    TimedOut,
    /// `ValidationException`: refused, or a context overflow when it says the input is too long.
    Invalid,
    Refused,
}

pub(super) fn converse_kind(error: &ConverseError) -> Option<Kind> {
    Some(match error {
        ConverseError::ThrottlingException(_) => Kind::Throttled,
        ConverseError::ServiceUnavailableException(_)
        | ConverseError::ModelNotReadyException(_)
        | ConverseError::InternalServerException(_) => Kind::Unavailable,
        ConverseError::ModelTimeoutException(_) => Kind::TimedOut,
        ConverseError::ValidationException(_) => Kind::Invalid,
        ConverseError::AccessDeniedException(_)
        | ConverseError::ResourceNotFoundException(_)
        | ConverseError::ModelErrorException(_) => Kind::Refused,
        _ => return None,
    })
}

pub(super) fn converse_stream_kind(error: &ConverseStreamError) -> Option<Kind> {
    Some(match error {
        ConverseStreamError::ThrottlingException(_) => Kind::Throttled,
        ConverseStreamError::ServiceUnavailableException(_)
        | ConverseStreamError::ModelNotReadyException(_)
        | ConverseStreamError::InternalServerException(_)
        | ConverseStreamError::ModelStreamErrorException(_) => Kind::Unavailable,
        ConverseStreamError::ModelTimeoutException(_) => Kind::TimedOut,
        ConverseStreamError::ValidationException(_) => Kind::Invalid,
        ConverseStreamError::AccessDeniedException(_)
        | ConverseStreamError::ResourceNotFoundException(_)
        | ConverseStreamError::ModelErrorException(_) => Kind::Refused,
        _ => return None,
    })
}

/// An exception event inside the stream (after the 200).
pub(super) fn stream_event_kind(error: &ConverseStreamOutputError) -> Option<Kind> {
    Some(match error {
        ConverseStreamOutputError::ThrottlingException(_) => Kind::Throttled,
        ConverseStreamOutputError::ServiceUnavailableException(_)
        | ConverseStreamOutputError::InternalServerException(_)
        | ConverseStreamOutputError::ModelStreamErrorException(_) => Kind::Unavailable,
        ConverseStreamOutputError::ValidationException(_) => Kind::Invalid,
        _ => return None,
    })
}

/// The HTTP status of a response, where there is one.
pub(super) trait Status {
    fn status(&self) -> Option<u16>;
}

impl Status for Response {
    fn status(&self) -> Option<u16> {
        Some(self.status().as_u16())
    }
}

impl Status for RawMessage {
    fn status(&self) -> Option<u16> {
        None
    }
}

/// Whether a `ValidationException`'s message says the prompt is longer than the model takes
/// (Claude: "Input is too long for requested model", "prompt is too long: … tokens > …
/// maximum"; Llama: "maximum context length"; Titan: "Too many input tokens").
fn says_too_long(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "too long",
        "context length",
        "context window",
        "too many input tokens",
        "input tokens exceed",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// A failed call (see the module doc of [`bedrock`](super)).
pub(super) fn sdk_error<E, R>(error: SdkError<E, R>, kind: fn(&E) -> Option<Kind>) -> ModelError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: Status + std::fmt::Debug,
{
    match &error {
        SdkError::ServiceError(service) => {
            let err = service.err();
            let code = err.code().unwrap_or("an unnamed error");
            let message = format!(
                "{code}: {}",
                truncate(err.message().unwrap_or("(no message)"), ERROR_MESSAGE_CHARS)
            );
            match kind(err) {
                Some(Kind::Throttled) => ModelError::Throttled(message),
                Some(Kind::Unavailable) => ModelError::Unavailable(message),
                Some(Kind::TimedOut) => ModelError::TimedOut(message),
                Some(Kind::Invalid) if says_too_long(&message) => {
                    ModelError::ContextOverflow(message)
                }
                Some(Kind::Invalid | Kind::Refused) => ModelError::Rejected(message),
                // Errors this SDK version does not model, by code, else by HTTP status.
                None => match (code, service.raw().status()) {
                    ("ServiceQuotaExceededException" | "ThrottlingException", _)
                    | (_, Some(429)) => ModelError::Throttled(message),
                    (_, Some(408 | 504)) => ModelError::TimedOut(message),
                    (_, Some(500..=599)) => ModelError::Unavailable(message),
                    // A success whose body the SDK could not read.
                    (_, Some(200..=299)) => ModelError::InvalidReply(format!(
                        "the Converse reply cannot be read: {}",
                        error_chain(&error)
                    )),
                    _ => ModelError::Rejected(message),
                },
            }
        }
        SdkError::TimeoutError(_) => ModelError::TimedOut(error_chain(&error)),
        SdkError::DispatchFailure(failure) if failure.is_timeout() => {
            ModelError::TimedOut(error_chain(&error))
        }
        SdkError::DispatchFailure(_) => ModelError::Unavailable(error_chain(&error)),
        SdkError::ResponseError(response) => match response.raw().status() {
            Some(status @ (408 | 504)) => {
                ModelError::TimedOut(format!("HTTP {status}: {}", error_chain(&error)))
            }
            Some(status @ 500..) => {
                ModelError::Unavailable(format!("HTTP {status}: {}", error_chain(&error)))
            }
            Some(status) => {
                ModelError::InvalidReply(format!("HTTP {status}: {}", error_chain(&error)))
            }
            // A stream whose frames stopped making sense: most often a connection cut short.
            None => {
                ModelError::Unavailable(format!("the event stream broke: {}", error_chain(&error)))
            }
        },
        SdkError::ConstructionFailure(_) => ModelError::Misconfigured(format!(
            "cannot build the Converse request: {}",
            error_chain(&error)
        )),
        _ => ModelError::Rejected(error_chain(&error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_messages_about_length_are_overflows() {
        for message in [
            "ValidationException: Input is too long for requested model.",
            "ValidationException: prompt is too long: 210000 tokens > 200000 maximum",
            "ValidationException: This model's maximum context length is 8192 tokens.",
            "ValidationException: Too many input tokens. Max input tokens: 8192",
        ] {
            assert!(says_too_long(message), "{message}");
        }
        assert!(!says_too_long(
            "ValidationException: The provided model identifier is invalid."
        ));
    }
}
