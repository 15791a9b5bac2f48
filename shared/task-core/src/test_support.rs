//! Helpers the unit tests of several modules share.

use crate::extension::{Role, TaskExtension};

/// The participants of `ext` as `(id, role)`, in roster order.
pub(crate) fn roles(ext: &TaskExtension) -> Vec<(&str, Role)> {
    ext.participants
        .iter()
        .map(|p| (p.id.as_str(), p.role))
        .collect()
}
