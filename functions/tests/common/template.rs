//! `infra/template.yaml` as data, for the tests that check it against the code
//! (`template.rs`) and against what the functions were seen calling (`watch.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

pub fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn template() -> Value {
    serde_yaml_ng::from_str(&read("infra/template.yaml")).expect("the template is YAML")
}

/// The value under a tag (`!Sub "…"` → the string), or the value itself.
pub fn untagged(value: &Value) -> &Value {
    match value {
        Value::Tagged(tagged) => &tagged.value,
        other => other,
    }
}

pub fn text(value: &Value) -> String {
    match untagged(value) {
        Value::String(s) => s.clone(),
        // `!Sub [template, {vars}]`
        Value::Sequence(seq) => seq.first().map(text).unwrap_or_default(),
        other => format!("{other:?}"),
    }
}

/// The actions a function's inline policies allow on the task table (or its indexes).
pub fn table_actions(properties: &Value) -> BTreeSet<String> {
    let mut actions = BTreeSet::new();
    let Some(policies) = properties.get("Policies").and_then(Value::as_sequence) else {
        return actions;
    };
    for policy in policies {
        let Some(statements) = untagged(policy)
            .get("Statement")
            .and_then(Value::as_sequence)
        else {
            continue;
        };
        for statement in statements {
            let resources: Vec<String> = statement
                .get("Resource")
                .and_then(Value::as_sequence)
                .map(|r| r.iter().map(text).collect())
                .unwrap_or_default();
            if !resources
                .iter()
                .any(|r| r == "TasksTable.Arn" || r.starts_with("${TasksTable.Arn}"))
            {
                continue;
            }
            for action in statement
                .get("Action")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
            {
                actions.insert(text(action));
            }
        }
    }
    actions
}

/// Each deployed function's binary and the DynamoDB actions its policies allow on the table.
pub fn table_actions_by_binary(template: &Value) -> BTreeMap<String, BTreeSet<String>> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .filter_map(|r| {
            let binary = r["Metadata"]["BuildProperties"]["Binary"].as_str()?;
            Some((binary.to_owned(), table_actions(&r["Properties"])))
        })
        .collect()
}
