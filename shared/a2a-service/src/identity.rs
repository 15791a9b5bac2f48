//! Who is calling (SPEC sections 4 and 9).
//!
//! Deployed behind an authorizer, the verified principal is the identity, and a message whose
//! `participant_id` says otherwise is refused. Otherwise identity is self-asserted: the
//! message's `metadata.participant_id` (a string), else the `X-Participant-Id` header, else the
//! operator's default participant, else the request is refused.
//!
//! Whatever its source, an identity obeys the id limits of [`task_core::ids`], and nobody may
//! act as the service's own agent: its id is reserved (a verified principal equal to it is
//! refused too, since that would be an identity provider minting the agent's identity). A
//! self-asserted caller is never taken for an agent participant of a task ([`authorize`]):
//! acting as an agent needs a verified identity.

use a2a::Message;
use task_core::extension::{Participant, ParticipantKind, TaskExtension};
use task_core::ids::{self, IdKind};
use task_core::policy::{self, AccessDenied, Action};

use crate::api::RequestContext;
use crate::error::ServiceError;

/// The key of the sender in `Message.metadata`.
pub const PARTICIPANT_KEY: &str = "participant_id";

/// A caller: the participant id it acts as, and whether an authorizer verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub id: String,
    pub verified: bool,
}

impl Who {
    pub fn as_str(&self) -> &str {
        &self.id
    }
}

/// The participant a message asserts (a non-string value reads as absent).
pub fn asserted_by(message: &Message) -> Option<&str> {
    message.metadata.as_ref()?.get(PARTICIPANT_KEY)?.as_str()
}

/// The sender of `message`.
pub fn sender(
    ctx: &RequestContext,
    message: &Message,
    default: Option<&str>,
    agent_id: &str,
) -> Result<Who, ServiceError> {
    let asserted = asserted_by(message);
    if let Some(principal) = &ctx.verified_principal {
        if asserted.is_some_and(|claimed| claimed != principal) {
            return Err(ServiceError::InvalidParams(
                "message.metadata.participant_id does not match the authenticated principal"
                    .to_owned(),
            ));
        }
        return verified(principal, agent_id);
    }
    let (field, id) = match (asserted, &ctx.participant_header, default) {
        (Some(id), _, _) => ("message.metadata.participant_id", id),
        (None, Some(id), _) => ("the X-Participant-Id header", id.as_str()),
        (None, None, Some(id)) => ("the default participant", id),
        (None, None, None) => return Err(no_participant()),
    };
    self_asserted(field, id, agent_id)
}

/// The caller of a request without a message (reads, cancel, push configs).
pub fn caller(
    ctx: &RequestContext,
    default: Option<&str>,
    agent_id: &str,
) -> Result<Who, ServiceError> {
    if let Some(principal) = &ctx.verified_principal {
        return verified(principal, agent_id);
    }
    match (&ctx.participant_header, default) {
        (Some(id), _) => self_asserted("the X-Participant-Id header", id, agent_id),
        (None, Some(id)) => self_asserted("the default participant", id, agent_id),
        (None, None) => Err(no_participant()),
    }
}

fn verified(principal: &str, agent_id: &str) -> Result<Who, ServiceError> {
    check(
        IdKind::Participant,
        "the authenticated principal",
        principal,
    )?;
    if principal == agent_id {
        return Err(ServiceError::InvalidParams(
            "the authenticated principal is the service's own agent id, which no caller may use"
                .to_owned(),
        ));
    }
    Ok(Who {
        id: principal.to_owned(),
        verified: true,
    })
}

fn self_asserted(field: &str, id: &str, agent_id: &str) -> Result<Who, ServiceError> {
    check(IdKind::Participant, field, id)?;
    if id == agent_id {
        return Err(ServiceError::InvalidParams(format!(
            "participant id {id:?} is reserved for the service's own agent"
        )));
    }
    Ok(Who {
        id: id.to_owned(),
        verified: false,
    })
}

/// A client-sent id within the limits of [`task_core::ids`], or -32602 naming the field.
pub fn check(kind: IdKind, field: &str, value: &str) -> Result<(), ServiceError> {
    ids::check(kind, field, value).map_err(|e| ServiceError::InvalidParams(e.to_string()))
}

/// May `who` do `action` on the task? As [`policy::authorize`], except that a self-asserted
/// caller is not the agent participant whose id it claims: it is a stranger to the task.
pub fn authorize<'t>(
    task: &'t TaskExtension,
    who: &Who,
    action: Action,
) -> Result<&'t Participant, AccessDenied> {
    let participant = policy::authorize(task, &who.id, action)?;
    if participant.kind == ParticipantKind::Agent && !who.verified {
        return Err(AccessDenied::NotParticipant);
    }
    Ok(participant)
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

    const AGENT: &str = "tiny-harness";

    fn id(who: Result<Who, ServiceError>) -> Result<String, ServiceError> {
        who.map(|w| w.id)
    }

    #[test]
    fn self_asserted_order() {
        let send = |c: &RequestContext, m: &Message, d| id(sender(c, m, d, AGENT));
        assert_eq!(
            send(
                &ctx(Some("hdr"), None),
                &message(Some(json!("alice"))),
                Some("dflt")
            ),
            Ok("alice".into())
        );
        assert_eq!(
            send(&ctx(Some("hdr"), None), &message(None), Some("dflt")),
            Ok("hdr".into())
        );
        assert_eq!(
            send(&ctx(None, None), &message(None), Some("dflt")),
            Ok("dflt".into())
        );
        // A number is not a participant id.
        assert_eq!(
            send(&ctx(None, None), &message(Some(json!(7))), Some("dflt")),
            Ok("dflt".into())
        );
        assert_eq!(
            send(&ctx(None, None), &message(None), None),
            Err(ServiceError::InvalidParams(
                "no participant asserted".into()
            ))
        );
        let who = sender(&ctx(Some("hdr"), None), &message(None), None, AGENT).expect("ok");
        assert!(!who.verified);
    }

    #[test]
    fn a_verified_principal_wins_and_may_not_be_contradicted() {
        let who = sender(
            &ctx(Some("hdr"), Some("sub-1")),
            &message(None),
            None,
            AGENT,
        );
        assert_eq!(
            who,
            Ok(Who {
                id: "sub-1".into(),
                verified: true
            })
        );
        assert_eq!(
            id(sender(
                &ctx(None, Some("sub-1")),
                &message(Some(json!("sub-1"))),
                None,
                AGENT
            )),
            Ok("sub-1".into())
        );
        let err = sender(
            &ctx(None, Some("sub-1")),
            &message(Some(json!("mallory"))),
            None,
            AGENT,
        )
        .expect_err("refused");
        assert!(
            err.to_string()
                .contains("does not match the authenticated principal")
        );
        assert_eq!(
            id(caller(&ctx(Some("hdr"), Some("sub-1")), Some("d"), AGENT)),
            Ok("sub-1".into())
        );
        assert_eq!(
            id(caller(&ctx(Some("hdr"), None), Some("d"), AGENT)),
            Ok("hdr".into())
        );
        assert_eq!(
            id(caller(&ctx(None, None), Some("d"), AGENT)),
            Ok("d".into())
        );
        assert!(caller(&ctx(None, None), None, AGENT).is_err());
    }

    #[test]
    fn nobody_is_the_service_agent() {
        let reserved = |r: Result<Who, ServiceError>| {
            let err = r.expect_err("refused").to_string();
            assert!(
                err.contains("agent id") || err.contains("own agent"),
                "{err}"
            );
        };
        reserved(sender(
            &ctx(None, None),
            &message(Some(json!(AGENT))),
            None,
            AGENT,
        ));
        reserved(sender(&ctx(Some(AGENT), None), &message(None), None, AGENT));
        reserved(sender(&ctx(None, None), &message(None), Some(AGENT), AGENT));
        reserved(caller(&ctx(Some(AGENT), None), None, AGENT));
        // Not even with a verified identity: an identity provider cannot mint the agent.
        reserved(caller(&ctx(None, Some(AGENT)), None, AGENT));
        reserved(sender(&ctx(None, Some(AGENT)), &message(None), None, AGENT));
    }

    #[test]
    fn ids_are_bounded_and_never_blank() {
        for bad in ["", "  ", "a\nb", &"x".repeat(257)] {
            let err = sender(&ctx(None, None), &message(Some(json!(bad))), None, AGENT)
                .expect_err("refused")
                .to_string();
            assert!(
                err.starts_with("invalid id: message.metadata.participant_id"),
                "{bad:?}: {err}"
            );
            let err = caller(&ctx(Some(bad), None), None, AGENT)
                .expect_err("refused")
                .to_string();
            assert!(err.contains("X-Participant-Id"), "{err}");
            let err = caller(&ctx(None, Some(bad)), None, AGENT)
                .expect_err("refused")
                .to_string();
            assert!(err.contains("authenticated principal"), "{err}");
        }
    }

    #[test]
    fn a_self_asserted_caller_is_not_an_agent_participant() {
        let mut task = TaskExtension::new("n", "g");
        task.participants = vec![
            Participant::new(
                "alice",
                ParticipantKind::Human,
                task_core::extension::Role::Reporter,
            ),
            Participant::new(
                "billing-bot",
                ParticipantKind::Agent,
                task_core::extension::Role::Assignee,
            ),
        ];
        let claim = |verified| Who {
            id: "billing-bot".into(),
            verified,
        };
        assert_eq!(
            authorize(&task, &claim(false), Action::Read).map(|p| p.id.as_str()),
            Err(AccessDenied::NotParticipant)
        );
        assert!(authorize(&task, &claim(true), Action::Read).is_ok());
        let alice = Who {
            id: "alice".into(),
            verified: false,
        };
        assert!(authorize(&task, &alice, Action::Send).is_ok());
    }
}
