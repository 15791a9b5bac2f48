//! The contract files of `schemas/`, embedded at build time and compiled once.
//!
//! The schemas are served and validated byte-for-byte as they are in `schemas/` (copied from
//! the specification); nothing here is a hand-written subset. A2UI's `$ref`s point at `$id`s
//! that are not reachable URLs, so they resolve through a local registry (see
//! `schemas/a2ui/README.md`).

use std::sync::LazyLock;

use jsonschema::{Draft, Registry, Validator};
use serde_json::Value;

/// One embedded contract file: its path under `schemas/` and its exact bytes.
#[derive(Debug, Clone, Copy)]
pub struct SchemaFile {
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! schema_file {
    ($path:literal) => {
        SchemaFile {
            path: $path,
            text: include_str!(concat!("../../../schemas/", $path)),
        }
    };
}

pub const TASK_EXTENSION: SchemaFile = schema_file!("task.schema.json");
pub const CHANNEL: SchemaFile = schema_file!("channel.schema.json");

/// The twelve intrinsic tool definitions, in the order the model sees them.
pub const INTRINSICS: [SchemaFile; 12] = [
    schema_file!("intrinsics/create_plan.json"),
    schema_file!("intrinsics/complete_step.json"),
    schema_file!("intrinsics/spawn_subtask.json"),
    schema_file!("intrinsics/ask_participant.json"),
    schema_file!("intrinsics/create_task_for_participant.json"),
    schema_file!("intrinsics/set_participant_role.json"),
    schema_file!("intrinsics/list_skills.json"),
    schema_file!("intrinsics/load_skill.json"),
    schema_file!("intrinsics/unload_skill.json"),
    schema_file!("intrinsics/list_skill_resources.json"),
    schema_file!("intrinsics/load_skill_resource.json"),
    schema_file!("intrinsics/emit_ui.json"),
];

pub const A2UI_SERVER_TO_CLIENT: SchemaFile = schema_file!("a2ui/json/server_to_client.json");
pub const A2UI_CLIENT_TO_SERVER: SchemaFile = schema_file!("a2ui/json/client_to_server.json");
pub const A2UI_COMMON_TYPES: SchemaFile = schema_file!("a2ui/json/common_types.json");
pub const A2UI_BASIC_CATALOG: SchemaFile = schema_file!("a2ui/catalogs/basic/catalog.json");

/// Every embedded file, for the test that checks them against `../shared/spec` and for
/// servers that publish them.
pub const ALL: [SchemaFile; 18] = [
    TASK_EXTENSION,
    CHANNEL,
    INTRINSICS[0],
    INTRINSICS[1],
    INTRINSICS[2],
    INTRINSICS[3],
    INTRINSICS[4],
    INTRINSICS[5],
    INTRINSICS[6],
    INTRINSICS[7],
    INTRINSICS[8],
    INTRINSICS[9],
    INTRINSICS[10],
    INTRINSICS[11],
    A2UI_SERVER_TO_CLIENT,
    A2UI_CLIENT_TO_SERVER,
    A2UI_COMMON_TYPES,
    A2UI_BASIC_CATALOG,
];

/// The base under which every A2UI v0.9(.1) file declares its `$id`.
const A2UI_BASE: &str = "https://a2ui.org/specification/v0_9/";

/// Parses an embedded file. They are checked in by us and covered by tests, so a failure is
/// a build defect, reported as a panic at first use rather than at request time.
pub fn parse(file: SchemaFile) -> Value {
    match serde_json::from_str(file.text) {
        Ok(value) => value,
        Err(err) => panic!("embedded schema {} is not JSON: {err}", file.path),
    }
}

fn compile(schema: &Value, registry: Option<&Registry<'_>>, what: &str) -> Validator {
    let mut options = jsonschema::options()
        .with_draft(Draft::Draft202012)
        .should_validate_formats(true);
    if let Some(registry) = registry {
        options = options.with_registry(registry);
    }
    match options.build(schema) {
        Ok(validator) => validator,
        Err(err) => panic!("embedded schema {what} does not compile: {err}"),
    }
}

/// The compiled validators, built once per process.
pub struct Validators {
    pub task_extension: Validator,
    pub channel: Validator,
    pub a2ui_server_to_client: Validator,
    pub a2ui_client_to_server: Validator,
}

static VALIDATORS: LazyLock<Validators> = LazyLock::new(|| {
    let catalog = parse(A2UI_BASIC_CATALOG);
    let common = parse(A2UI_COMMON_TYPES);
    let server_to_client = parse(A2UI_SERVER_TO_CLIENT);
    let client_to_server = parse(A2UI_CLIENT_TO_SERVER);
    // `server_to_client.json` refers to `catalog.json` relative to its own `$id`, i.e. to
    // `<base>catalog.json`, which is not the basic catalog's `$id`: register the catalog under
    // both. `client_to_server.json` has no `$id`: register it under the name its siblings use.
    let registry = Registry::new()
        .add(
            format!("{A2UI_BASE}catalogs/basic/catalog.json"),
            catalog.clone(),
        )
        .and_then(|r| r.add(format!("{A2UI_BASE}catalog.json"), catalog))
        .and_then(|r| r.add(format!("{A2UI_BASE}common_types.json"), common))
        .and_then(|r| {
            r.add(
                format!("{A2UI_BASE}server_to_client.json"),
                server_to_client.clone(),
            )
        })
        .and_then(|r| {
            r.add(
                format!("{A2UI_BASE}client_to_server.json"),
                client_to_server.clone(),
            )
        })
        .and_then(|r| r.prepare());
    let registry = match registry {
        Ok(registry) => registry,
        Err(err) => panic!("A2UI schema registry does not build: {err}"),
    };
    Validators {
        task_extension: compile(&parse(TASK_EXTENSION), None, TASK_EXTENSION.path),
        channel: compile(&parse(CHANNEL), None, CHANNEL.path),
        a2ui_server_to_client: compile(
            &server_to_client,
            Some(&registry),
            A2UI_SERVER_TO_CLIENT.path,
        ),
        a2ui_client_to_server: compile(
            &client_to_server,
            Some(&registry),
            A2UI_CLIENT_TO_SERVER.path,
        ),
    }
});

/// The process-wide compiled validators.
pub fn validators() -> &'static Validators {
    &VALIDATORS
}

/// Validates `instance` and describes the first failure as `<path>: <message>` (path `/` for
/// the root), the form every `invalid …` error of the service uses.
pub fn check(validator: &Validator, instance: &Value) -> Result<(), String> {
    match validator.iter_errors(instance).next() {
        None => Ok(()),
        Some(err) => {
            let path = err.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            Err(format!("{path}: {err}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn embedded_files_are_byte_identical_to_the_specification() {
        let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec");
        if !spec.exists() {
            // The specification sits beside the checkout in development and CI.
            panic!(
                "{} is missing: clone the project beside ../shared",
                spec.display()
            );
        }
        for file in ALL {
            let on_disk = std::fs::read_to_string(spec.join(file.path))
                .unwrap_or_else(|e| panic!("{}: {e}", file.path));
            assert_eq!(
                on_disk, file.text,
                "{} differs from the specification",
                file.path
            );
        }
    }

    #[test]
    fn every_validator_compiles() {
        let v = validators();
        assert!(
            v.task_extension
                .is_valid(&json!({"name": "n", "goal": "g"}))
        );
        assert!(!v.task_extension.is_valid(&json!({"name": "n"})));
        assert!(
            v.channel
                .is_valid(&json!({"channel_id": "t", "sender": "a"}))
        );
    }

    #[test]
    fn a2ui_refs_resolve_through_the_catalog() {
        let v = validators();
        let good = json!({"version": "v0.9.1", "updateComponents": {"surfaceId": "s",
            "components": [{"id": "root", "component": "Text", "text": "hi"}]}});
        assert_eq!(check(&v.a2ui_server_to_client, &good), Ok(()));
        let unknown_component = json!({"version": "v0.9.1", "updateComponents": {"surfaceId": "s",
            "components": [{"id": "root", "component": "Blink", "text": "hi"}]}});
        assert!(check(&v.a2ui_server_to_client, &unknown_component).is_err());
        let extra_property = json!({"version": "v0.9.1", "updateComponents": {"surfaceId": "s",
            "components": [{"id": "root", "component": "Text", "text": "hi", "blink": true}]}});
        assert!(check(&v.a2ui_server_to_client, &extra_property).is_err());
    }

    #[test]
    fn check_names_the_failing_path() {
        let err = check(
            &validators().task_extension,
            &json!({"name": 1, "goal": "g"}),
        )
        .expect_err("name must be a string");
        assert!(err.starts_with("/name: "), "{err}");
    }
}
