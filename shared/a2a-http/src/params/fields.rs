//! Reading one field of a request's JSON object: ProtoJSON leniencies (`null` is unset,
//! proto field names, integers as strings, enums as numbers) and the field violations a
//! wrong value adds to [`Check`].

use std::collections::HashMap;

use a2a::errordetails::FieldViolation;
use a2a::{Role, TaskState};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::error::ProtocolError;

pub(super) fn path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// A member that is present and not `null` (ProtoJSON: `null` is the default value). Like
/// every ProtoJSON parser, this accepts the proto field name (`history_length`) as well as
/// the JSON name (`historyLength`) it is asked for; the JSON name wins when both are sent.
pub(super) fn member<'o>(obj: &'o Map<String, Value>, key: &str) -> Option<&'o Value> {
    let present = |k: &str| obj.get(k).filter(|v| !v.is_null());
    present(key).or_else(|| proto_name(key).and_then(|k| present(&k)))
}

/// The proto field name of a lowerCamelCase JSON name (`taskId` → `task_id`); `None` when
/// they are the same.
pub(super) fn proto_name(json_name: &str) -> Option<String> {
    if !json_name.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut name = String::with_capacity(json_name.len() + 4);
    for c in json_name.chars() {
        if c.is_ascii_uppercase() {
            name.push('_');
            name.push(c.to_ascii_lowercase());
        } else {
            name.push(c);
        }
    }
    Some(name)
}

/// Collects field violations while reading; [`Check::finish`] turns them into -32602.
#[derive(Default)]
pub(super) struct Check {
    pub(super) violations: Vec<FieldViolation>,
}

impl Check {
    pub(super) fn violation(&mut self, field: String, description: &str) {
        self.violations.push(FieldViolation {
            field,
            description: description.to_string(),
        });
    }

    pub(super) fn finish(self) -> Result<(), ProtocolError> {
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(ProtocolError::invalid_params(self.violations))
        }
    }

    /// A member read by `parse`; a member that is present but that `parse` refuses is a
    /// violation saying what it `must` be.
    fn read<'o, T>(
        &mut self,
        obj: &'o Map<String, Value>,
        prefix: &str,
        key: &str,
        must: &str,
        parse: impl FnOnce(&'o Value) -> Option<T>,
    ) -> Option<T> {
        let parsed = parse(member(obj, key)?);
        if parsed.is_none() {
            self.violation(path(prefix, key), must);
        }
        parsed
    }

    /// An optional string; `""` counts as unset.
    pub(super) fn string(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<String> {
        match member(obj, key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            _ => {
                self.violation(path(prefix, key), "must be a string");
                None
            }
        }
    }

    /// A required, non-empty string (`""` on violation).
    pub(super) fn required_string(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> String {
        match member(obj, key) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) | None => {
                self.violation(path(prefix, key), "is required");
                String::new()
            }
            Some(_) => {
                self.violation(path(prefix, key), "must be a string");
                String::new()
            }
        }
    }

    /// An int32: a JSON integer (or integral float) or a decimal string.
    pub(super) fn int(&mut self, obj: &Map<String, Value>, prefix: &str, key: &str) -> Option<i32> {
        self.read(obj, prefix, key, "must be a 32-bit integer", as_int32)
    }

    pub(super) fn non_negative_int(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<i32> {
        let n = self.int(obj, prefix, key)?;
        if n < 0 {
            self.violation(path(prefix, key), "must not be negative");
            return None;
        }
        Some(n)
    }

    /// A bool: JSON `true`/`false`, or the strings `"true"`/`"false"` (query parameters).
    pub(super) fn boolean(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<bool> {
        self.read(obj, prefix, key, "must be true or false", as_bool)
    }

    pub(super) fn object<'o>(
        &mut self,
        obj: &'o Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<&'o Map<String, Value>> {
        self.read(obj, prefix, key, "must be an object", Value::as_object)
    }

    /// A `google.protobuf.Struct` (metadata).
    pub(super) fn struct_map(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<HashMap<String, Value>> {
        self.object(obj, prefix, key)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    pub(super) fn string_list(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        self.read(
            obj,
            prefix,
            key,
            "must be an array of strings",
            as_string_list,
        )
    }

    pub(super) fn timestamp(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<DateTime<Utc>> {
        let must = "must be an RFC 3339 timestamp, e.g. 2026-01-31T12:00:00Z";
        self.read(obj, prefix, key, must, as_timestamp)
    }

    /// A `TaskState` by name (or number); `TASK_STATE_UNSPECIFIED` means no filter.
    pub(super) fn task_state(
        &mut self,
        obj: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<TaskState> {
        let must = "must be a TaskState name, e.g. TASK_STATE_WORKING";
        let state = self.read(obj, prefix, key, must, as_task_state);
        state.filter(|state| !matches!(state, TaskState::Unspecified))
    }

    pub(super) fn role(&mut self, obj: &Map<String, Value>, prefix: &str, key: &str) -> Role {
        let role = match member(obj, key) {
            None => Some(Role::Unspecified),
            Some(Value::String(s)) => match s.as_str() {
                "ROLE_USER" => Some(Role::User),
                "ROLE_AGENT" => Some(Role::Agent),
                "ROLE_UNSPECIFIED" | "" => Some(Role::Unspecified),
                _ => None,
            },
            Some(Value::Number(n)) => match n.as_u64() {
                Some(0) => Some(Role::Unspecified),
                Some(1) => Some(Role::User),
                Some(2) => Some(Role::Agent),
                _ => None,
            },
            Some(_) => None,
        };
        match role {
            Some(Role::Unspecified) => {
                self.violation(path(prefix, key), "is required (ROLE_USER or ROLE_AGENT)");
                Role::Unspecified
            }
            Some(role) => role,
            None => {
                self.violation(path(prefix, key), "must be ROLE_USER or ROLE_AGENT");
                Role::Unspecified
            }
        }
    }
}

fn as_int32(value: &Value) -> Option<i32> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 1e10)
                    .map(|f| f as i64)
            })
            .and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<i32>().ok(),
        _ => None,
    }
}

fn as_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

fn as_string_list(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn as_timestamp(value: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(value.as_str()?.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A `TaskState` by name or number.
fn as_task_state(value: &Value) -> Option<TaskState> {
    match value {
        Value::String(s) => {
            serde_json::from_value::<TaskState>(Value::String(s.trim().to_string())).ok()
        }
        Value::Number(n) => match n.as_u64() {
            Some(0) => Some(TaskState::Unspecified),
            Some(1) => Some(TaskState::Submitted),
            Some(2) => Some(TaskState::Working),
            Some(3) => Some(TaskState::Completed),
            Some(4) => Some(TaskState::Failed),
            Some(5) => Some(TaskState::Canceled),
            Some(6) => Some(TaskState::InputRequired),
            Some(7) => Some(TaskState::Rejected),
            Some(8) => Some(TaskState::AuthRequired),
            _ => None,
        },
        _ => None,
    }
}
