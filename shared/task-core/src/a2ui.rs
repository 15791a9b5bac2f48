//! A2UI v0.9.1: the checks `emit_ui` makes on server-to-client messages, the surfaces a task
//! has created, and the user actions (or client errors) that come back as
//! `application/a2ui+json` data parts.
//!
//! Each message is first validated against the embedded schemas (which include the basic
//! catalog's component schemas). The schemas cannot check what depends on earlier messages or
//! on ids, so this module adds (see `schemas/a2ui/README.md`, "Not enforced by the schemas"):
//!
//! - `createSurface` must name the basic catalog, the only one the service advertises
//!   (`acceptsInlineCatalogs` is false), and a surface that exists must be deleted first;
//! - `updateComponents`, `updateDataModel` and `deleteSurface` need a surface created earlier
//!   (in this call or a previous one);
//! - one `updateComponents` holds no duplicate ids, leaves the surface with a `root`, and every
//!   id a component refers to (children, child, tab children, modal trigger/content, a
//!   template's `componentId`, ...) exists in the surface once the update is applied.
//!
//! Which component properties are references is not written down here: it is derived once
//! from the basic catalog, so a catalog update cannot silently leave a reference unchecked.
//!
//! A user action is accepted only when its surface and source component are in the registry.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::A2UI_BASIC_CATALOG_ID;
use crate::schemas::{self, A2UI_BASIC_CATALOG};

/// The surfaces a task has created and what each holds. Persisted with the task, so ordering
/// is deterministic (B-tree maps) and it round-trips through serde.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SurfaceRegistry {
    /// Surface id → surface.
    #[serde(default)]
    pub surfaces: BTreeMap<String, Surface>,
}

/// One surface created by `createSurface`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Surface {
    pub catalog_id: String,
    /// Component id → component type (`Text`, `Button`, ...), accumulated over every
    /// `updateComponents` of the surface (a later update replaces a component with the same id).
    #[serde(default)]
    pub components: BTreeMap<String, String>,
}

/// An `emit_ui` call the checks refuse; the model reads `[a2ui.invalid] <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct A2uiInvalid {
    /// `messages[<index>]: <path>: <what is wrong>`.
    pub message: String,
}

impl A2uiInvalid {
    pub const CODE: &'static str = "a2ui.invalid";

    /// The error code the model sees in `[code] message`.
    pub fn code(&self) -> &'static str {
        Self::CODE
    }
}

/// A client-to-server data part that is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientMessageRefused {
    /// Not a valid A2UI client message: `<path>: <what is wrong>`.
    #[error("{0}")]
    Invalid(String),
    /// An action from a surface or component the task never emitted.
    #[error(
        "action names an unknown surface or component: surface {surface_id:?}, component {component_id:?}"
    )]
    UnknownSurfaceOrComponent {
        surface_id: String,
        component_id: String,
    },
}

impl ClientMessageRefused {
    /// The error code of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            ClientMessageRefused::Invalid(_) => A2uiInvalid::CODE,
            ClientMessageRefused::UnknownSurfaceOrComponent { .. } => {
                "a2ui.unknown_surface_or_component"
            }
        }
    }
}

/// A user action, as `client_to_server.json` defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserAction {
    pub name: String,
    pub surface_id: String,
    pub source_component_id: String,
    /// RFC 3339 date-time (checked by the schema's `format`).
    pub timestamp: String,
    /// The action's context with data bindings resolved by the client.
    pub context: Map<String, Value>,
}

/// An accepted client-to-server message.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    Action(UserAction),
    /// A client-side error (`VALIDATION_FAILED` carries `path`; other codes may carry more).
    Error {
        /// The code; a non-string code (the schema allows any) is kept as its JSON text.
        code: String,
        surface_id: String,
        message: String,
        path: Option<String>,
        /// Properties beyond the ones the schema names (generic errors allow them).
        details: Map<String, Value>,
    },
}

impl ClientMessage {
    /// The line the agent reads. Keys are sorted so the same action always reads the same.
    pub fn render(&self) -> String {
        match self {
            ClientMessage::Action(action) => format!(
                "[A2UI action] {} on surface {} from {}: {}",
                action.name,
                action.surface_id,
                action.source_component_id,
                sorted_json(&Value::Object(action.context.clone()))
            ),
            ClientMessage::Error {
                code,
                surface_id,
                message,
                path,
                details,
            } => {
                let at = path
                    .as_ref()
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default();
                let details = if details.is_empty() {
                    String::new()
                } else {
                    format!(" {}", sorted_json(&Value::Object(details.clone())))
                };
                format!("[A2UI error] {code} on surface {surface_id}{at}: {message}{details}")
            }
        }
    }
}

impl SurfaceRegistry {
    /// Validates a whole `emit_ui` call: every message in order, each against the registry as
    /// the previous ones leave it. Returns the registry after all of them. Atomic: on an error
    /// nothing is returned but the error, and the caller keeps `self`.
    pub fn apply_server_messages(
        &self,
        messages: &[Value],
    ) -> Result<SurfaceRegistry, A2uiInvalid> {
        // A copy: the messages of one call are one artifact, so they stand or fall together.
        let mut next = self.clone();
        for (index, message) in messages.iter().enumerate() {
            next.apply(message).map_err(|detail| A2uiInvalid {
                message: format!("messages[{index}]: {detail}"),
            })?;
        }
        Ok(next)
    }

    /// Validates a client-to-server data part (a user action or a client error).
    pub fn check_client_message(
        &self,
        data: &Value,
    ) -> Result<ClientMessage, ClientMessageRefused> {
        if let Some(err) = schema_error(&schemas::validators().a2ui_client_to_server, data) {
            return Err(ClientMessageRefused::Invalid(err));
        }
        if let Some(action) = data.get("action") {
            let action: UserAction = serde_json::from_value(action.clone())
                .map_err(|e| ClientMessageRefused::Invalid(format!("/action: {e}")))?;
            let known = self
                .surfaces
                .get(&action.surface_id)
                .is_some_and(|s| s.components.contains_key(&action.source_component_id));
            if !known {
                return Err(ClientMessageRefused::UnknownSurfaceOrComponent {
                    surface_id: action.surface_id,
                    component_id: action.source_component_id,
                });
            }
            return Ok(ClientMessage::Action(action));
        }
        // The schema admits exactly `action` or `error`, so this is the error.
        let mut details = data
            .get("error")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut take = |key: &str| match details.remove(key) {
            Some(Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
            None => None,
        };
        Ok(ClientMessage::Error {
            code: take("code").unwrap_or_default(),
            surface_id: take("surfaceId").unwrap_or_default(),
            message: take("message").unwrap_or_default(),
            path: take("path"),
            details,
        })
    }

    /// Applies one message; the error is `<path>: <what is wrong>` (the caller adds the index).
    fn apply(&mut self, message: &Value) -> Result<(), String> {
        if let Some(err) = schema_error(&schemas::validators().a2ui_server_to_client, message) {
            return Err(err);
        }
        // The schema admits exactly one of these four keys.
        if let Some(body) = message.get("createSurface") {
            self.create_surface(body)
        } else if let Some(body) = message.get("updateComponents") {
            self.update_components(body)
        } else if let Some(body) = message.get("updateDataModel") {
            self.existing("updateDataModel", body).map(|_| ())
        } else if let Some(body) = message.get("deleteSurface") {
            let surface_id = self.existing("deleteSurface", body)?;
            self.surfaces.remove(&surface_id);
            Ok(())
        } else {
            Ok(())
        }
    }

    fn create_surface(&mut self, body: &Value) -> Result<(), String> {
        let surface_id = text(body, "surfaceId");
        let catalog_id = text(body, "catalogId");
        if catalog_id != A2UI_BASIC_CATALOG_ID {
            return Err(format!(
                "/createSurface/catalogId: catalog {catalog_id:?} is not supported; \
                 the only catalog is the basic catalog {A2UI_BASIC_CATALOG_ID:?}"
            ));
        }
        if self.surfaces.contains_key(surface_id) {
            return Err(format!(
                "/createSurface/surfaceId: surface {surface_id:?} already exists; \
                 send deleteSurface first to create it again"
            ));
        }
        let surface = Surface {
            catalog_id: catalog_id.to_owned(),
            components: BTreeMap::new(),
        };
        self.surfaces.insert(surface_id.to_owned(), surface);
        Ok(())
    }

    /// The id of the surface `body` names, which must exist.
    fn existing(&self, key: &str, body: &Value) -> Result<String, String> {
        let surface_id = text(body, "surfaceId");
        if self.surfaces.contains_key(surface_id) {
            Ok(surface_id.to_owned())
        } else {
            Err(not_created(key, surface_id))
        }
    }

    fn update_components(&mut self, body: &Value) -> Result<(), String> {
        let surface_id = text(body, "surfaceId");
        let Some(surface) = self.surfaces.get_mut(surface_id) else {
            return Err(not_created("updateComponents", surface_id));
        };
        let components = body
            .get("components")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // A client would keep one of two same-id components, silently dropping the other.
        let mut seen = BTreeSet::new();
        for (j, component) in components.iter().enumerate() {
            let id = text(component, "id");
            if !seen.insert(id) {
                return Err(format!(
                    "/updateComponents/components/{j}/id: duplicate component id {id:?} \
                     in one updateComponents"
                ));
            }
        }
        // Insert first: references within the message may point forward or backward.
        for component in components {
            surface.components.insert(
                text(component, "id").to_owned(),
                text(component, "component").to_owned(),
            );
        }
        if !surface.components.contains_key("root") {
            return Err(format!(
                "/updateComponents: surface {surface_id:?} has no component with id \"root\"; \
                 the root of the tree must come in this or an earlier updateComponents"
            ));
        }
        // Components already in the surface were checked by their own update, and ids are
        // never removed, so checking this message's components suffices.
        for (j, component) in components.iter().enumerate() {
            for (pointer, target) in references(component) {
                if !surface.components.contains_key(target) {
                    return Err(format!(
                        "/updateComponents/components/{j}{pointer}: component {:?} refers to \
                         {target:?}, which is not a component of surface {surface_id:?}",
                        text(component, "id")
                    ));
                }
            }
        }
        Ok(())
    }
}

fn not_created(key: &str, surface_id: &str) -> String {
    format!(
        "/{key}/surfaceId: surface {surface_id:?} does not exist; createSurface must come first"
    )
}

/// A string property the schema has already required (empty if absent, which it cannot be).
fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Compact JSON with object keys sorted at every level, whatever order the map keeps.
fn sorted_json(value: &Value) -> String {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let sorted: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sort(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

// ---------------------------------------------------------------------------------------------
// References between components, derived from the catalog.

/// The `$ref` suffixes (into `common_types.json`) that mark a property as a reference.
const COMPONENT_ID_REF: &str = "common_types.json#/$defs/ComponentId";
const CHILD_LIST_REF: &str = "common_types.json#/$defs/ChildList";
/// Local `$ref`s may nest; a catalog deeper than this is a cycle, not a component.
const MAX_SCHEMA_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Property(String),
    /// Every item of an array.
    Items,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum RefKind {
    /// A single id.
    ComponentId,
    /// An array of ids, or a template `{componentId, path}`.
    ChildList,
}

/// Where, inside a component of one type, a reference sits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RefPath {
    steps: Vec<Step>,
    kind: RefKind,
}

/// Reads like `tabs[].child`.
impl fmt::Display for RefPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Property(name) if i == 0 => f.write_str(name)?,
                Step::Property(name) => write!(f, ".{name}")?,
                Step::Items => f.write_str("[]")?,
            }
        }
        Ok(())
    }
}

/// Component type → the paths of its references, derived once from the basic catalog.
static REFERENCE_PATHS: LazyLock<BTreeMap<String, Vec<RefPath>>> =
    LazyLock::new(|| derive_reference_paths(&schemas::parse(A2UI_BASIC_CATALOG)));

fn derive_reference_paths(catalog: &Value) -> BTreeMap<String, Vec<RefPath>> {
    let mut all = BTreeMap::new();
    let Some(components) = catalog.get("components").and_then(Value::as_object) else {
        return all;
    };
    for (name, schema) in components {
        let mut found = BTreeSet::new();
        walk_schema(catalog, schema, &mut Vec::new(), &mut found, 0);
        // A component's own `id` is a ComponentId too, but it defines rather than refers.
        found.retain(|p| p.steps != [Step::Property("id".to_owned())]);
        all.insert(name.clone(), found.into_iter().collect());
    }
    all
}

/// Records in `found` the paths under `schema` whose schema is a reference type. Follows
/// `allOf`/`anyOf`/`oneOf`, `properties`, `items` and local `$ref`s; other documents'
/// definitions (`ComponentCommon`, `Checkable`, `Dynamic*`, ...) hold no references.
fn walk_schema(
    catalog: &Value,
    schema: &Value,
    path: &mut Vec<Step>,
    found: &mut BTreeSet<RefPath>,
    depth: usize,
) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        let kind = if target.ends_with(COMPONENT_ID_REF) {
            Some(RefKind::ComponentId)
        } else if target.ends_with(CHILD_LIST_REF) {
            Some(RefKind::ChildList)
        } else {
            None
        };
        if let Some(kind) = kind {
            let steps = path.clone();
            found.insert(RefPath { steps, kind });
        } else if let Some(resolved) = target.strip_prefix('#').and_then(|p| catalog.pointer(p)) {
            walk_schema(catalog, resolved, path, found, depth + 1);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for sub in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk_schema(catalog, sub, path, found, depth + 1);
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in properties {
            path.push(Step::Property(name.clone()));
            walk_schema(catalog, sub, path, found, depth + 1);
            path.pop();
        }
    }
    if let Some(items) = schema.get("items") {
        path.push(Step::Items);
        walk_schema(catalog, items, path, found, depth + 1);
        path.pop();
    }
}

/// The ids `component` refers to, each with the JSON pointer (relative to the component) of
/// where it is written.
fn references(component: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let paths = REFERENCE_PATHS.get(text(component, "component"));
    for path in paths.into_iter().flatten() {
        collect_ids(component, &path.steps, path.kind, String::new(), &mut out);
    }
    out
}

fn collect_ids<'a>(
    value: &'a Value,
    steps: &[Step],
    kind: RefKind,
    pointer: String,
    out: &mut Vec<(String, &'a str)>,
) {
    match steps.split_first() {
        Some((Step::Property(name), rest)) => {
            if let Some(inner) = value.get(name) {
                let escaped = name.replace('~', "~0").replace('/', "~1");
                collect_ids(inner, rest, kind, format!("{pointer}/{escaped}"), out);
            }
        }
        Some((Step::Items, rest)) => {
            for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                collect_ids(item, rest, kind, format!("{pointer}/{i}"), out);
            }
        }
        None => match (kind, value) {
            (RefKind::ComponentId, Value::String(id)) => out.push((pointer, id)),
            (RefKind::ChildList, Value::Array(ids)) => {
                for (i, id) in ids.iter().enumerate() {
                    if let Some(id) = id.as_str() {
                        out.push((format!("{pointer}/{i}"), id));
                    }
                }
            }
            (RefKind::ChildList, Value::Object(template)) => {
                if let Some(id) = template.get("componentId").and_then(Value::as_str) {
                    out.push((format!("{pointer}/componentId"), id));
                }
            }
            _ => {}
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Schema errors that say what is wrong.

/// The first schema error, as `<path>: <message>` like [`schemas::check`], except that a failed
/// `oneOf`/`anyOf` is explained through the alternative that was meant. Every A2UI message is
/// a `oneOf` (message kinds, then component types), so the plain error would always be
/// "`<the whole message>` is not valid under any of the schemas" at `/`.
fn schema_error(validator: &Validator, instance: &Value) -> Option<String> {
    validator.iter_errors(instance).next().map(|e| describe(&e))
}

fn location(err: &ValidationError<'_>) -> String {
    let path = err.instance_path().to_string();
    if path.is_empty() {
        "/".to_owned()
    } else {
        path
    }
}

fn describe(err: &ValidationError<'_>) -> String {
    match err.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            describe_alternatives(&location(err), context)
        }
        _ => format!("{}: {err}", location(err)),
    }
}

/// Picks the alternative the instance was meant to be and describes its first error.
fn describe_alternatives(at: &str, alternatives: &[Vec<ValidationError<'static>>]) -> String {
    // An alternative failing a `const` (or a `not`) is told apart by a discriminator such as
    // `component`: it is not the one meant.
    let discriminated = |e: &ValidationError<'_>| {
        matches!(
            e.kind(),
            ValidationErrorKind::Constant { .. } | ValidationErrorKind::Not { .. }
        )
    };
    let candidates: Vec<&Vec<ValidationError<'static>>> = alternatives
        .iter()
        .filter(|errors| !errors.iter().any(discriminated))
        .collect();
    if candidates.is_empty() {
        return describe_unmatched_const(at, alternatives);
    }
    // Prefer the alternative whose shape fits at this level (fewest missing, unexpected or
    // wrongly typed properties here), then the one with fewest errors.
    let rank = |errors: &Vec<ValidationError<'static>>| {
        let misfits = errors
            .iter()
            .filter(|e| location(e) == at)
            .filter(|e| {
                matches!(
                    e.kind(),
                    ValidationErrorKind::Required { .. }
                        | ValidationErrorKind::AdditionalProperties { .. }
                        | ValidationErrorKind::UnevaluatedProperties { .. }
                        | ValidationErrorKind::Type { .. }
                )
            })
            .count();
        (misfits, errors.len())
    };
    let best = candidates.iter().map(|errors| rank(errors)).min();
    let mut best_ones = candidates
        .iter()
        .filter(|errors| Some(rank(errors)) == best);
    if let (Some(only), None) = (best_ones.next(), best_ones.next())
        && let Some(first) = only.first()
    {
        return describe(first);
    }
    // No alternative stands out: list what each one needs.
    let mut reasons: Vec<String> = Vec::new();
    for first in candidates.iter().filter_map(|errors| errors.first()) {
        let reason = describe(first);
        let reason = reason
            .strip_prefix(&format!("{at}: "))
            .map(str::to_owned)
            .unwrap_or(reason);
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    format!(
        "{at}: matches none of the alternatives ({})",
        reasons.join("; or ")
    )
}

/// Every alternative failed its discriminator: name the value and the ones accepted.
fn describe_unmatched_const(at: &str, alternatives: &[Vec<ValidationError<'static>>]) -> String {
    let mut place = None;
    let mut actual = None;
    let mut expected = Vec::new();
    for error in alternatives.iter().flatten() {
        if let ValidationErrorKind::Constant { expected_value } = error.kind() {
            let here = location(error);
            // Only the discriminator all alternatives share, not some nested const.
            if place.get_or_insert_with(|| here.clone()) == &here {
                actual.get_or_insert_with(|| error.instance().to_string());
                expected.push(expected_value.to_string());
            }
        }
    }
    match (place, actual) {
        (Some(place), Some(actual)) => {
            format!("{place}: {actual} is not one of {}", expected.join(", "))
        }
        _ => format!("{at}: matches none of the alternatives"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const V: &str = "v0.9.1";

    fn ok<T, E: fmt::Debug>(result: Result<T, E>) -> T {
        match result {
            Ok(value) => value,
            Err(err) => panic!("unexpected error: {err:?}"),
        }
    }

    fn err<T: fmt::Debug, E>(result: Result<T, E>) -> E {
        match result {
            Ok(value) => panic!("unexpectedly accepted: {value:?}"),
            Err(err) => err,
        }
    }

    /// The emit_ui fixture pinned upstream.
    fn fixture() -> Vec<Value> {
        vec![
            json!({"version": V, "createSurface": {"surfaceId": "resolution",
                "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}}),
            json!({"version": V, "updateComponents": {"surfaceId": "resolution", "components": [
                {"id": "root", "component": "Column", "children": ["q", "pick", "ok"]},
                {"id": "q", "component": "Text", "text": "Proposed resolution"},
                {"id": "pick", "component": "ChoicePicker", "label": "Resolution",
                 "options": [{"label": "Ship replacement now", "value": "replace"},
                             {"label": "Refund after photo", "value": "refund"}],
                 "value": {"path": "/choice"}},
                {"id": "ok", "component": "Button", "child": "ok-label",
                 "action": {"event": {"name": "confirm", "context": {"choice": {"path": "/choice"}}}}},
                {"id": "ok-label", "component": "Text", "text": "Confirm"}]}}),
        ]
    }

    fn fixture_registry() -> SurfaceRegistry {
        ok(SurfaceRegistry::default().apply_server_messages(&fixture()))
    }

    /// The fixture's registry after one more updateComponents of its surface `resolution`.
    fn fixture_updated(components: Value) -> SurfaceRegistry {
        ok(fixture_registry().apply_server_messages(&[update("resolution", components)]))
    }

    fn create(surface: &str) -> Value {
        json!({"version": V, "createSurface": {"surfaceId": surface, "catalogId": A2UI_BASIC_CATALOG_ID}})
    }

    fn update(surface: &str, components: Value) -> Value {
        json!({"version": V, "updateComponents": {"surfaceId": surface, "components": components}})
    }

    fn action(surface: &str, component: &str) -> Value {
        json!({"version": V, "action": {"name": "confirm", "surfaceId": surface,
            "sourceComponentId": component, "timestamp": "2026-10-09T12:00:00Z",
            "context": {"choice": "replace"}}})
    }

    /// The error text of an emit_ui call on an empty registry.
    fn refusal(messages: &[Value]) -> String {
        let refused = err(SurfaceRegistry::default().apply_server_messages(messages));
        assert_eq!(refused.code(), "a2ui.invalid");
        refused.to_string()
    }

    /// The error text of one updateComponents (after createSurface of `s`).
    fn update_refusal(components: Value) -> String {
        refusal(&[create("s"), update("s", components)])
    }

    #[test]
    fn the_upstream_fixture_is_accepted_and_remembered() {
        let registry = fixture_registry();
        let surface = &registry.surfaces["resolution"];
        assert_eq!(surface.catalog_id, A2UI_BASIC_CATALOG_ID);
        let ids: Vec<(&str, &str)> = surface
            .components
            .iter()
            .map(|(id, kind)| (id.as_str(), kind.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("ok", "Button"),
                ("ok-label", "Text"),
                ("pick", "ChoicePicker"),
                ("q", "Text"),
                ("root", "Column")
            ]
        );
    }

    #[test]
    fn the_fixture_action_is_accepted_and_rendered() {
        let message = ok(fixture_registry().check_client_message(&action("resolution", "ok")));
        let ClientMessage::Action(user_action) = &message else {
            panic!("not an action: {message:?}");
        };
        assert_eq!(user_action.timestamp, "2026-10-09T12:00:00Z");
        assert_eq!(
            message.render(),
            r#"[A2UI action] confirm on surface resolution from ok: {"choice":"replace"}"#
        );
    }

    #[test]
    fn an_action_from_an_unknown_component_is_refused() {
        let refused =
            err(fixture_registry().check_client_message(&action("resolution", "pay-now")));
        assert_eq!(refused.code(), "a2ui.unknown_surface_or_component");
        assert_eq!(
            refused.to_string(),
            r#"action names an unknown surface or component: surface "resolution", component "pay-now""#
        );
    }

    #[test]
    fn an_action_from_an_unknown_surface_is_refused() {
        let refused = err(fixture_registry().check_client_message(&action("checkout", "ok")));
        assert_eq!(
            refused,
            ClientMessageRefused::UnknownSurfaceOrComponent {
                surface_id: "checkout".to_owned(),
                component_id: "ok".to_owned()
            }
        );
    }

    #[test]
    fn an_action_part_that_breaks_the_schema_is_invalid() {
        let mut bad_time = action("resolution", "ok");
        bad_time["action"]["timestamp"] = json!("yesterday");
        let refused = err(fixture_registry().check_client_message(&bad_time));
        assert_eq!(refused.code(), "a2ui.invalid");
        assert_eq!(
            refused.to_string(),
            r#"/action/timestamp: "yesterday" is not a "date-time""#
        );
        let mut no_context = action("resolution", "ok");
        if let Some(body) = no_context["action"].as_object_mut() {
            body.remove("context");
        }
        assert_eq!(
            err(fixture_registry().check_client_message(&no_context)),
            ClientMessageRefused::Invalid(r#"/action: "context" is a required property"#.into())
        );
    }

    #[test]
    fn client_errors_are_accepted_and_rendered() {
        let registry = SurfaceRegistry::default();
        let failed = json!({"version": V, "error": {"code": "VALIDATION_FAILED",
            "surfaceId": "s", "path": "/components/0/text", "message": "too long"}});
        let message = ok(registry.check_client_message(&failed));
        assert_eq!(
            message,
            ClientMessage::Error {
                code: "VALIDATION_FAILED".into(),
                surface_id: "s".into(),
                message: "too long".into(),
                path: Some("/components/0/text".into()),
                details: Map::new(),
            }
        );
        assert_eq!(
            message.render(),
            "[A2UI error] VALIDATION_FAILED on surface s at /components/0/text: too long"
        );
        let generic = json!({"version": V, "error": {"code": 7, "surfaceId": "s",
            "message": "renderer crashed", "trace": {"b": 1, "a": 2}}});
        assert_eq!(
            ok(registry.check_client_message(&generic)).render(),
            r#"[A2UI error] 7 on surface s: renderer crashed {"trace":{"a":2,"b":1}}"#
        );
        let no_path = json!({"version": V, "error": {"code": "VALIDATION_FAILED",
            "surfaceId": "s", "message": "m"}});
        assert_eq!(
            err(registry.check_client_message(&no_path)).to_string(),
            r#"/error: "path" is a required property"#
        );
    }

    #[test]
    fn rendering_sorts_context_keys_at_every_level() {
        let message = ClientMessage::Action(UserAction {
            name: "pay".into(),
            surface_id: "s".into(),
            source_component_id: "b".into(),
            timestamp: "2026-10-09T12:00:00Z".into(),
            context: ok(serde_json::from_value(
                json!({"z": [{"y": 1, "x": 2}], "a": {"d": null, "c": "v"}}),
            )),
        });
        assert_eq!(
            message.render(),
            r#"[A2UI action] pay on surface s from b: {"a":{"c":"v","d":null},"z":[{"x":2,"y":1}]}"#
        );
    }

    #[test]
    fn only_the_basic_catalog_is_accepted() {
        let catalog = schemas::parse(A2UI_BASIC_CATALOG);
        assert_eq!(catalog["catalogId"], json!(A2UI_BASIC_CATALOG_ID));
        let other = json!({"version": V, "createSurface": {"surfaceId": "s",
            "catalogId": "https://example.com/catalog.json"}});
        assert_eq!(
            refusal(&[other]),
            "messages[0]: /createSurface/catalogId: catalog \"https://example.com/catalog.json\" \
             is not supported; the only catalog is the basic catalog \
             \"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json\""
        );
    }

    #[test]
    fn a_surface_that_exists_cannot_be_created_again() {
        let expected = "messages[1]: /createSurface/surfaceId: surface \"s\" already exists; \
                        send deleteSurface first to create it again";
        assert_eq!(refusal(&[create("s"), create("s")]), expected);
        // Across calls too: the registry remembers.
        let registry = ok(SurfaceRegistry::default().apply_server_messages(&[create("s")]));
        let refused = err(registry.apply_server_messages(&[create("t"), create("s")]));
        assert_eq!(refused.to_string(), expected);
    }

    #[test]
    fn a_deleted_surface_is_gone_and_may_be_created_again() {
        let delete = json!({"version": V, "deleteSurface": {"surfaceId": "resolution"}});
        let registry = ok(fixture_registry().apply_server_messages(std::slice::from_ref(&delete)));
        assert_eq!(registry, SurfaceRegistry::default());
        assert_eq!(
            err(registry.check_client_message(&action("resolution", "ok"))).code(),
            "a2ui.unknown_surface_or_component"
        );
        let again = ok(fixture_registry().apply_server_messages(&[delete, create("resolution")]));
        assert!(again.surfaces["resolution"].components.is_empty());
    }

    #[test]
    fn messages_to_a_surface_not_created_are_refused() {
        let components = json!([{"id": "root", "component": "Text", "text": "hi"}]);
        assert_eq!(
            refusal(&[update("s", components)]),
            "messages[0]: /updateComponents/surfaceId: surface \"s\" does not exist; \
             createSurface must come first"
        );
        let data = json!({"version": V, "updateDataModel": {"surfaceId": "s", "value": {}}});
        assert_eq!(
            refusal(&[data]),
            "messages[0]: /updateDataModel/surfaceId: surface \"s\" does not exist; \
             createSurface must come first"
        );
        let delete = json!({"version": V, "deleteSurface": {"surfaceId": "s"}});
        assert_eq!(
            refusal(&[create("t"), delete.clone()]),
            "messages[1]: /deleteSurface/surfaceId: surface \"s\" does not exist; \
             createSurface must come first"
        );
        // Deleted in the same call counts as not created.
        let components = json!([{"id": "root", "component": "Text", "text": "hi"}]);
        assert_eq!(
            refusal(&[create("s"), delete, update("s", components)]),
            "messages[2]: /updateComponents/surfaceId: surface \"s\" does not exist; \
             createSurface must come first"
        );
    }

    #[test]
    fn a_data_model_update_needs_only_the_surface() {
        let data = json!({"version": V, "updateDataModel": {"surfaceId": "resolution",
            "path": "/choice", "value": ["replace"]}});
        let registry = fixture_registry();
        assert_eq!(ok(registry.apply_server_messages(&[data])), registry);
    }

    #[test]
    fn duplicate_ids_in_one_update_are_refused() {
        let components = json!([
            {"id": "root", "component": "Text", "text": "a"},
            {"id": "root", "component": "Text", "text": "b"}]);
        assert_eq!(
            update_refusal(components),
            "messages[1]: /updateComponents/components/1/id: duplicate component id \"root\" \
             in one updateComponents"
        );
    }

    #[test]
    fn a_later_update_may_replace_a_component() {
        let registry = fixture_updated(
            json!([{"id": "q", "component": "Image", "url": "https://example.com/q.png"}]),
        );
        assert_eq!(registry.surfaces["resolution"].components["q"], "Image");
    }

    #[test]
    fn the_surface_needs_a_root() {
        assert_eq!(
            update_refusal(json!([{"id": "top", "component": "Text", "text": "hi"}])),
            "messages[1]: /updateComponents: surface \"s\" has no component with id \"root\"; \
             the root of the tree must come in this or an earlier updateComponents"
        );
        // A root sent earlier counts, in the same call or a previous one.
        let more = update("resolution", json!([{"id": "x", "component": "Divider"}]));
        ok(fixture_registry().apply_server_messages(&[more]));
    }

    #[test]
    fn every_kind_of_reference_must_exist() {
        let text = |id: &str| json!({"id": id, "component": "Text", "text": id});
        let cases = [
            (
                json!({"id": "root", "component": "Row", "children": ["a", "gone"]}),
                "/children/1",
            ),
            (
                json!({"id": "root", "component": "List",
                    "children": {"componentId": "gone", "path": "/items"}}),
                "/children/componentId",
            ),
            (
                json!({"id": "root", "component": "Card", "child": "gone"}),
                "/child",
            ),
            (
                json!({"id": "root", "component": "Tabs", "tabs": [
                    {"title": "A", "child": "a"}, {"title": "B", "child": "gone"}]}),
                "/tabs/1/child",
            ),
            (
                json!({"id": "root", "component": "Modal", "trigger": "gone", "content": "a"}),
                "/trigger",
            ),
            (
                json!({"id": "root", "component": "Modal", "trigger": "a", "content": "gone"}),
                "/content",
            ),
            (
                json!({"id": "root", "component": "Button", "child": "gone",
                    "action": {"event": {"name": "go"}}}),
                "/child",
            ),
        ];
        for (root, pointer) in cases {
            // Referring to an existing component is fine...
            let fixed: Value = ok(serde_json::from_str(
                &root.to_string().replace("\"gone\"", "\"a\""),
            ));
            ok(SurfaceRegistry::default()
                .apply_server_messages(&[create("s"), update("s", json!([fixed, text("a")]))]));
            // ...a missing one is refused, naming where the reference is written.
            assert_eq!(
                update_refusal(json!([text("a"), root])),
                format!(
                    "messages[1]: /updateComponents/components/1{pointer}: component \"root\" \
                     refers to \"gone\", which is not a component of surface \"s\""
                )
            );
        }
    }

    #[test]
    fn references_may_point_to_components_of_earlier_updates() {
        let registry = fixture_updated(json!([{"id": "box", "component": "Card", "child": "q"}]));
        assert_eq!(registry.surfaces["resolution"].components["box"], "Card");
    }

    #[test]
    fn reference_paths_are_derived_from_the_catalog() {
        let named = |component: &str| -> Vec<String> {
            REFERENCE_PATHS
                .get(component)
                .into_iter()
                .flatten()
                .map(|p| format!("{p} {:?}", p.kind))
                .collect()
        };
        for list in ["Row", "Column", "List"] {
            assert_eq!(named(list), ["children ChildList"], "{list}");
        }
        for single in ["Card", "Button"] {
            assert_eq!(named(single), ["child ComponentId"], "{single}");
        }
        assert_eq!(named("Tabs"), ["tabs[].child ComponentId"]);
        assert_eq!(
            named("Modal"),
            ["content ComponentId", "trigger ComponentId"]
        );
        // A component's own id is not a reference; leaves refer to nothing.
        assert!(named("Text").is_empty());
        // Every catalog component was walked.
        let catalog = schemas::parse(A2UI_BASIC_CATALOG);
        let names = catalog["components"].as_object().map(Map::len);
        assert_eq!(Some(REFERENCE_PATHS.len()), names);
    }

    #[test]
    fn derivation_follows_local_refs_and_skips_the_own_id() {
        let catalog = json!({
            "components": {"Pair": {"allOf": [
                {"properties": {"id": {"$ref": "x/common_types.json#/$defs/ComponentId"}}},
                {"$ref": "#/$defs/Slots"}]}},
            "$defs": {"Slots": {"properties": {
                "left": {"$ref": "x/common_types.json#/$defs/ComponentId"},
                "rows": {"items": {"properties": {
                    "cells": {"$ref": "x/common_types.json#/$defs/ChildList"}}}}}}}
        });
        let paths: Vec<String> = derive_reference_paths(&catalog)["Pair"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(paths, ["left", "rows[].cells"]);
    }

    #[test]
    fn a_failing_message_leaves_the_registry_unchanged() {
        let registry = fixture_registry();
        let before = registry.clone();
        let messages = [
            create("second"),
            update(
                "second",
                json!([{"id": "root", "component": "Card", "child": "gone"}]),
            ),
        ];
        let refused = err(registry.apply_server_messages(&messages));
        assert!(refused.message.starts_with("messages[1]: "), "{refused}");
        assert_eq!(registry, before);
        assert!(!registry.surfaces.contains_key("second"));
    }

    #[test]
    fn the_registry_round_trips_through_serde() {
        let registry = fixture_registry();
        let value = ok(serde_json::to_value(&registry));
        assert_eq!(
            value["surfaces"]["resolution"]["components"]["ok"],
            json!("Button")
        );
        let back: SurfaceRegistry = ok(serde_json::from_value(value));
        assert_eq!(back, registry);
        let empty: SurfaceRegistry = ok(serde_json::from_value(json!({})));
        assert_eq!(empty, SurfaceRegistry::default());
    }

    #[test]
    fn an_unknown_component_type_is_refused() {
        assert_eq!(
            update_refusal(json!([{"id": "root", "component": "Blink", "text": "x"}])),
            "messages[1]: /updateComponents/components/0/component: \"Blink\" is not one of \
             \"Text\", \"Image\", \"Icon\", \"Video\", \"AudioPlayer\", \"Row\", \"Column\", \
             \"List\", \"Card\", \"Tabs\", \"Modal\", \"Divider\", \"Button\", \"TextField\", \
             \"CheckBox\", \"ChoicePicker\", \"Slider\", \"DateTimeInput\""
        );
    }

    #[test]
    fn schema_errors_name_the_message_and_the_path() {
        assert_eq!(
            update_refusal(json!([{"id": "root", "component": "Text"}])),
            r#"messages[1]: /updateComponents/components/0: "text" is a required property"#
        );
        assert_eq!(
            update_refusal(json!([{"id": "root", "component": "Text", "text": "a", "blink": 1}])),
            "messages[1]: /updateComponents/components/0: Unevaluated properties are not \
             allowed ('blink' was unexpected)"
        );
        assert_eq!(
            update_refusal(json!([{"id": "root", "component": "Column", "children": 5}])),
            "messages[1]: /updateComponents/components/0/children: matches none of the \
             alternatives (5 is not of type \"array\"; or 5 is not of type \"object\")"
        );
        assert_eq!(
            refusal(&[json!({"version": V, "createSurface": {"surfaceId": "s"}})]),
            r#"messages[0]: /createSurface: "catalogId" is a required property"#
        );
        let old = json!({"version": "v0.8", "createSurface": {"surfaceId": "s",
            "catalogId": A2UI_BASIC_CATALOG_ID}});
        assert_eq!(
            refusal(&[old]),
            r#"messages[0]: /version: "v0.8" is not one of "v0.9" or "v0.9.1""#
        );
        assert_eq!(
            refusal(&[json!({"version": V, "blink": {"surfaceId": "s"}})]),
            "messages[0]: /: matches none of the alternatives (\"createSurface\" is a required \
             property; or \"updateComponents\" is a required property; or \"updateDataModel\" \
             is a required property; or \"deleteSurface\" is a required property)"
        );
        assert_eq!(
            refusal(&[json!(["not an object"])]),
            r#"messages[0]: /: ["not an object"] is not of type "object""#
        );
    }

    proptest! {
        /// Forward and backward references within one update are both fine.
        #[test]
        fn component_order_within_an_update_does_not_matter(
            components in Just(fixture()[1]["updateComponents"]["components"]
                .as_array()
                .cloned()
                .unwrap_or_default())
            .prop_shuffle()
        ) {
            let messages = [fixture()[0].clone(), update("resolution", Value::Array(components))];
            let registry = SurfaceRegistry::default().apply_server_messages(&messages);
            prop_assert_eq!(registry, Ok(fixture_registry()));
        }
    }
}
