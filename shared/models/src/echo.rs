//! `echo`: the offline default. Answers with the participant's last text and calls no tool, so
//! the whole flow works with no model at all.

use async_trait::async_trait;

use crate::{Model, ModelError, ModelReply, ModelRequest};

#[derive(Debug, Clone, Copy, Default)]
pub struct EchoModel;

#[async_trait]
impl Model for EchoModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        Ok(ModelReply::text(request.last_user_text().unwrap_or("")))
    }
}
