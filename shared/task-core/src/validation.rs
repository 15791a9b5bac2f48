//! Reading an extension object: the schema first, then the rules the schema cannot state
//! (unique participant ids, a plan that is a DAG). Kept apart from the types in
//! [`crate::extension`] so that the types depend on nothing that depends on them.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use crate::error::DomainError;
use crate::extension::TaskExtension;
use crate::{plan, schemas};

impl TaskExtension {
    /// Reads an extension object: schema validation, then the rules the schema cannot state
    /// (unique participant ids, a plan that is a DAG). Every refusal is
    /// [`DomainError::InvalidExtension`].
    pub fn from_value(value: &Value) -> Result<Self, DomainError> {
        schemas::check(&schemas::validators().task_extension, value)
            .map_err(DomainError::InvalidExtension)?;
        let ext = TaskExtension::deserialize(value)
            .map_err(|e| DomainError::InvalidExtension(e.to_string()))?;
        ext.check_semantics()?;
        Ok(ext)
    }

    /// The rules the schema cannot express.
    pub fn check_semantics(&self) -> Result<(), DomainError> {
        let mut seen = HashSet::with_capacity(self.participants.len());
        for p in &self.participants {
            if !seen.insert(p.id.as_str()) {
                return Err(DomainError::InvalidExtension(format!(
                    "/participants: participant id {:?} appears more than once",
                    p.id
                )));
            }
        }
        if let Some(plan) = &self.plan {
            plan::validate(plan)
                .map_err(|e| DomainError::InvalidExtension(format!("/plan: {e}")))?;
        }
        Ok(())
    }
}
