//! The recorder's storage: one series per metric and label values, found under a read lock
//! and updated with atomics (no allocation once a series exists), read back cumulatively
//! (Prometheus) or drained (EMF: what one invocation recorded).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::catalog::{BUCKETS_MS, Kind, Metric};

/// What the registry keeps of histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every observation until the next drain (EMF sends the values themselves, so
    /// CloudWatch computes exact percentiles).
    Emf,
    /// Cumulative bucket counts, sum and count (the Prometheus histogram).
    Prometheus,
}

/// A series: its metric and its label values (in the order of the metric's labels; unused
/// places are empty).
pub type Labels = [&'static str; 2];

/// Observations kept per histogram series between two drains; past it only the count and sum
/// grow (an invocation that long is an outlier, and the memory stays bounded).
const MAX_KEPT: usize = 10_000;

/// An `f64` updated atomically (its bits in an `AtomicU64`).
#[derive(Debug, Default)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn add(&self, value: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    fn take(&self) -> f64 {
        f64::from_bits(self.0.swap(0f64.to_bits(), Ordering::Relaxed))
    }
}

#[derive(Debug)]
struct Histogram {
    /// Per bucket of [`BUCKETS_MS`], then `+Inf` (not cumulative here).
    buckets: [AtomicU64; BUCKETS_MS.len() + 1],
    count: AtomicU64,
    sum: AtomicF64,
    kept: Option<Mutex<Vec<f64>>>,
}

#[derive(Debug)]
enum Series {
    Counter(AtomicF64),
    Histogram(Box<Histogram>),
}

impl Series {
    fn new(kind: Kind, mode: Mode) -> Self {
        match kind {
            Kind::Counter => Series::Counter(AtomicF64::default()),
            Kind::Histogram => Series::Histogram(Box::new(Histogram {
                buckets: std::array::from_fn(|_| AtomicU64::new(0)),
                count: AtomicU64::new(0),
                sum: AtomicF64::default(),
                kept: (mode == Mode::Emf).then(|| Mutex::new(Vec::new())),
            })),
        }
    }

    fn record(&self, value: f64) {
        match self {
            Series::Counter(total) => total.add(value),
            Series::Histogram(h) => {
                let bucket = BUCKETS_MS
                    .iter()
                    .position(|bound| value <= *bound)
                    .unwrap_or(BUCKETS_MS.len());
                h.buckets[bucket].fetch_add(1, Ordering::Relaxed);
                h.count.fetch_add(1, Ordering::Relaxed);
                h.sum.add(value);
                if let Some(kept) = &h.kept
                    && let Ok(mut kept) = kept.lock()
                    && kept.len() < MAX_KEPT
                {
                    kept.push(value);
                }
            }
        }
    }
}

/// A series as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub metric: Metric,
    pub labels: Labels,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Counter(f64),
    Histogram {
        /// Cumulative counts per bucket of [`BUCKETS_MS`], then `+Inf`.
        buckets: Vec<u64>,
        count: u64,
        sum: f64,
        /// The observations themselves (EMF mode; empty in Prometheus mode).
        values: Vec<f64>,
    },
}

/// Every series recorded.
#[derive(Debug)]
pub struct Registry {
    mode: Mode,
    series: RwLock<HashMap<(Metric, Labels), Series>>,
}

impl Registry {
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            series: RwLock::new(HashMap::new()),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Adds `value` to a counter, or observes it in a histogram (by the metric's kind).
    pub fn record(&self, metric: Metric, labels: Labels, value: f64) {
        if let Ok(series) = self.series.read()
            && let Some(found) = series.get(&(metric, labels))
        {
            found.record(value);
            return;
        }
        // First time this series is seen: the one allocation it costs.
        if let Ok(mut series) = self.series.write() {
            series
                .entry((metric, labels))
                .or_insert_with(|| Series::new(metric.def().kind, self.mode))
                .record(value);
        }
    }

    /// Every series, cumulative (Prometheus), sorted by metric and labels.
    pub fn snapshot(&self) -> Vec<Sample> {
        self.read(false)
    }

    /// What was recorded since the last drain (EMF), sorted; series that recorded nothing
    /// are left out.
    pub fn drain(&self) -> Vec<Sample> {
        self.read(true)
    }

    fn read(&self, reset: bool) -> Vec<Sample> {
        let Ok(series) = self.series.read() else {
            return Vec::new();
        };
        let mut samples: Vec<Sample> = series
            .iter()
            .filter_map(|(&(metric, labels), series)| {
                let value = match series {
                    Series::Counter(total) => {
                        let v = if reset { total.take() } else { total.get() };
                        if reset && v == 0.0 {
                            return None;
                        }
                        Value::Counter(v)
                    }
                    Series::Histogram(h) => read_histogram(h, reset)?,
                };
                Some(Sample {
                    metric,
                    labels,
                    value,
                })
            })
            .collect();
        samples.sort_by(|a, b| (a.metric, a.labels).cmp(&(b.metric, b.labels)));
        samples
    }
}

fn read_histogram(h: &Histogram, reset: bool) -> Option<Value> {
    let load = |a: &AtomicU64| {
        if reset {
            a.swap(0, Ordering::Relaxed)
        } else {
            a.load(Ordering::Relaxed)
        }
    };
    let count = load(&h.count);
    if reset && count == 0 {
        return None;
    }
    let mut cumulative = 0;
    let buckets = h
        .buckets
        .iter()
        .map(|b| {
            cumulative += load(b);
            cumulative
        })
        .collect();
    let sum = if reset { h.sum.take() } else { h.sum.get() };
    let values = match &h.kept {
        Some(kept) => match kept.lock() {
            Ok(mut kept) if reset => std::mem::take(&mut *kept),
            Ok(kept) => kept.clone(),
            Err(_) => Vec::new(),
        },
        None => Vec::new(),
    };
    Some(Value::Histogram {
        buckets,
        count,
        sum,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_and_histograms_bucket_their_observations() {
        let registry = Registry::new(Mode::Prometheus);
        registry.record(Metric::Requests, ["SendMessage", "ok"], 1.0);
        registry.record(Metric::Requests, ["SendMessage", "ok"], 1.0);
        registry.record(Metric::RequestLatency, ["SendMessage", "ok"], 7.0);
        registry.record(Metric::RequestLatency, ["SendMessage", "ok"], 70_000.0);
        let samples = registry.snapshot();
        assert_eq!(samples[0].value, Value::Counter(2.0));
        let Value::Histogram {
            buckets,
            count,
            sum,
            values,
        } = &samples[1].value
        else {
            panic!("a histogram: {samples:?}");
        };
        assert_eq!(*count, 2);
        assert_eq!(*sum, 70_007.0);
        assert_eq!(buckets[1], 0, "≤ 5 ms");
        assert_eq!(buckets[2], 1, "≤ 10 ms");
        assert_eq!(buckets[BUCKETS_MS.len() - 1], 1, "≤ 60 s");
        assert_eq!(buckets[BUCKETS_MS.len()], 2, "+Inf");
        assert!(values.is_empty(), "Prometheus keeps no observations");
        // Cumulative: a second snapshot sees the same.
        assert_eq!(registry.snapshot(), samples);
    }

    #[test]
    fn a_drain_returns_what_was_recorded_since_the_last_one() {
        let registry = Registry::new(Mode::Emf);
        registry.record(Metric::ModelLatency, ["echo", "ok"], 12.0);
        registry.record(Metric::LeaseTakeovers, ["", ""], 1.0);
        let first = registry.drain();
        assert_eq!(first.len(), 2);
        assert!(matches!(&first[0].value, Value::Histogram { values, .. } if values == &[12.0]));
        assert_eq!(registry.drain(), Vec::new(), "nothing new");
        registry.record(Metric::LeaseTakeovers, ["", ""], 2.0);
        assert_eq!(registry.drain()[0].value, Value::Counter(2.0));
    }
}
