//! The operator's command line: the flags of `nmo` (and its alias `nmo run`) and how the
//! process starts from them. It takes the Go operator's command line unchanged (see
//! `go_flags`, `zap` and `duration`), so a Deployment or CSV written for the Go operator runs
//! nmo as it is.

pub mod cluster_access;
pub mod commands;
pub mod duration;
pub mod go_flags;
pub mod zap;

use std::future::Future;

use crate::api_client::operator_client::{self, ClusterConfigError, cluster_config};
use crate::build_info;
use crate::observability::telemetry::{self, LogFormat, LogSettings};
use crate::operator::{self, OperatorOptions};

/// What `nmo run` logs when neither a flag nor RUST_LOG says otherwise.
const DEFAULT_LOG_LEVEL: &str = "info";

/// The flags of the operator process.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The operator's own flags.
    #[command(flatten)]
    pub options: OperatorOptions,
    /// Log line format (default text; --zap-encoder and --zap-devel set it too, this wins).
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// controller-runtime's logging flags.
    #[command(flatten)]
    pub zap: ZapFlags,
}

pub use zap::ZapFlags;

impl RunArgs {
    /// How to log: `--log-format`, else the `--zap-*` flags, else text; the level from
    /// `--zap-log-level` (over RUST_LOG), else RUST_LOG, else development mode's, else info.
    pub fn log_settings(&self) -> LogSettings {
        LogSettings {
            format: self
                .log_format
                .or_else(|| self.zap.format())
                .unwrap_or(LogFormat::Text),
            forced_filter: self.zap.level().map(str::to_string),
            time_encoding: self.zap.zap_time_encoding.unwrap_or_default(),
            default_filter: self
                .zap
                .default_level()
                .unwrap_or(DEFAULT_LOG_LEVEL)
                .to_string(),
        }
    }
}

/// Why the operator process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Logging or tracing could not start.
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
    /// No cluster configuration was found or it is unusable.
    #[error(transparent)]
    ClusterConfig(#[from] ClusterConfigError),
    /// The operator stopped with an error.
    #[error(transparent)]
    Operator(#[from] operator::OperatorError),
}

/// Runs the operator process: logging and tracing, the start-up line, then the operator
/// against the cluster of the kubeconfig (or the in-cluster configuration) until `shutdown`.
pub async fn run(args: RunArgs, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let settings = args.log_settings();
    let telemetry = telemetry::init_with(&settings)?;
    tracing::info!(
        version = build_info::VERSION,
        commit = build_info::COMMIT,
        log_format = ?settings.format,
        log_filter = %settings.effective_filter(),
        traces = %telemetry.describe(),
        config = ?args.options,
        "nmo starting"
    );
    let ignored = args.zap.ignored();
    if !ignored.is_empty() {
        tracing::warn!(
            flags = %ignored.join(" "),
            "accepted for compatibility with the Go operator, without effect in nmo"
        );
    }
    let outcome = async {
        // Bad flags are refused before anything else, with or without a cluster at hand.
        args.options
            .validate()
            .map_err(operator::OperatorError::from)?;
        let config = cluster_config(args.options.kubeconfig.as_deref()).await?;
        let client = operator_client::client(config, &args.options)
            .map_err(operator::OperatorError::from)?;
        operator::run(client, args.options, shutdown).await?;
        Ok(())
    }
    .await;
    if let Err(error) = &outcome {
        tracing::error!(%error, "nmo stopped");
    }
    telemetry.shutdown().await;
    outcome
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    /// `RunArgs` as the top-level `nmo` command flattens it.
    #[derive(Debug, Parser)]
    struct Probe {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Probe::try_parse_from(std::iter::once("/manager").chain(args.iter().copied()))
            .map(|probe| probe.run)
    }

    #[test]
    fn go_booleans_in_every_form() {
        assert!(!parse(&[]).unwrap().options.leader_elect);
        assert!(parse(&["--leader-elect"]).unwrap().options.leader_elect);
        assert!(
            parse(&["--leader-elect=true"])
                .unwrap()
                .options
                .leader_elect
        );
        assert!(
            !parse(&["--leader-elect=false"])
                .unwrap()
                .options
                .leader_elect
        );
        assert!(parse(&["--enable-http2=1"]).unwrap().options.enable_http2);
        assert!(
            !parse(&["--enable-http2=False"])
                .unwrap()
                .options
                .enable_http2
        );
        let error = parse(&["--leader-elect=maybe"]).unwrap_err().to_string();
        assert!(error.contains("not a boolean"), "{error}");
    }

    #[test]
    fn durations_with_units_or_seconds() {
        let args = parse(&[
            "--leader-elect-lease-duration=1m",
            "--leader-elect-renew-deadline",
            "40s",
            "--leader-elect-retry-period=2.5",
            "--lease-renew-interval=20m",
        ])
        .unwrap();
        assert_eq!(
            args.options.leader_elect_lease_duration,
            Duration::from_secs(60)
        );
        assert_eq!(
            args.options.leader_elect_renew_deadline,
            Duration::from_secs(40)
        );
        assert_eq!(
            args.options.leader_elect_retry_period,
            Duration::from_millis(2500)
        );
        assert_eq!(
            args.options.lease_renew_interval,
            Some(Duration::from_secs(1200))
        );
        assert!(parse(&["--lease-renew-interval=soon"]).is_err());
    }

    #[test]
    fn zap_flags_map_to_format_and_level() {
        let args = parse(&["--zap-encoder=json", "--zap-log-level=debug"]).unwrap();
        let settings = args.log_settings();
        assert_eq!(settings.format, LogFormat::Json);
        assert_eq!(settings.forced_filter.as_deref(), Some("debug"));
        assert_eq!(settings.effective_filter(), "debug");

        let devel = parse(&["--zap-devel"]).unwrap().log_settings();
        assert_eq!(devel.format, LogFormat::Text);
        assert_eq!(devel.default_filter, "debug");
        assert_eq!(devel.forced_filter, None);

        let production = parse(&["--zap-devel=false"]).unwrap().log_settings();
        assert_eq!(production.format, LogFormat::Json);
        assert_eq!(production.default_filter, "info");

        // nmo's own flag wins over the Go operator's.
        let ours = parse(&["--zap-encoder", "json", "--log-format=text"])
            .unwrap()
            .log_settings();
        assert_eq!(ours.format, LogFormat::Text);

        let plain = parse(&[]).unwrap().log_settings();
        assert_eq!(plain.format, LogFormat::Text);
        assert_eq!(plain.default_filter, "info");

        for bad in [
            "--zap-encoder=xml",
            "--zap-log-level=loud",
            "--zap-stacktrace-level=debug",
            "--zap-time-encoding=local",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad} accepted");
        }
        let accepted = parse(&[
            "--zap-stacktrace-level=panic",
            "--zap-time-encoding=rfc3339nano",
        ])
        .unwrap();
        assert_eq!(accepted.zap.ignored().len(), 1);
        assert_eq!(
            accepted.log_settings().time_encoding,
            crate::observability::zap_json::TimeEncoding::Rfc3339nano
        );
    }
}
