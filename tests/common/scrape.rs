//! Prometheus scrapes read back: every sample of a text exposition, and the one a test asks for.

use std::collections::BTreeMap;

/// One sample: its metric name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of a scrape (Prometheus' text format, without escapes in label values).
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').expect("a label is key=value");
                    (key.to_owned(), value.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().expect("a sample's value is a number"),
            }
        })
        .collect()
}

/// The value of the sample named `name` whose labels include every pair of `labels`; `None`
/// when there is none.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
        })
        .map(|sample| sample.value)
}

/// Scrapes `url` (a `/metrics` endpoint).
pub async fn scrape(url: &str) -> Vec<Sample> {
    let response = reqwest::get(url).await.expect("the metrics listener answers");
    assert_eq!(response.status(), 200, "GET {url}");
    samples(&response.text().await.expect("a scrape has a body"))
}
