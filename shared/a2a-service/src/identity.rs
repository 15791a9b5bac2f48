//! Who is calling (SPEC section 4).
//!
//! Deployed behind an authorizer, the verified principal is the identity, and a message whose
//! `participant_id` says otherwise is refused. Otherwise identity is self-asserted: the
//! message's `metadata.participant_id` (a string), else the `X-Participant-Id` header, else the
//! operator's default participant, else the request is refused.

use a2a::Message;

use crate::api::RequestContext;
use crate::error::ServiceError;

/// The key of the sender in `Message.metadata`.
pub const PARTICIPANT_KEY: &str = "participant_id";

/// The participant a message asserts (a non-string value reads as absent).
pub fn asserted_by(message: &Message) -> Option<&str> {
    message.metadata.as_ref()?.get(PARTICIPANT_KEY)?.as_str()
}

/// The sender of `message`.
pub fn sender(
    ctx: &RequestContext,
    message: &Message,
    default: Option<&str>,
) -> Result<String, ServiceError> {
    let asserted = asserted_by(message);
    if let Some(principal) = &ctx.verified_principal {
        return match asserted {
            Some(claimed) if claimed != principal => Err(ServiceError::InvalidParams(
                "message.metadata.participant_id does not match the authenticated principal"
                    .to_owned(),
            )),
            _ => Ok(principal.clone()),
        };
    }
    asserted
        .or(ctx.participant_header.as_deref())
        .or(default)
        .map(str::to_owned)
        .ok_or_else(no_participant)
}

/// The caller of a request without a message (reads, cancel, push configs).
pub fn caller(ctx: &RequestContext, default: Option<&str>) -> Result<String, ServiceError> {
    ctx.verified_principal
        .as_deref()
        .or(ctx.participant_header.as_deref())
        .or(default)
        .map(str::to_owned)
        .ok_or_else(no_participant)
}

fn no_participant() -> ServiceError {
    ServiceError::InvalidParams("no participant asserted".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::{Part, Role};
    use serde_json::json;
    use std::collections::HashMap;

    fn message(participant: Option<serde_json::Value>) -> Message {
        let mut m = Message::new(Role::User, vec![Part::text("hi")]);
        m.metadata = participant.map(|p| HashMap::from([(PARTICIPANT_KEY.to_owned(), p)]));
        m
    }

    fn ctx(header: Option<&str>, principal: Option<&str>) -> RequestContext {
        RequestContext {
            participant_header: header.map(str::to_owned),
            verified_principal: principal.map(str::to_owned),
            extensions: vec![],
        }
    }

    #[test]
    fn self_asserted_order() {
        assert_eq!(
            sender(
                &ctx(Some("hdr"), None),
                &message(Some(json!("alice"))),
                Some("dflt")
            ),
            Ok("alice".into())
        );
        assert_eq!(
            sender(&ctx(Some("hdr"), None), &message(None), Some("dflt")),
            Ok("hdr".into())
        );
        assert_eq!(
            sender(&ctx(None, None), &message(None), Some("dflt")),
            Ok("dflt".into())
        );
        // A number is not a participant id.
        assert_eq!(
            sender(&ctx(None, None), &message(Some(json!(7))), Some("dflt")),
            Ok("dflt".into())
        );
        assert_eq!(
            sender(&ctx(None, None), &message(None), None),
            Err(ServiceError::InvalidParams(
                "no participant asserted".into()
            ))
        );
    }

    #[test]
    fn a_verified_principal_wins_and_may_not_be_contradicted() {
        assert_eq!(
            sender(&ctx(Some("hdr"), Some("sub-1")), &message(None), None),
            Ok("sub-1".into())
        );
        assert_eq!(
            sender(
                &ctx(None, Some("sub-1")),
                &message(Some(json!("sub-1"))),
                None
            ),
            Ok("sub-1".into())
        );
        let err = sender(
            &ctx(None, Some("sub-1")),
            &message(Some(json!("mallory"))),
            None,
        )
        .expect_err("refused");
        assert!(
            err.to_string()
                .contains("does not match the authenticated principal")
        );
        assert_eq!(
            caller(&ctx(Some("hdr"), Some("sub-1")), Some("d")),
            Ok("sub-1".into())
        );
        assert_eq!(caller(&ctx(Some("hdr"), None), Some("d")), Ok("hdr".into()));
        assert_eq!(caller(&ctx(None, None), Some("d")), Ok("d".into()));
        assert!(caller(&ctx(None, None), None).is_err());
    }
}
