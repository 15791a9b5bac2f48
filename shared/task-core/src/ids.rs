//! The limits on every id a client sends (SPEC section 9: reserved and bounded identities).
//!
//! Participant, message, task, context and push config ids all obey one rule: 1 to
//! [`MAX_ID_BYTES`] bytes of UTF-8, no control characters, no white space at either end. The
//! limit keeps what the store writes per request bounded (an id travels into keys, indexes,
//! audit records and every event), and the character rule keeps ids printable in logs,
//! headers and keys. A blank id (empty or only white space) is never an identity.

use std::fmt;

use crate::error::DomainError;

/// The longest id, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Which id a value is (for the error text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Participant,
    Message,
    Task,
    Context,
    PushConfig,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdKind::Participant => "participant id",
            IdKind::Message => "message id",
            IdKind::Task => "task id",
            IdKind::Context => "context id",
            IdKind::PushConfig => "push notification config id",
        })
    }
}

/// Why an id is refused.
fn problem(value: &str) -> Option<&'static str> {
    if value.trim().is_empty() {
        Some("is blank")
    } else if value.len() > MAX_ID_BYTES {
        Some("is longer than 256 bytes")
    } else if value.chars().any(char::is_control) {
        Some("contains a control character")
    } else if value.trim() != value {
        Some("starts or ends with white space")
    } else {
        None
    }
}

/// Checks a client-sent id; `field` names it in the refusal (e.g. `message.messageId`).
pub fn check(kind: IdKind, field: &str, value: &str) -> Result<(), DomainError> {
    match problem(value) {
        None => Ok(()),
        Some(why) => Err(DomainError::InvalidId(format!(
            "{field} {why} (a {kind} is 1 to {MAX_ID_BYTES} bytes, no control characters, \
             no white space at either end)"
        ))),
    }
}

/// Whether `value` is an acceptable id of any kind.
pub fn is_valid(value: &str) -> bool {
    problem(value).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        for ok in [
            "a",
            "alice@example.com",
            "auth0|5f1c",
            "t-1.2.3",
            "名前",
            &"x".repeat(256),
        ] {
            assert!(check(IdKind::Participant, "p", ok).is_ok(), "{ok:?}");
        }
        for (bad, why) in [
            ("", "is blank"),
            ("   ", "is blank"),
            (&"x".repeat(257), "longer than 256 bytes"),
            ("a\nb", "control character"),
            ("a\u{0}", "control character"),
            (" alice", "white space"),
            ("alice\u{3000}", "white space"),
        ] {
            let err = check(IdKind::Message, "message.messageId", bad)
                .expect_err("refused")
                .to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
            assert!(err.starts_with("invalid id: message.messageId"), "{err}");
        }
        // 256 bytes of two-byte characters is 128 characters: the limit is in bytes.
        assert!(is_valid(&"é".repeat(128)));
        assert!(!is_valid(&"é".repeat(129)));
    }
}
