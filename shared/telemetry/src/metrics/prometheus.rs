//! The Prometheus text exposition format (0.0.4) of every series: `# HELP` and `# TYPE` for
//! each metric of the catalog, then its series (histograms as cumulative `_bucket`s, `_sum`
//! and `_count`).

use std::fmt::Write;

use super::catalog::{ALL, BUCKETS_MS, Kind, label_name};
use super::registry::{Sample, Value};

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition of `samples` (as [`Registry::snapshot`](super::Registry::snapshot) sorts
/// them).
pub fn render(samples: &[Sample]) -> String {
    let mut out = String::with_capacity(4096);
    for (index, def) in ALL.iter().enumerate() {
        let kind = match def.kind {
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# HELP {} {}", def.prometheus, def.help);
        let _ = writeln!(out, "# TYPE {} {kind}", def.prometheus);
        for sample in samples.iter().filter(|s| s.metric as usize == index) {
            let labels: Vec<(&str, &str)> = def
                .labels
                .iter()
                .map(|name| label_name(name))
                .zip(sample.labels.iter().copied())
                .collect();
            match &sample.value {
                Value::Counter(total) => {
                    let _ = writeln!(out, "{}{} {total}", def.prometheus, braces(&labels, None));
                }
                Value::Histogram {
                    buckets,
                    count,
                    sum,
                    ..
                } => {
                    for (bound, cumulative) in BUCKETS_MS.iter().zip(buckets) {
                        let le = bound.to_string();
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {cumulative}",
                            def.prometheus,
                            braces(&labels, Some(&le))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{}_bucket{} {count}",
                        def.prometheus,
                        braces(&labels, Some("+Inf"))
                    );
                    let _ = writeln!(out, "{}_sum{} {sum}", def.prometheus, braces(&labels, None));
                    let _ = writeln!(
                        out,
                        "{}_count{} {count}",
                        def.prometheus,
                        braces(&labels, None)
                    );
                }
            }
        }
    }
    out
}

/// `{a="x",b="y"}` (with `le` last when given), or nothing without labels.
fn braces(labels: &[(&str, &str)], le: Option<&str>) -> String {
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

/// A label value escaped as the format requires (backslash, double quote, new line).
fn escape(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::catalog::Metric;
    use crate::metrics::registry::{Mode, Registry};

    #[test]
    fn counters_and_histograms_in_the_text_format() {
        let registry = Registry::new(Mode::Prometheus);
        registry.record(Metric::Requests, ["GetTask", "client_error"], 1.0);
        registry.record(Metric::RequestLatency, ["GetTask", "client_error"], 3.0);
        registry.record(Metric::LeaseTakeovers, ["", ""], 1.0);
        registry.record(Metric::ModelTokens, ["my \"model\"", "input"], 5.0);
        let text = render(&registry.snapshot());
        assert!(
            text.contains("# TYPE th_requests_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("th_requests_total{method=\"GetTask\",outcome=\"client_error\"} 1\n")
        );
        assert!(text.contains("# TYPE th_request_duration_milliseconds histogram\n"));
        assert!(text.contains(
            "th_request_duration_milliseconds_bucket{method=\"GetTask\",outcome=\"client_error\",le=\"1\"} 0\n"
        ));
        assert!(text.contains(
            "th_request_duration_milliseconds_bucket{method=\"GetTask\",outcome=\"client_error\",le=\"5\"} 1\n"
        ));
        assert!(text.contains(
            "th_request_duration_milliseconds_bucket{method=\"GetTask\",outcome=\"client_error\",le=\"+Inf\"} 1\n"
        ));
        assert!(text.contains(
            "th_request_duration_milliseconds_count{method=\"GetTask\",outcome=\"client_error\"} 1\n"
        ));
        assert!(text.contains("th_lease_takeovers_total 1\n"));
        assert!(
            text.contains("th_model_tokens_total{model=\"my \\\"model\\\"\",kind=\"input\"} 5\n")
        );
        // Every metric is described, recorded or not.
        for def in &ALL {
            assert!(text.contains(&format!("# HELP {} ", def.prometheus)));
        }
    }
}
