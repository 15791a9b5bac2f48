//! A ConverseStream call's events read as they arrive: text deltas passed on piece by piece,
//! tool uses assembled from their input pieces, the usage from the `metadata` event; the
//! reply is the one Converse would give.

use aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_sdk_bedrockruntime::types::{
    ContentBlockDelta, ContentBlockStart, ConverseStreamOutput, TokenUsage,
};
use serde_json::{Map, Value};

use super::errors::{sdk_error, stream_event_kind};
use super::usage;
use crate::{ModelError, ModelReply, TextSink, ToolCall};

/// One content block while its deltas arrive.
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
}

/// Reads the stream until it ends, passing text to `sink`.
pub(super) async fn read(
    mut stream: EventReceiver<ConverseStreamOutput, ConverseStreamOutputError>,
    sink: &dyn TextSink,
) -> Result<ModelReply, ModelError> {
    // By `contentBlockIndex`; reasoning blocks leave no entry.
    let mut blocks: Vec<(i32, Block)> = Vec::new();
    let mut token_usage: Option<TokenUsage> = None;
    let mut stopped = false;
    while let Some(event) = stream
        .recv()
        .await
        .map_err(|e| sdk_error(e, stream_event_kind))?
    {
        match event {
            ConverseStreamOutput::ContentBlockStart(start) => {
                if let Some(ContentBlockStart::ToolUse(tool_use)) = start.start {
                    blocks.push((
                        start.content_block_index,
                        Block::ToolUse {
                            id: tool_use.tool_use_id,
                            name: tool_use.name,
                            input: String::new(),
                        },
                    ));
                }
            }
            ConverseStreamOutput::ContentBlockDelta(delta) => {
                let index = delta.content_block_index;
                let block = blocks.iter_mut().find(|(i, _)| *i == index);
                match (delta.delta, block) {
                    (Some(ContentBlockDelta::Text(piece)), block) => {
                        if piece.is_empty() {
                            continue;
                        }
                        match block {
                            Some((_, Block::Text(text))) => {
                                sink.text(&piece);
                                text.push_str(&piece);
                            }
                            _ => {
                                // Text blocks are joined by a line break, as in Converse's reply.
                                if blocks.iter().any(|(_, b)| matches!(b, Block::Text(_))) {
                                    sink.text("\n");
                                }
                                sink.text(&piece);
                                blocks.push((index, Block::Text(piece)));
                            }
                        }
                    }
                    (
                        Some(ContentBlockDelta::ToolUse(piece)),
                        Some((_, Block::ToolUse { input, .. })),
                    ) => input.push_str(&piece.input),
                    // Reasoning, citations and the rest are not part of the reply.
                    _ => {}
                }
            }
            ConverseStreamOutput::MessageStop(stop) => {
                tracing::debug!(stop_reason = ?stop.stop_reason, "bedrock stream stopped");
                stopped = true;
            }
            ConverseStreamOutput::Metadata(metadata) => token_usage = metadata.usage,
            _ => {}
        }
    }
    if !stopped {
        return Err(ModelError::Unavailable(
            "the ConverseStream ended before its messageStop".into(),
        ));
    }
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    blocks.sort_by_key(|(index, _)| *index);
    for (_, block) in blocks {
        match block {
            Block::Text(text) => texts.push(text),
            Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: tool_input(&input),
            }),
        }
    }
    let text = texts.join("\n");
    Ok(ModelReply {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: token_usage.as_ref().map(usage),
    })
}

/// A tool use's assembled input: JSON, `{}` when empty, kept as a string when it is not
/// JSON (the loop's schema check then tells the model), as Converse's own parsing would.
fn tool_input(input: &str) -> Value {
    if input.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(input).unwrap_or_else(|_| Value::String(input.to_owned()))
}
