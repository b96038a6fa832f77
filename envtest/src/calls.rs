//! Every API call of the harness has a deadline.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// The deadline of one API call.
pub const CALL_DEADLINE: Duration = Duration::from_secs(15);

/// Runs `call` with [`CALL_DEADLINE`], naming it `what` in errors.
pub async fn within<T>(
    what: impl Into<String>,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T> {
    let what = what.into();
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(Error::api(what, source)),
        Err(_) => Err(Error::Timeout {
            what,
            waited: CALL_DEADLINE,
        }),
    }
}

/// Whether `error` is the API's answer with HTTP status `code`.
pub fn is_status(error: &Error, code: u16) -> bool {
    matches!(error, Error::Api { source: kube::Error::Api(status), .. } if status.code == code)
}

/// The current time as the API writes a `Time` (seconds) and a `MicroTime`.
pub fn now_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The current time as a `MicroTime` (leases).
pub fn now_micro_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
