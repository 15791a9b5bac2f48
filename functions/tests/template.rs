//! `infra/template.yaml` against the code: every function in the template is a binary of
//! this crate and every binary is deployed; every A2A route (the JSON-RPC endpoint, the card,
//! the eleven REST routes and the task extension's two) reaches the function that answers it, streaming where it streams;
//! the table's keys, indexes, stream and TTL are the adapter's; and each function's policy
//! allows exactly the DynamoDB actions it needs, which are actions the adapter calls.
//!
//! The front door (authentication default, authorizer cache, throttling, WAF, the 429 bodies)
//! is checked by `template/front_door.rs`; the alarms, the dashboard and the push notifier's
//! dead letters by `template/alarms.rs`.
//!
//! Each check is one function over the parsed template, so each test below also removes a
//! route, a function, a table key, a permission or a limit and shows the check failing on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use a2a_http::{Method, Serves};
use common::template::{ROOT, read, table_actions, template, text};
use serde_yaml_ng::Value;
use store_dynamodb::schema;

#[path = "template/alarms.rs"]
mod alarms;
mod common;
#[path = "template/front_door.rs"]
mod front_door;

/// The A2A routes as API Gateway sees them (whole segments, so `:cancel` and `:subscribe`
/// live in `{id}`), with the methods each carries.
fn a2a_routes() -> Vec<(&'static str, &'static str, Vec<Method>)> {
    use Method::*;
    vec![
        ("/message:send", "post", vec![SendMessage]),
        ("/message:stream", "post", vec![SendStreamingMessage]),
        ("/tasks", "get", vec![ListTasks]),
        ("/tasks/{id}", "get", vec![GetTask, SubscribeToTask]),
        ("/tasks/{id}", "post", vec![CancelTask, SubscribeToTask]),
        (
            "/tasks/{id}/pushNotificationConfigs",
            "post",
            vec![CreatePushConfig],
        ),
        (
            "/tasks/{id}/pushNotificationConfigs",
            "get",
            vec![ListPushConfigs],
        ),
        (
            "/tasks/{id}/pushNotificationConfigs/{configId}",
            "get",
            vec![GetPushConfig],
        ),
        (
            "/tasks/{id}/pushNotificationConfigs/{configId}",
            "delete",
            vec![DeletePushConfig],
        ),
        ("/extendedAgentCard", "get", vec![GetExtendedAgentCard]),
        // The task extension's reads of a task's records.
        ("/tasks/{id}/transcript", "get", vec![GetTaskTranscript]),
        ("/tasks/{id}/auditLog", "get", vec![GetTaskAuditLog]),
    ]
}

/// The web console's routes (`GET` only).
const CONSOLE_ROUTES: [&str; 2] = ["/ui", "/ui/{proxy+}"];

/// What each binary serves, read from its one-call `main` (`run_rest(Method::X)`,
/// `run_http(Serves::Y)`); `None` for the functions that are not HTTP.
fn binaries() -> BTreeMap<String, Option<Serves>> {
    let manifest: toml_lite::Manifest = toml_lite::parse(&read("functions/Cargo.toml"));
    manifest
        .bins
        .into_iter()
        .map(|(name, path)| {
            let source = read(&format!("functions/{path}"));
            (name, serves_of(&source))
        })
        .collect()
}

fn serves_of(source: &str) -> Option<Serves> {
    let word_after = |marker: &str| {
        source.find(marker).map(|at| {
            source[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect::<String>()
        })
    };
    if source.contains("run_rest(") {
        let method = word_after("run_rest(Method::")?;
        return Some(Serves::Rest(
            Method::ALL
                .into_iter()
                .find(|m| format!("{m:?}") == method)?,
        ));
    }
    match word_after("run_http(Serves::")?.as_str() {
        "JsonRpc" => Some(Serves::JsonRpc),
        "AgentCard" => Some(Serves::AgentCard),
        "TaskResource" => Some(Serves::TaskResource),
        _ => None,
    }
}

/// The DynamoDB actions the adapter's code calls (its SDK operations).
fn adapter_actions() -> BTreeSet<String> {
    let dir = format!("{ROOT}/shared/store-dynamodb/src");
    let mut actions = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == "table.rs") {
            continue; // creating the table is for local tools, not the deployed functions
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (call, action) in [
            (".get_item()", "GetItem"),
            (".put_item()", "PutItem"),
            (".update_item()", "UpdateItem"),
            (".delete_item()", "DeleteItem"),
            (".query()", "Query"),
            (".batch_get_item()", "BatchGetItem"),
            (".batch_write_item()", "BatchWriteItem"),
            (".transact_write_items()", "TransactWriteItems"),
            (".scan()", "Scan"),
        ] {
            if source.contains(call) {
                actions.insert(format!("dynamodb:{action}"));
            }
        }
    }
    actions
}

/// The DynamoDB actions each function needs on the table, and why.
fn needed_actions() -> BTreeMap<&'static str, Vec<&'static str>> {
    let reads = [
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
    ];
    // Taking a message, running the agent, committing turns, leases and children.
    let runs: Vec<&str> = reads
        .into_iter()
        .chain([
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:TransactWriteItems",
        ])
        .collect();
    BTreeMap::from([
        ("jsonrpc", runs.clone()),
        ("send-message", runs.clone()),
        ("send-streaming-message", runs.clone()),
        ("task", runs.clone()),
        ("runner", runs.clone()),
        // Its daily retention pass reads the table once (a Scan) and marks items.
        (
            "sweeper",
            runs.into_iter().chain(["dynamodb:Scan"]).collect(),
        ),
        // The participant index, then the tasks; stale index entries it meets are repaired
        // (conditional puts and deletes of index items).
        (
            "list-tasks",
            vec![
                "dynamodb:Query",
                "dynamodb:BatchGetItem",
                "dynamodb:PutItem",
                "dynamodb:DeleteItem",
            ],
        ),
        // The task (access), then one conditional write with the task's version.
        (
            "create-push-config",
            vec![
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:TransactWriteItems",
            ],
        ),
        (
            "get-push-config",
            vec!["dynamodb:GetItem", "dynamodb:Query"],
        ),
        (
            "list-push-configs",
            vec!["dynamodb:GetItem", "dynamodb:Query"],
        ),
        // The task (access), the config (its owner), then one conditional write with the
        // owner's counters.
        (
            "delete-push-config",
            vec![
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:TransactWriteItems",
            ],
        ),
        // Configs, tasks and events of a batch; deleting configs whose owner left the task.
        (
            "push-notifier",
            vec![
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:TransactWriteItems",
            ],
        ),
        ("agent-card", vec![]),
        ("get-extended-agent-card", vec![]),
        // The web console's pages: embedded in the binary.
        ("console", vec![]),
        ("authorizer", vec![]),
    ])
}

/// Whether a function serving this answers a route.
type Answers = Box<dyn Fn(Serves) -> bool>;

/// Every inconsistency between the template and the code.
fn problems(template: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = template["Resources"].as_mapping().expect("Resources");
    let binaries = binaries();

    // Functions and binaries.
    let mut deployed: BTreeMap<String, &Value> = BTreeMap::new();
    for (id, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let id = id.as_str().unwrap_or("?");
        let binary = resource["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .map(str::to_owned);
        let Some(binary) = binary else {
            problems.push(format!("{id}: no Metadata.BuildProperties.Binary"));
            continue;
        };
        if resource["Metadata"]["BuildMethod"].as_str() != Some("rust-cargolambda") {
            problems.push(format!("{id}: not built with rust-cargolambda"));
        }
        let name = text(&resource["Properties"]["FunctionName"]);
        if name != format!("${{AWS::StackName}}-{binary}") {
            problems.push(format!(
                "{id}: FunctionName {name:?} is not <stack>-{binary}"
            ));
        }
        if !binaries.contains_key(&binary) {
            problems.push(format!("{id}: no binary {binary} in functions/Cargo.toml"));
        }
        deployed.insert(binary, &resource["Properties"]);
    }
    for binary in binaries.keys() {
        if !deployed.contains_key(binary) {
            problems.push(format!("binary {binary} is not deployed by the template"));
        }
    }

    // Routes.
    let api = &template["Resources"]["Api"]["Properties"]["DefinitionBody"]["paths"];
    let integration = |path: &str, verb: &str| -> Option<(String, bool)> {
        let op = api.get(path)?.get(verb)?;
        let spec = op.get("x-amazon-apigateway-integration")?;
        let uri = text(spec.get("uri")?);
        let function = uri
            .split(":function:${AWS::StackName}-")
            .nth(1)?
            .split('/')
            .next()?
            .to_owned();
        let streams = spec.get("responseTransferMode").and_then(Value::as_str) == Some("STREAM");
        if streams != uri.ends_with("/response-streaming-invocations") {
            return Some((format!("{function} (mixed streaming settings)"), streams));
        }
        Some((function, streams))
    };
    let mut expected: Vec<(&str, &str, Answers)> = vec![
        ("/", "post", Box::new(|s| s == Serves::JsonRpc)),
        (
            "/.well-known/agent-card.json",
            "get",
            Box::new(|s| s == Serves::AgentCard),
        ),
    ];
    for (path, verb, methods) in a2a_routes() {
        expected.push((
            path,
            verb,
            Box::new(move |s: Serves| methods.iter().all(|m| s.answers_rest(*m))),
        ));
    }
    let mut routed = BTreeSet::new();
    for (path, verb, answers) in &expected {
        routed.insert((path.to_string(), verb.to_string()));
        let Some((function, streams)) = integration(path, verb) else {
            problems.push(format!("{verb} {path} is not routed"));
            continue;
        };
        match binaries.get(&function) {
            Some(Some(serves)) => {
                if !answers(*serves) {
                    problems.push(format!(
                        "{verb} {path} goes to {function}, which does not answer it"
                    ));
                }
                if streams != serves.may_stream() {
                    problems.push(format!(
                        "{verb} {path}: streaming is {streams} but {function} streams: {}",
                        serves.may_stream()
                    ));
                }
            }
            _ => problems.push(format!(
                "{verb} {path} goes to {function}, not an HTTP function"
            )),
        }
        let permitted = resources.iter().any(|(_, r)| {
            r["Type"].as_str() == Some("AWS::Lambda::Permission")
                && text(&r["Properties"]["Principal"]) == "apigateway.amazonaws.com"
                && resources
                    .get(text(&r["Properties"]["FunctionName"]).as_str())
                    .is_some_and(|f| {
                        f["Metadata"]["BuildProperties"]["Binary"].as_str() == Some(&function)
                    })
        });
        if !permitted {
            problems.push(format!("{function} may not be invoked by API Gateway"));
        }
    }
    // The web console: both routes to the console function (buffered), which a browser
    // reaches without a token (the pages hold no data; their calls carry the user's token).
    let console_main = read("functions/src/bin/console.rs");
    if !console_main.contains("run_console()") {
        problems.push("the console binary does not run the console".into());
    }
    for path in CONSOLE_ROUTES {
        routed.insert((path.to_string(), "get".to_string()));
        match integration(path, "get") {
            Some((function, false)) if function == "console" => {}
            other => problems.push(format!(
                "get {path} goes to {other:?}, not to the console function (buffered)"
            )),
        }
        if api[path]["get"].get("security").is_some() {
            problems.push(format!(
                "get {path} needs a token: a browser cannot open it"
            ));
        }
    }
    for (path, ops) in api.as_mapping().into_iter().flatten() {
        for (verb, _) in ops.as_mapping().into_iter().flatten() {
            let key = (text(path), text(verb));
            if !routed.contains(&key) {
                problems.push(format!("{} {} is routed but is no A2A route", key.1, key.0));
            }
        }
    }

    // The table.
    let table = &template["Resources"][schema::TEMPLATE_RESOURCE]["Properties"];
    let attributes: BTreeSet<String> = table["AttributeDefinitions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter(|a| a["AttributeType"].as_str() == Some("S"))
        .map(|a| text(&a["AttributeName"]))
        .collect();
    for key in schema::KEY_ATTRIBUTES {
        if !attributes.contains(key) {
            problems.push(format!("the table defines no string attribute {key}"));
        }
    }
    let keys = |schema_list: &Value| -> Vec<(String, String)> {
        schema_list
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|k| (text(&k["AttributeName"]), text(&k["KeyType"])))
            .collect()
    };
    if keys(&table["KeySchema"])
        != [
            (schema::PK.to_owned(), "HASH".to_owned()),
            (schema::SK.to_owned(), "RANGE".to_owned()),
        ]
    {
        problems.push("the table's key is not PK (HASH), SK (RANGE)".into());
    }
    for index in schema::INDEXES {
        let found = table["GlobalSecondaryIndexes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|i| i["IndexName"].as_str() == Some(index.name));
        match found {
            None => problems.push(format!("the table has no index {}", index.name)),
            Some(i) => {
                let want = [
                    (index.partition_key.to_owned(), "HASH".to_owned()),
                    (index.sort_key.to_owned(), "RANGE".to_owned()),
                ];
                if keys(&i["KeySchema"]) != want
                    || i["Projection"]["ProjectionType"].as_str() != Some(index.projection)
                {
                    problems.push(format!("index {} differs from the adapter's", index.name));
                }
            }
        }
    }
    if table["TimeToLiveSpecification"]["AttributeName"].as_str() != Some(schema::TTL) {
        problems.push(format!("the table's TTL attribute is not {}", schema::TTL));
    }
    if table["StreamSpecification"]["StreamViewType"].as_str() != Some("NEW_IMAGE") {
        problems.push("the table has no NEW_IMAGE stream for the push notifier".into());
    }
    if table["BillingMode"].as_str() != Some("PAY_PER_REQUEST") {
        problems.push("the table is not on-demand".into());
    }

    // Permissions.
    let adapter = adapter_actions();
    let needed = needed_actions();
    for (binary, properties) in &deployed {
        let allowed = table_actions(properties);
        let want: BTreeSet<String> = needed
            .get(binary.as_str())
            .map(|a| a.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        for action in want.difference(&allowed) {
            problems.push(format!("{binary} needs {action} on the table"));
        }
        for action in allowed.difference(&want) {
            problems.push(format!(
                "{binary} is allowed {action}, which it does not need"
            ));
        }
        for action in &allowed {
            if !adapter.contains(action) {
                problems.push(format!("{binary} is allowed {action}, which no code calls"));
            }
        }
        if !needed.contains_key(binary.as_str()) {
            problems.push(format!(
                "{binary}: its DynamoDB needs are not known to this test"
            ));
        }
    }
    problems
}

#[test]
fn the_template_matches_the_code() {
    let problems = problems(&template());
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Removes `key` from the mapping at `path` (keys of nested mappings).
fn remove(template: &mut Value, path: &[&str], key: &str) {
    let mut node = template;
    for step in path {
        node = node.get_mut(*step).unwrap_or_else(|| panic!("no {step}"));
    }
    node.as_mapping_mut()
        .expect("a mapping")
        .remove(key)
        .unwrap_or_else(|| panic!("no {key}"));
}

fn fails_with(template: &Value, expected: &str) {
    let problems = problems(template);
    assert!(
        problems.iter().any(|p| p.contains(expected)),
        "expected a problem containing {expected:?}, got {problems:#?}"
    );
}

#[test]
fn a_missing_route_fails_the_check() {
    let mut t = template();
    remove(body(&mut t), &["paths"], "/message:stream");
    fails_with(&t, "post /message:stream is not routed");

    let mut t = template();
    remove(body(&mut t), &["paths", "/tasks/{id}"], "post");
    fails_with(&t, "post /tasks/{id} is not routed");
}

#[test]
fn a_console_route_elsewhere_or_behind_the_authorizer_fails_the_check() {
    let mut t = template();
    remove(
        &mut t,
        &["Resources", "Api", "Properties", "DefinitionBody", "paths"],
        "/ui/{proxy+}",
    );
    fails_with(
        &t,
        "get /ui/{proxy+} goes to None, not to the console function",
    );
    let mut t = template();
    t["Resources"]["Api"]["Properties"]["DefinitionBody"]["paths"]["/ui"]["get"]["security"] =
        serde_yaml_ng::from_str("[{jwt: []}]").unwrap();
    fails_with(&t, "get /ui needs a token");
}

#[test]
fn a_missing_function_fails_the_check() {
    let mut t = template();
    remove(&mut t, &["Resources"], "SweeperFunction");
    fails_with(&t, "binary sweeper is not deployed by the template");
}

#[test]
fn a_missing_table_key_or_index_fails_the_check() {
    let mut t = template();
    let definitions = t["Resources"]["TasksTable"]["Properties"]["AttributeDefinitions"]
        .as_sequence_mut()
        .unwrap();
    definitions.retain(|a| a["AttributeName"].as_str() != Some("GSI2SK"));
    fails_with(&t, "the table defines no string attribute GSI2SK");

    let mut t = template();
    t["Resources"]["TasksTable"]["Properties"]["GlobalSecondaryIndexes"]
        .as_sequence_mut()
        .unwrap()
        .retain(|i| i["IndexName"].as_str() != Some("GSI1"));
    fails_with(&t, "the table has no index GSI1");
}

/// The actions of list-tasks' table statement.
fn statement_actions(t: &mut Value) -> &mut Vec<Value> {
    let policy = &mut t["Resources"]["ListTasksFunction"]["Properties"]["Policies"][0];
    policy["Statement"][0]["Action"].as_sequence_mut().unwrap()
}

#[test]
fn a_missing_or_extra_permission_fails_the_check() {
    let mut t = template();
    statement_actions(&mut t).retain(|a| a.as_str() != Some("dynamodb:BatchGetItem"));
    fails_with(&t, "list-tasks needs dynamodb:BatchGetItem on the table");

    let mut t = template();
    statement_actions(&mut t).push(Value::String("dynamodb:Scan".into()));
    fails_with(
        &t,
        "list-tasks is allowed dynamodb:Scan, which it does not need",
    );

    // The retention pass scans; nothing writes in batches.
    let mut t = template();
    statement_actions(&mut t).push(Value::String("dynamodb:BatchWriteItem".into()));
    fails_with(
        &t,
        "list-tasks is allowed dynamodb:BatchWriteItem, which no code calls",
    );
}

#[test]
fn the_front_door_is_as_the_issue_requires() {
    let problems = front_door::problems(&template());
    assert!(problems.is_empty(), "{problems:#?}");
}

fn front_door_fails_with(template: &Value, expected: &str) {
    let problems = front_door::problems(template);
    assert!(
        problems.iter().any(|p| p.contains(expected)),
        "expected a problem containing {expected:?}, got {problems:#?}"
    );
}

/// The OpenAPI body of the API.
fn body(t: &mut Value) -> &mut Value {
    &mut t["Resources"]["Api"]["Properties"]["DefinitionBody"]
}

#[test]
fn a_weaker_authentication_setting_fails_the_check() {
    let mut t = template();
    t["Parameters"]["AuthMode"]["Default"] = Value::String("none".into());
    front_door_fails_with(&t, "AuthMode does not default to jwt");

    let mut t = template();
    remove(&mut t, &["Rules"], "JwtNeedsIssuerAndAudience");
    front_door_fails_with(&t, "no rule refuses AuthMode jwt");

    let mut t = template();
    body(&mut t)["components"]["securitySchemes"]["jwt"]["x-amazon-apigateway-authorizer"]["authorizerResultTtlInSeconds"] =
        Value::Number(300.into());
    front_door_fails_with(&t, "the authorizer's results are cached for");

    let mut t = template();
    t["Parameters"]["AuthorizerCacheSeconds"]["MaxValue"] = Value::Number(3600.into());
    front_door_fails_with(&t, "AuthorizerCacheSeconds is not bounded to 0..=60");

    let mut t = template();
    remove(
        &mut t,
        &["Globals", "Function", "Environment", "Variables"],
        "TH_AGENT_ID",
    );
    front_door_fails_with(&t, "the functions' Globals set no TH_AGENT_ID");
}

#[test]
fn a_wrong_or_missing_limit_fails_the_check() {
    let mut t = template();
    t["Resources"]["Api"]["Properties"]["MethodSettings"][0]["ThrottlingRateLimit"] =
        Value::Number(100.into());
    front_door_fails_with(
        &t,
        "the stage's ThrottlingRateLimit is not !Ref ApiThrottlingRateLimit",
    );

    let mut t = template();
    remove(
        body(&mut t),
        &[
            "x-amazon-apigateway-gateway-responses",
            "THROTTLED",
            "responseParameters",
        ],
        "gatewayresponse.header.Retry-After",
    );
    front_door_fails_with(&t, "THROTTLED: Retry-After");

    // A body that is not JSON, and one that is JSON but another error.
    let mut t = template();
    let templates = &mut body(&mut t)["x-amazon-apigateway-gateway-responses"]["THROTTLED"]["responseTemplates"]
        ["application/json"];
    *templates = Value::String(templates.as_str().unwrap().replace("}}", "}"));
    front_door_fails_with(&t, "THROTTLED: the body is not JSON");
    let mut t = template();
    let templates = &mut body(&mut t)["x-amazon-apigateway-gateway-responses"]["THROTTLED"]["responseTemplates"]
        ["application/json"];
    *templates = Value::String(templates.as_str().unwrap().replace("-32000", "-32603"));
    front_door_fails_with(&t, "THROTTLED: the error code is not -32000");

    let mut t = template();
    remove(&mut t["Resources"], &["WebAclAssociation"], "Condition");
    front_door_fails_with(&t, "WebAclAssociation is not conditional on HasWaf");

    let mut t = template();
    t["Parameters"]["WafRateWindowSeconds"]["AllowedValues"]
        .as_sequence_mut()
        .unwrap()
        .push(Value::Number(30.into()));
    front_door_fails_with(&t, "WafRateWindowSeconds allows");

    let mut t = template();
    let rule = &mut t["Resources"]["WebAcl"]["Properties"]["Rules"][0];
    rule["Statement"]["RateBasedStatement"]["AggregateKeyType"] = Value::String("CONSTANT".into());
    front_door_fails_with(&t, "the rate rule is not per IP");
}

/// Just enough of Cargo.toml: the `[[bin]]` tables' names and paths.
mod toml_lite {
    pub struct Manifest {
        pub bins: Vec<(String, String)>,
    }

    pub fn parse(text: &str) -> Manifest {
        let mut bins = Vec::new();
        let mut in_bin = false;
        let (mut name, mut path) = (None::<String>, None::<String>);
        let value = |line: &str| {
            line.split_once('=')
                .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        };
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                if let (Some(n), Some(p)) = (name.take(), path.take()) {
                    bins.push((n, p));
                }
                in_bin = line == "[[bin]]";
                continue;
            }
            if in_bin && line.starts_with("name") {
                name = value(line);
            } else if in_bin && line.starts_with("path") {
                path = value(line);
            }
        }
        if let (Some(n), Some(p)) = (name, path) {
            bins.push((n, p));
        }
        Manifest { bins }
    }
}

/// `localstack/stream-poller.py`, the local event source mapping, reads the notifier's mapping
/// from the template with a reader of its own (the standard library has no YAML): what it reads
/// is what a YAML parser finds.
#[test]
fn the_local_stream_poller_reads_the_notifiers_mapping_as_deployed() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let (name, function) = resources
        .iter()
        .find(|(_, r)| {
            r["Properties"]["Events"]
                .as_mapping()
                .is_some_and(|events| events.values().any(|e| e["Type"] == "DynamoDB"))
        })
        .expect("a function with a DynamoDB event");
    let event = function["Properties"]["Events"]
        .as_mapping()
        .and_then(|events| events.values().find(|e| e["Type"] == "DynamoDB"))
        .expect("the DynamoDB event");
    let p = &event["Properties"];
    let output = std::process::Command::new("python3")
        .arg(format!("{ROOT}/localstack/stream-poller.py"))
        .arg("--print-config")
        .output()
        .expect("python3 runs the poller");
    assert!(output.status.success(), "{output:?}");
    let read: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let timeout = function["Properties"]["Timeout"]
        .as_u64()
        .or_else(|| template["Globals"]["Function"]["Timeout"].as_u64());
    let filters: Vec<serde_json::Value> = p["FilterCriteria"]["Filters"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|f| serde_json::from_str(f["Pattern"].as_str().expect("a pattern")).expect("JSON"))
        .collect();
    let expected = serde_json::json!({
        "resource": name.as_str(),
        "function": function["Metadata"]["BuildProperties"]["Binary"].as_str(),
        "timeout_seconds": timeout,
        "starting_position": p["StartingPosition"].as_str(),
        "batch_size": p["BatchSize"].as_u64(),
        "batching_window_seconds": p["MaximumBatchingWindowInSeconds"].as_f64(),
        "report_batch_item_failures": p["FunctionResponseTypes"]
            .as_sequence()
            .is_some_and(|t| t.iter().any(|t| t == "ReportBatchItemFailures")),
        "bisect_on_error": p["BisectBatchOnFunctionError"].as_bool(),
        "maximum_retry_attempts": p["MaximumRetryAttempts"].as_i64(),
        "maximum_record_age_seconds": p["MaximumRecordAgeInSeconds"].as_i64(),
        "filters": filters,
        "on_failure": format!("!GetAtt {}", text(&p["DestinationConfig"]["OnFailure"]["Destination"])),
    });
    assert_eq!(read, expected);
}

/// X-Ray active tracing on every function (Globals, not overridden) and on the API's stage:
/// the functions export their spans to the daemon only when Lambda runs it.
#[test]
fn the_functions_and_the_api_stage_are_traced_with_x_ray() {
    let template = template();
    assert_eq!(
        template["Globals"]["Function"]["Tracing"].as_str(),
        Some("Active")
    );
    let resources = template["Resources"].as_mapping().expect("resources");
    for (name, resource) in resources {
        if resource["Type"] == "AWS::Serverless::Function" {
            let own = &resource["Properties"]["Tracing"];
            assert!(
                own.is_null() || own.as_str() == Some("Active"),
                "{name:?} turns tracing off"
            );
        }
    }
    assert_eq!(
        template["Resources"]["Api"]["Properties"]["TracingEnabled"].as_bool(),
        Some(true)
    );
}
