//! Every metric the service records, defined once: its names in both forms (CloudWatch and
//! Prometheus), its kind, its unit and its labels. The label values are fixed sets or ids
//! from the configuration (model ids), never task or participant ids: the number of series
//! stays bounded.

/// How a metric aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A sum that only grows (per invocation in EMF: what this invocation added).
    Counter,
    /// A distribution of observations (EMF: the values; Prometheus: buckets, sum, count).
    Histogram,
}

/// The unit, as CloudWatch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    pub fn cloudwatch(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One metric's definition.
#[derive(Debug, PartialEq, Eq)]
pub struct Def {
    /// The CloudWatch metric name (EMF).
    pub name: &'static str,
    /// The Prometheus metric name (counters end in `_total`).
    pub prometheus: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    /// The CloudWatch dimension names; the Prometheus labels are the same names in snake
    /// case ([`label_name`]). At most two.
    pub labels: &'static [&'static str],
    /// The Prometheus `# HELP` text.
    pub help: &'static str,
}

/// The index of a metric in [`ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    Requests,
    RequestLatency,
    TasksCreated,
    Turns,
    ToolErrors,
    ModelLatency,
    ModelTokens,
    LeaseTakeovers,
    PushDeliveries,
    StoreConflicts,
    DynamoDbCapacity,
    DynamoDbThrottles,
}

impl Metric {
    pub fn def(self) -> &'static Def {
        &ALL[self as usize]
    }
}

/// Every metric, in the order of [`Metric`].
pub static ALL: [Def; 12] = [
    Def {
        name: "Requests",
        prometheus: "th_requests_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Method", "Outcome"],
        help: "A2A requests answered, by method and outcome (ok, client_error, server_error).",
    },
    Def {
        name: "RequestLatency",
        prometheus: "th_request_duration_milliseconds",
        kind: Kind::Histogram,
        unit: Unit::Milliseconds,
        labels: &["Method", "Outcome"],
        help: "Time to answer an A2A request (a stream: to its first byte), by method and outcome.",
    },
    Def {
        name: "TasksCreated",
        prometheus: "th_tasks_created_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Lifecycle"],
        help: "Tasks created, by lifecycle (conversation, delegated).",
    },
    Def {
        name: "Turns",
        prometheus: "th_turns_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Agent"],
        help: "Runs of the agent on a message (turns), by agent (local; remote: a relayed sub-task).",
    },
    Def {
        name: "ToolErrors",
        prometheus: "th_tool_errors_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Code"],
        help: "Tool calls of the model that failed, by error code.",
    },
    Def {
        name: "ModelLatency",
        prometheus: "th_model_call_duration_milliseconds",
        kind: Kind::Histogram,
        unit: Unit::Milliseconds,
        labels: &["Model", "Outcome"],
        help: "Time of one model call (retries included), by model id and outcome (ok, error).",
    },
    Def {
        name: "ModelTokens",
        prometheus: "th_model_tokens_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Model", "Kind"],
        help: "Tokens the model calls spent, by model id and kind (input, output, cached).",
    },
    Def {
        name: "LeaseTakeovers",
        prometheus: "th_lease_takeovers_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &[],
        help: "Expired runner leases the sweeper found and ran again (a runner died).",
    },
    Def {
        name: "PushDeliveries",
        prometheus: "th_push_deliveries_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Result"],
        help: "Push notification attempts, by result (sent, retried, failed).",
    },
    Def {
        name: "StoreConflicts",
        prometheus: "th_store_conflicts_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Conflict"],
        help: "Conditional writes the store refused, by conflict.",
    },
    Def {
        name: "DynamoDbConsumedCapacity",
        prometheus: "th_dynamodb_consumed_capacity_units_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Capacity"],
        help: "DynamoDB capacity units the calls consumed, by capacity (read, write).",
    },
    Def {
        name: "DynamoDbThrottles",
        prometheus: "th_dynamodb_throttles_total",
        kind: Kind::Counter,
        unit: Unit::Count,
        labels: &["Operation"],
        help: "DynamoDB calls throttled past the SDK's retries, or transactions cancelled for throttling, by operation.",
    },
];

/// The Prometheus label of dimension `name`: `Method` → `method`.
pub fn label_name(name: &str) -> &'static str {
    match name {
        "Method" => "method",
        "Outcome" => "outcome",
        "Lifecycle" => "lifecycle",
        "Agent" => "agent",
        "Code" => "code",
        "Model" => "model",
        "Kind" => "kind",
        "Result" => "result",
        "Conflict" => "conflict",
        "Capacity" => "capacity",
        "Operation" => "operation",
        _ => "label",
    }
}

/// The upper bounds (milliseconds) of the Prometheus histogram buckets, `+Inf` aside.
pub const BUCKETS_MS: [f64; 14] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_in_the_order_of_its_index_and_its_names_are_unique() {
        let order = [
            Metric::Requests,
            Metric::RequestLatency,
            Metric::TasksCreated,
            Metric::Turns,
            Metric::ToolErrors,
            Metric::ModelLatency,
            Metric::ModelTokens,
            Metric::LeaseTakeovers,
            Metric::PushDeliveries,
            Metric::StoreConflicts,
            Metric::DynamoDbCapacity,
            Metric::DynamoDbThrottles,
        ];
        assert_eq!(order.len(), ALL.len());
        for (i, metric) in order.iter().enumerate() {
            assert_eq!(*metric as usize, i);
        }
        for def in &ALL {
            assert!(def.labels.len() <= 2, "{}", def.name);
            assert_eq!(ALL.iter().filter(|d| d.name == def.name).count(), 1);
            assert!(def.prometheus.starts_with("th_"));
            assert_eq!(
                def.prometheus.ends_with("_total"),
                def.kind == Kind::Counter,
                "{}",
                def.prometheus
            );
            for label in def.labels {
                assert_ne!(label_name(label), "label", "{label} has no Prometheus name");
            }
        }
    }
}
