//! JSON values as Smithy documents (tool inputs and schemas, extra request fields) and back.

use aws_smithy_types::{Document, Number};
use serde_json::Value;

/// JSON as a Smithy document.
pub fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect(),
        ),
    }
}

/// A Smithy document as JSON (a non-finite float, which JSON cannot hold, is `null`).
pub fn from_document(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(from_document).collect()),
        Document::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), from_document(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_and_json_convert_both_ways() {
        let value = json!({
            "s": "x", "t": true, "n": null, "pos": 7, "neg": -3, "f": 1.5,
            "big": u64::MAX, "list": [1, "two", {"three": [3.25]}], "empty": {}
        });
        let document = to_document(&value);
        match &document {
            Document::Object(map) => {
                assert_eq!(map["pos"], Document::Number(Number::PosInt(7)));
                assert_eq!(map["neg"], Document::Number(Number::NegInt(-3)));
                assert_eq!(map["f"], Document::Number(Number::Float(1.5)));
                assert_eq!(map["big"], Document::Number(Number::PosInt(u64::MAX)));
            }
            other => panic!("not an object: {other:?}"),
        }
        assert_eq!(from_document(&document), value);
        assert_eq!(
            from_document(&Document::Number(Number::Float(f64::INFINITY))),
            Value::Null
        );
    }
}
