//! The template's alarms and dashboard against the code: every function has an Errors and a
//! Throttles alarm (under the function's own condition); the API has a 5xx alarm on its
//! stage and a p99 latency alarm on the service's own `RequestLatency` in the namespace the
//! functions print to; DynamoDB read and write throttling is watched on the table and on
//! every index the adapter declares; the push notifier's stream mapping sends failed batches
//! to the dead-letter queue (bisected, retries bounded), may send to it, and its depth has an
//! alarm; every alarm notifies the optional `AlarmTopicArn`; the dashboard shows every metric
//! of the catalog.

use std::collections::BTreeSet;

use a2a_http::Method;
use serde_yaml_ng::Value;
use store_dynamodb::schema;
use telemetry::metrics::Metric;
use telemetry::metrics::catalog::ALL;

use crate::common::template::{text, untagged};

/// `!<tag> <value>` with this tag and text?
fn tagged(value: &Value, tag: &str, expected: &str) -> bool {
    matches!(value, Value::Tagged(t) if t.tag == tag && text(&t.value) == expected)
}

/// The dimensions of a metric as `(name, value as written)`: `!Ref X` → `Ref X`.
fn dimensions(metric: &Value) -> BTreeSet<(String, String)> {
    metric["Dimensions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|d| {
            let value = match &d["Value"] {
                Value::Tagged(t) => format!("{} {}", t.tag, text(&t.value)),
                other => text(other),
            };
            (text(&d["Name"]), value.trim_start_matches('!').to_owned())
        })
        .collect()
}

/// One metric an alarm watches: its namespace (as written), name and dimensions.
struct Watched {
    namespace: String,
    name: String,
    dimensions: BTreeSet<(String, String)>,
}

/// The metrics an alarm watches: its own, or those of its metric math.
fn watched(properties: &Value) -> Vec<Watched> {
    if let Some(metrics) = properties["Metrics"].as_sequence() {
        return metrics
            .iter()
            .filter_map(|m| m.get("MetricStat"))
            .map(|stat| Watched {
                namespace: text(&stat["Metric"]["Namespace"]),
                name: text(&stat["Metric"]["MetricName"]),
                dimensions: dimensions(&stat["Metric"]),
            })
            .collect();
    }
    vec![Watched {
        namespace: text(&properties["Namespace"]),
        name: text(&properties["MetricName"]),
        dimensions: dimensions(properties),
    }]
}

fn dims(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Every inconsistency of the alarms, the dashboard and the notifier's dead letters.
pub fn problems(template: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = template["Resources"].as_mapping().expect("Resources");
    let alarms: Vec<(String, &Value)> = resources
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .map(|(id, r)| (text(id), r))
        .collect();
    let watching = |namespace: &str, name: &str, dimensions: &BTreeSet<(String, String)>| {
        alarms.iter().find(|(_, alarm)| {
            watched(&alarm["Properties"])
                .iter()
                .any(|w| w.namespace == namespace && w.name == name && w.dimensions == *dimensions)
        })
    };

    // The topic: optional, every alarm notifies it when given.
    let parameter = &template["Parameters"]["AlarmTopicArn"];
    if parameter.is_null() || !text(&parameter["Default"]).is_empty() {
        problems.push("no AlarmTopicArn parameter defaulting to empty".into());
    }
    let condition = &template["Conditions"]["HasAlarmTopic"];
    if !format!("{condition:?}").contains("AlarmTopicArn") {
        problems.push("no HasAlarmTopic condition on AlarmTopicArn".into());
    }
    for (id, alarm) in &alarms {
        for actions in ["AlarmActions", "OKActions"] {
            let value = &alarm["Properties"][actions];
            let notifies = matches!(value, Value::Tagged(t) if t.tag == "If")
                && untagged(value)[0].as_str() == Some("HasAlarmTopic")
                && tagged(&untagged(value)[1][0], "Ref", "AlarmTopicArn")
                && tagged(&untagged(value)[2], "Ref", "AWS::NoValue");
            if !notifies {
                problems.push(format!("{id}: {actions} is not AlarmTopicArn when given"));
            }
        }
    }

    // Every function: errors and throttles, under the function's condition.
    for (id, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let id = text(id);
        for metric in ["Errors", "Throttles"] {
            let want = dims(&[("FunctionName", &format!("Ref {id}"))]);
            match watching("AWS/Lambda", metric, &want) {
                None => problems.push(format!("{id} has no {metric} alarm")),
                Some((alarm, found)) => {
                    if found.get("Condition") != resource.get("Condition") {
                        problems.push(format!(
                            "{alarm}: not under {id}'s condition {:?}",
                            resource.get("Condition")
                        ));
                    }
                }
            }
        }
    }

    // The API: 5xx on its stage; p99 latency as the service measures it.
    let api_name =
        text(&template["Resources"]["Api"]["Properties"]["DefinitionBody"]["info"]["title"]);
    let stage = dims(&[
        (
            "ApiName",
            &api_name.replace("${AWS::StackName}", "Ref AWS::StackName"),
        ),
        ("Stage", "Ref StageName"),
    ]);
    if watching("AWS/ApiGateway", "5XXError", &stage).is_none() {
        problems.push("no alarm on the API stage's 5XXError".into());
    }
    let namespace =
        text(&template["Globals"]["Function"]["Environment"]["Variables"]["TH_METRICS_NAMESPACE"]);
    if namespace.is_empty() {
        problems.push("the functions get no TH_METRICS_NAMESPACE".into());
    }
    let read = dims(&[
        ("Method", Method::GetTask.jsonrpc_name()),
        ("Outcome", "ok"),
    ]);
    match watching(&namespace, Metric::RequestLatency.def().name, &read) {
        Some((_, alarm)) if text(&alarm["Properties"]["ExtendedStatistic"]) == "p99" => {}
        _ => problems.push(format!(
            "no p99 alarm on {} of GetTask in {namespace}",
            Metric::RequestLatency.def().name
        )),
    }

    // DynamoDB: the table and every index, reads and writes.
    let table = format!("Ref {}", schema::TEMPLATE_RESOURCE);
    for metric in ["ReadThrottleEvents", "WriteThrottleEvents"] {
        let mut targets = vec![dims(&[("TableName", &table)])];
        for index in schema::INDEXES {
            targets.push(dims(&[
                ("TableName", &table),
                ("GlobalSecondaryIndexName", index.name),
            ]));
        }
        for target in targets {
            if watching("AWS/DynamoDB", metric, &target).is_none() {
                problems.push(format!("no alarm on {metric} of {target:?}"));
            }
        }
    }

    // The push notifier: failed batches to the dead-letter queue, and its depth watched.
    let notifier = resources
        .iter()
        .map(|(_, r)| r)
        .find(|r| r["Metadata"]["BuildProperties"]["Binary"].as_str() == Some("push-notifier"));
    let Some(notifier) = notifier else {
        problems.push("no push-notifier function".into());
        return problems;
    };
    let stream = notifier["Properties"]["Events"]
        .as_mapping()
        .into_iter()
        .flatten()
        .map(|(_, e)| e)
        .find(|e| e["Type"].as_str() == Some("DynamoDB"));
    let queue = match stream.map(|e| &e["Properties"]) {
        None => {
            problems.push("the push notifier reads no DynamoDB stream".into());
            None
        }
        Some(mapping) => {
            let destination = &mapping["DestinationConfig"]["OnFailure"];
            let queue = text(&destination["Destination"])
                .strip_suffix(".Arn")
                .map(str::to_owned);
            let is_queue = queue.as_deref().is_some_and(|q| {
                resources.get(q).and_then(|r| r["Type"].as_str()) == Some("AWS::SQS::Queue")
            });
            if text(&destination["Type"]) != "SQS" || !is_queue {
                problems.push("the notifier's failed batches go to no SQS queue".into());
            }
            if mapping["BisectBatchOnFunctionError"].as_bool() != Some(true) {
                problems.push("the notifier's failed batches are not bisected".into());
            }
            let retries = mapping["MaximumRetryAttempts"].as_i64().unwrap_or(-1);
            if !(1..=10).contains(&retries) {
                problems.push(format!("the notifier retries a batch {retries} times"));
            }
            queue
        }
    };
    if let Some(queue) = queue {
        let may_send = format!("{:?}", notifier["Properties"]["Policies"])
            .contains("sqs:SendMessage")
            && format!("{:?}", notifier["Properties"]["Policies"])
                .contains(&format!("{queue}.Arn"));
        if !may_send {
            problems.push(format!("the notifier may not send to {queue}"));
        }
        let depth = dims(&[("QueueName", &format!("GetAtt {queue}.QueueName"))]);
        if watching("AWS/SQS", "ApproximateNumberOfMessagesVisible", &depth).is_none() {
            problems.push(format!("no alarm on the depth of {queue}"));
        }
    }

    // The dashboard: every metric of the catalog.
    let dashboards: Vec<String> = resources
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::CloudWatch::Dashboard"))
        .map(|r| text(&r["Properties"]["DashboardBody"]))
        .collect();
    if dashboards.is_empty() {
        problems.push("no dashboard".into());
    }
    for def in &ALL {
        // A name in the JSON (`"Name"`) or in a SEARCH inside it (`\"Name\"`).
        let shown = |body: &String| {
            body.contains(&format!("\"{}\"", def.name))
                || body.contains(&format!("\\\"{}\\\"", def.name))
        };
        if !dashboards.iter().any(shown) {
            problems.push(format!("the dashboard does not show {}", def.name));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::template::template;

    fn fails_with(template: &Value, expected: &str) {
        let problems = problems(template);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "expected a problem containing {expected:?}, got {problems:#?}"
        );
    }

    fn resources(t: &mut Value) -> &mut serde_yaml_ng::Mapping {
        t["Resources"].as_mapping_mut().expect("Resources")
    }

    #[test]
    fn the_alarms_and_the_dashboard_are_as_the_issue_requires() {
        let problems = problems(&template());
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn a_function_without_its_alarm_fails_the_check() {
        let mut t = template();
        resources(&mut t).remove("RunnerFunctionThrottlesAlarm");
        fails_with(&t, "RunnerFunction has no Throttles alarm");
        let mut t = template();
        resources(&mut t)["AuthorizerFunctionErrorsAlarm"]
            .as_mapping_mut()
            .expect("alarm")
            .remove("Condition");
        fails_with(&t, "not under AuthorizerFunction's condition");
    }

    #[test]
    fn an_index_or_the_queue_unwatched_fails_the_check() {
        let mut t = template();
        resources(&mut t)["TasksTableWriteThrottleAlarm"]["Properties"]["Metrics"]
            .as_sequence_mut()
            .expect("metrics")
            .pop();
        fails_with(&t, "no alarm on WriteThrottleEvents");
        let mut t = template();
        resources(&mut t).remove("PushDeadLettersAlarm");
        fails_with(&t, "no alarm on the depth of PushDeadLetters");
        let mut t = template();
        resources(&mut t).remove("ApiLatencyAlarm");
        fails_with(&t, "no p99 alarm on RequestLatency");
    }

    #[test]
    fn failed_batches_nowhere_or_an_alarm_without_the_topic_fails_the_check() {
        let mut t = template();
        resources(&mut t)["PushNotifierFunction"]["Properties"]["Events"]["TableStream"]
            ["Properties"]
            .as_mapping_mut()
            .expect("mapping")
            .remove("DestinationConfig");
        fails_with(&t, "go to no SQS queue");
        let mut t = template();
        resources(&mut t)["Api5xxAlarm"]["Properties"]
            .as_mapping_mut()
            .expect("alarm")
            .remove("OKActions");
        fails_with(&t, "Api5xxAlarm: OKActions");
    }
}
