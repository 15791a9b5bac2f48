//! The binary framing of `application/vnd.amazon.eventstream` (what ConverseStream answers),
//! written for the stub: each message is its total and header lengths, a CRC32 of those, the
//! headers (name, type 7 = string, value), the payload, and a CRC32 of all before it.

#![allow(dead_code)]

use serde_json::Value;

/// One message with these string headers and payload.
pub fn message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut encoded_headers = Vec::new();
    for (name, value) in headers {
        encoded_headers.push(u8::try_from(name.len()).unwrap());
        encoded_headers.extend_from_slice(name.as_bytes());
        encoded_headers.push(7);
        encoded_headers.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
        encoded_headers.extend_from_slice(value.as_bytes());
    }
    let total = 12 + encoded_headers.len() + payload.len() + 4;
    let mut frame = Vec::with_capacity(total);
    frame.extend_from_slice(&u32::try_from(total).unwrap().to_be_bytes());
    frame.extend_from_slice(&u32::try_from(encoded_headers.len()).unwrap().to_be_bytes());
    let prelude_crc = crc32fast::hash(&frame);
    frame.extend_from_slice(&prelude_crc.to_be_bytes());
    frame.extend_from_slice(&encoded_headers);
    frame.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&frame);
    frame.extend_from_slice(&message_crc.to_be_bytes());
    frame
}

/// A ConverseStream event (`messageStart`, `contentBlockDelta`, `metadata`…) with its JSON.
pub fn event(event_type: &str, payload: Value) -> Vec<u8> {
    message(
        &[
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// An exception in the stream (`throttlingException`, `validationException`…).
pub fn exception(exception_type: &str, message: &str) -> Vec<u8> {
    self::message(
        &[
            (":exception-type", exception_type),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        serde_json::json!({ "message": message })
            .to_string()
            .as_bytes(),
    )
}
