//! CloudWatch embedded metric format: what one invocation recorded, as JSON lines on stdout
//! that CloudWatch Logs turns into metrics (no call to CloudWatch on the request path).
//!
//! One line per set of dimension values: the dimension values are top-level keys of the
//! line, so series that differ in a value cannot share one. A histogram's observations are
//! sent as values arrays of at most 100 (EMF's limit), the rest on further lines.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Map, Value as Json, json};

use super::catalog::Kind;
use super::registry::{Sample, Value};

/// EMF's limit of values in one metric's array.
const MAX_VALUES: usize = 100;

/// Writes `samples` as EMF lines (one JSON object per line) under `namespace`.
pub fn write(
    samples: &[Sample],
    namespace: &str,
    timestamp_ms: u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for line in lines(samples, namespace, timestamp_ms) {
        let mut text = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        text.push(b'\n');
        out.write_all(&text)?;
    }
    out.flush()
}

/// The EMF documents for `samples`.
pub fn lines(samples: &[Sample], namespace: &str, timestamp_ms: u64) -> Vec<Json> {
    // The samples grouped by their dimensions (names and values).
    let mut groups: BTreeMap<Vec<(&'static str, &'static str)>, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        let def = sample.metric.def();
        let dims = def
            .labels
            .iter()
            .copied()
            .zip(sample.labels.iter().copied())
            .collect();
        groups.entry(dims).or_default().push(sample);
    }
    let mut lines = Vec::new();
    for (dims, samples) in groups {
        let chunks = samples
            .iter()
            .map(|s| match &s.value {
                Value::Histogram { values, .. } => values.len().div_ceil(MAX_VALUES),
                Value::Counter(_) => 1,
            })
            .max()
            .unwrap_or(1)
            .max(1);
        for chunk in 0..chunks {
            let mut doc = Map::new();
            let mut metrics = Vec::new();
            for (name, value) in &dims {
                doc.insert((*name).to_owned(), json!(value));
            }
            for sample in &samples {
                let def = sample.metric.def();
                let value = match (&sample.value, def.kind) {
                    (Value::Counter(total), _) if chunk == 0 => json!(total),
                    (Value::Histogram { values, .. }, Kind::Histogram) => {
                        let part: Vec<f64> = values
                            .iter()
                            .skip(chunk * MAX_VALUES)
                            .take(MAX_VALUES)
                            .copied()
                            .collect();
                        if part.is_empty() {
                            continue;
                        }
                        json!(part)
                    }
                    _ => continue,
                };
                doc.insert(def.name.to_owned(), value);
                metrics.push(json!({"Name": def.name, "Unit": def.unit.cloudwatch()}));
            }
            if metrics.is_empty() {
                continue;
            }
            let dimension_names: Vec<&str> = dims.iter().map(|(name, _)| *name).collect();
            doc.insert(
                "_aws".to_owned(),
                json!({
                    "Timestamp": timestamp_ms,
                    "CloudWatchMetrics": [{
                        "Namespace": namespace,
                        "Dimensions": [dimension_names],
                        "Metrics": metrics,
                    }],
                }),
            );
            lines.push(Json::Object(doc));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::catalog::{ALL, Metric};
    use crate::metrics::registry::{Mode, Registry};

    fn printed(registry: &Registry) -> Vec<Json> {
        let mut out = Vec::new();
        write(
            &registry.drain(),
            "TinyHarness",
            1_700_000_000_000,
            &mut out,
        )
        .expect("write");
        let text = String::from_utf8(out).expect("utf-8");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("each line one JSON object"))
            .collect()
    }

    fn directive(line: &Json) -> &Json {
        &line["_aws"]["CloudWatchMetrics"][0]
    }

    #[test]
    fn a_request_is_one_line_with_its_dimensions_units_and_values() {
        let registry = Registry::new(Mode::Emf);
        registry.record(Metric::Requests, ["SendMessage", "ok"], 1.0);
        registry.record(Metric::RequestLatency, ["SendMessage", "ok"], 42.5);
        let lines = printed(&registry);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert_eq!(directive(line)["Namespace"], "TinyHarness");
        assert_eq!(line["_aws"]["Timestamp"], 1_700_000_000_000u64);
        assert_eq!(
            directive(line)["Dimensions"],
            json!([["Method", "Outcome"]])
        );
        assert_eq!(
            directive(line)["Metrics"],
            json!([
                {"Name": "Requests", "Unit": "Count"},
                {"Name": "RequestLatency", "Unit": "Milliseconds"},
            ])
        );
        assert_eq!(line["Method"], "SendMessage");
        assert_eq!(line["Outcome"], "ok");
        assert_eq!(line["Requests"], 1.0);
        assert_eq!(line["RequestLatency"], json!([42.5]));
    }

    #[test]
    fn series_with_other_dimension_values_get_their_own_lines() {
        let registry = Registry::new(Mode::Emf);
        registry.record(Metric::Requests, ["SendMessage", "ok"], 1.0);
        registry.record(Metric::Requests, ["GetTask", "client_error"], 1.0);
        registry.record(Metric::LeaseTakeovers, ["", ""], 3.0);
        let lines = printed(&registry);
        assert_eq!(lines.len(), 3, "{lines:?}");
        let takeovers = lines
            .iter()
            .find(|l| l.get("LeaseTakeovers").is_some())
            .expect("takeovers");
        assert_eq!(directive(takeovers)["Dimensions"], json!([[]]));
        assert_eq!(takeovers["LeaseTakeovers"], 3.0);
        let get = lines
            .iter()
            .find(|l| l["Method"] == "GetTask")
            .expect("GetTask");
        assert_eq!(get["Outcome"], "client_error");
        assert!(get.get("RequestLatency").is_none());
    }

    #[test]
    fn more_than_100_observations_continue_on_further_lines() {
        let registry = Registry::new(Mode::Emf);
        for i in 0..250 {
            registry.record(Metric::ModelLatency, ["echo", "ok"], f64::from(i));
        }
        registry.record(Metric::ModelTokens, ["echo", "input"], 10.0);
        let lines = printed(&registry);
        let latencies: Vec<usize> = lines
            .iter()
            .filter_map(|l| l["ModelLatency"].as_array().map(Vec::len))
            .collect();
        assert_eq!(latencies, vec![100, 100, 50]);
        for line in &lines {
            let named = directive(line)["Metrics"].as_array().expect("metrics");
            assert!(!named.is_empty() && named.len() <= 100);
            for metric in named {
                assert!(line.get(metric["Name"].as_str().expect("name")).is_some());
            }
        }
        assert!(ALL.len() <= 100, "one directive holds every metric");
    }

    #[test]
    fn nothing_recorded_prints_nothing() {
        assert!(printed(&Registry::new(Mode::Emf)).is_empty());
    }
}
