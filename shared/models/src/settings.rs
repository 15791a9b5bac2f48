//! Reading a catalog entry's provider settings (`ModelSpec.settings`): a setting of the wrong
//! type is a configuration error, never silently ignored.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::ModelError;

/// The settings of one catalog entry, for one provider.
pub(crate) struct Settings<'a> {
    model_id: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Settings<'a> {
    pub(crate) fn new(model_id: &'a str, map: &'a Map<String, Value>) -> Self {
        Self { model_id, map }
    }

    fn wrong(&self, key: &str, expected: &str) -> ModelError {
        ModelError::Misconfigured(format!(
            "model {:?}: the setting {key:?} must be {expected}",
            self.model_id
        ))
    }

    /// A non-empty string, when set.
    pub(crate) fn string(&self, key: &str) -> Result<Option<&'a str>, ModelError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
            Some(_) => Err(self.wrong(key, "a non-empty string")),
        }
    }

    /// A positive integer that fits an `i32` (what both providers' token limits accept), when
    /// set.
    pub(crate) fn positive_int(&self, key: &str) -> Result<Option<u32>, ModelError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .filter(|n| (1..=i32::MAX as u64).contains(n))
                .map(|n| Some(n as u32))
                .ok_or_else(|| self.wrong(key, "a positive integer")),
        }
    }

    /// A positive number of seconds (fractions allowed), when set.
    pub(crate) fn seconds(&self, key: &str) -> Result<Option<Duration>, ModelError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|s| *s > 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a positive number of seconds")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn settings_of_the_wrong_type_are_misconfigurations() {
        let m = map(json!({
            "s": "x", "blank": " ", "n": 12, "zero": 0, "neg": -1, "big": 1u64 << 40,
            "f": 0.25, "null": null
        }));
        let s = Settings::new("m", &m);
        assert_eq!(s.string("s").unwrap(), Some("x"));
        assert_eq!(s.string("absent").unwrap(), None);
        assert_eq!(s.string("null").unwrap(), None);
        assert!(matches!(
            s.string("blank"),
            Err(ModelError::Misconfigured(_))
        ));
        assert!(matches!(s.string("n"), Err(ModelError::Misconfigured(_))));
        assert_eq!(s.positive_int("n").unwrap(), Some(12));
        for bad in ["zero", "neg", "big", "f", "s"] {
            assert!(
                matches!(s.positive_int(bad), Err(ModelError::Misconfigured(_))),
                "{bad}"
            );
        }
        assert_eq!(s.seconds("f").unwrap(), Some(Duration::from_millis(250)));
        assert_eq!(s.seconds("n").unwrap(), Some(Duration::from_secs(12)));
        for bad in ["zero", "neg", "s"] {
            assert!(
                matches!(s.seconds(bad), Err(ModelError::Misconfigured(_))),
                "{bad}"
            );
        }
        assert_eq!(
            s.string("n").unwrap_err(),
            ModelError::Misconfigured(
                "model \"m\": the setting \"n\" must be a non-empty string".into()
            )
        );
    }
}
