//! `[telemetry]`: exporting the gateway's traces over OTLP (off unless an endpoint is given).
//!
//! The standard OpenTelemetry variables apply when the table does not set a key:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`),
//! `OTEL_SERVICE_NAME`, and `OTEL_SDK_DISABLED=true` turns export off whatever is set. The
//! exporter itself is the binary's (`steadfast-cli`'s `otel` feature); this is pure data.

use serde::Deserialize;

/// `[telemetry]` as written in the file (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// The OTLP/HTTP endpoint's base URL (`http://collector:4318`; `/v1/traces` is added), or
    /// the traces URL itself when it ends in `/v1/traces`.
    pub endpoint: Option<String>,
    /// `service.name` of the exported spans (default `steadfast`).
    pub service_name: Option<String>,
    /// The share of new traces recorded, 0.0 to 1.0 (default 1.0); a client's sampled
    /// `traceparent` is always followed.
    pub sample_ratio: Option<f64>,
    /// `false` turns export off even when an endpoint is set (here or in the environment).
    pub enabled: Option<bool>,
}

/// Trace export, resolved from `[telemetry]` and the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    /// The full OTLP/HTTP traces URL (ends in `/v1/traces`).
    pub traces_endpoint: String,
    /// `service.name`.
    pub service_name: String,
    /// The share of new traces recorded.
    pub sample_ratio: f64,
}

impl RawTelemetry {
    /// Every offending key and what it must be.
    pub(crate) fn validate(&self) -> Result<(), Vec<(&'static str, String)>> {
        let mut errors = Vec::new();
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            errors.push((
                "endpoint",
                "must be an http:// or https:// URL (OTLP over HTTP, for example \"http://localhost:4318\")"
                    .to_owned(),
            ));
        }
        if let Some(r) = self.sample_ratio
            && !(0.0..=1.0).contains(&r)
        {
            errors.push(("sample_ratio", "must be between 0.0 and 1.0".to_owned()));
        }
        if self.service_name.as_deref() == Some("") {
            errors.push(("service_name", "must not be empty".to_owned()));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Export settings, or `None` when export is off: no endpoint in the table or the
    /// environment, `enabled = false`, or `OTEL_SDK_DISABLED=true`.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Option<Telemetry> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if self.enabled == Some(false)
            || env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return None;
        }
        let traces_endpoint = match &self.endpoint {
            Some(e) => traces_url(e),
            None => match env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(e) => e,
                None => traces_url(&env("OTEL_EXPORTER_OTLP_ENDPOINT")?),
            },
        };
        Some(Telemetry {
            traces_endpoint,
            service_name: self
                .service_name
                .clone()
                .or_else(|| env("OTEL_SERVICE_NAME"))
                .unwrap_or_else(|| "steadfast".to_owned()),
            sample_ratio: self.sample_ratio.unwrap_or(1.0),
        })
    }
}

/// The traces URL of an OTLP/HTTP base endpoint (the spec's rule: append `v1/traces`).
fn traces_url(base: &str) -> String {
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{}/v1/traces", base.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn off_without_an_endpoint() {
        assert_eq!(RawTelemetry::default().resolve(env(&[])), None);
    }

    #[test]
    fn the_environment_fills_what_the_table_leaves() {
        let t = RawTelemetry::default()
            .resolve(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
                ("OTEL_SERVICE_NAME", "gw"),
            ]))
            .unwrap();
        assert_eq!(t.traces_endpoint, "http://c:4318/v1/traces");
        assert_eq!(t.service_name, "gw");
        let raw = RawTelemetry {
            endpoint: Some("http://file:4318".into()),
            ..Default::default()
        };
        let t = raw
            .resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]))
            .unwrap();
        assert_eq!(t.traces_endpoint, "http://file:4318/v1/traces");
        assert_eq!(t.service_name, "steadfast");
        assert_eq!(
            raw.resolve(env(&[("OTEL_SDK_DISABLED", "TRUE")])),
            None,
            "OTEL_SDK_DISABLED wins"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let raw = RawTelemetry {
            endpoint: Some("collector:4318".into()),
            sample_ratio: Some(1.5),
            service_name: Some(String::new()),
            enabled: None,
        };
        let keys: Vec<_> = raw
            .validate()
            .unwrap_err()
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(keys, ["endpoint", "sample_ratio", "service_name"]);
    }
}
