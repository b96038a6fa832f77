//! The AdmissionReview wire format (`admission.k8s.io/v1`): decode a request, decide, encode
//! the response. A body that is not a v1 AdmissionReview with a request is the caller's error
//! (HTTP 400); anything about the NodeMaintenance itself is answered with a normal denial.

use kube::core::admission::{AdmissionResponse, Operation};
use kube::core::{Status, TypeMeta};
use serde::Deserialize;
use serde_json::Value;
use tracing::info;

use tokio::time::Instant;

use super::lookups::Lookups;
use super::rules::Denial;
use super::validate;
use crate::crd::{NodeMaintenance, NodeMaintenanceSpec, OnDrainTimeout};

/// The only AdmissionReview version served (the webhook configuration asks for it alone).
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a request body is not a usable AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON of the AdmissionReview shape.
    #[error("malformed AdmissionReview: {0}")]
    Malformed(#[source] serde_json::Error),
    /// The body is an AdmissionReview of another version or kind.
    #[error(
        "expected kind AdmissionReview of apiVersion {ADMISSION_API_VERSION}, got kind {kind:?} of apiVersion {api_version:?}"
    )]
    WrongType {
        /// The apiVersion the body declared.
        api_version: String,
        /// The kind the body declared.
        kind: String,
    },
    /// The AdmissionReview carries no `request`.
    #[error("AdmissionReview has no request")]
    NoRequest,
}

/// The parts of an AdmissionReview the webhook reads. Everything else (`userInfo`, `options`,
/// `managedFields`, the status...) is skipped without being built, so however a body is shaped
/// it costs about its own size in memory: a generic JSON tree of a few MiB of nested arrays
/// would cost hundreds.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<ReviewRequest>,
}

/// The request of an AdmissionReview, as far as the webhook needs it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRequest {
    /// Echoed in the response: the API server matches the two by it.
    pub uid: String,
    /// The object's name (for logs).
    #[serde(default)]
    pub name: String,
    /// CREATE, UPDATE, ...
    pub operation: Operation,
    #[serde(default)]
    object: Option<WireObject>,
    #[serde(default)]
    old_object: Option<WireObject>,
}

/// An object of the review, read leniently: whether it is a usable NodeMaintenance is the
/// webhook's verdict (a denial), not a malformed request.
#[derive(Debug, Deserialize)]
struct WireObject {
    #[serde(default)]
    spec: Option<WireSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    drain_timeout: Option<String>,
    #[serde(default)]
    on_drain_timeout: Option<String>,
}

/// Parses a request body into the request it carries.
pub fn decode(body: &[u8]) -> Result<ReviewRequest, ReviewError> {
    let review: WireReview = serde_json::from_slice(body).map_err(ReviewError::Malformed)?;
    if review.api_version != ADMISSION_API_VERSION || review.kind != "AdmissionReview" {
        return Err(ReviewError::WrongType {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    review.request.ok_or(ReviewError::NoRequest)
}

/// Decides one admission request by `deadline`, never failing: every problem is a denial with
/// a message.
pub async fn decide(
    lookups: &Lookups,
    request: &ReviewRequest,
    deadline: Instant,
) -> AdmissionResponse {
    let verdict = match request.operation {
        Operation::Create => match object(request.object.as_ref(), "object") {
            Ok(nm) => validate::create(lookups, &nm, deadline).await,
            Err(denial) => Err(denial),
        },
        Operation::Update => {
            match (
                object(request.old_object.as_ref(), "oldObject"),
                object(request.object.as_ref(), "object"),
            ) {
                (Ok(old), Ok(new)) => validate::update(&old, &new),
                (Err(denial), _) | (_, Err(denial)) => Err(denial),
            }
        }
        // The webhook is registered for CREATE and UPDATE only; anything else passes.
        Operation::Delete | Operation::Connect => Ok(()),
    };
    // `invalid` is the one constructor that takes no kube AdmissionRequest; its fields are
    // then set as `From<&AdmissionRequest>` would.
    let mut response = AdmissionResponse::invalid("");
    response.types = TypeMeta {
        api_version: ADMISSION_API_VERSION.into(),
        kind: "AdmissionReview".into(),
    };
    response.uid = request.uid.clone();
    response.allowed = true;
    response.result = Status::default();
    match verdict {
        Ok(()) => {
            info!(name = %request.name, operation = ?request.operation, "admission allowed");
            response
        }
        Err(denial) => {
            info!(name = %request.name, operation = ?request.operation, reason = %denial, "admission denied");
            deny(response, &denial)
        }
    }
}

/// The response as the AdmissionReview JSON the API server expects.
pub fn encode(response: AdmissionResponse) -> Value {
    // Serializing plain owned data cannot fail; Null would make the API server refuse (fail
    // closed), never allow.
    serde_json::to_value(response.into_review()).unwrap_or(Value::Null)
}

/// A denial shaped like controller-runtime's (code 403, reason Forbidden), which the API server
/// relays to the user as "admission webhook ... denied the request: <message>".
fn deny(mut response: AdmissionResponse, denial: &Denial) -> AdmissionResponse {
    response.allowed = false;
    response.result = Status::failure(&denial.message, "Forbidden").with_code(403);
    response
}

fn object(object: Option<&WireObject>, field: &str) -> Result<NodeMaintenance, Denial> {
    let object = object.ok_or_else(|| Denial {
        message: format!("invalid request: the AdmissionRequest has no {field}"),
    })?;
    let spec = object.spec.as_ref().ok_or_else(|| Denial {
        message: format!("invalid request: {field} is not a NodeMaintenance: it has no spec"),
    })?;
    let node_name = spec.node_name.clone().ok_or_else(|| Denial {
        message: format!(
            "invalid request: {field} is not a NodeMaintenance: it has no spec.nodeName"
        ),
    })?;
    let on_drain_timeout = match spec.on_drain_timeout.as_deref() {
        None => None,
        Some("Hold") => Some(OnDrainTimeout::Hold),
        Some("Undo") => Some(OnDrainTimeout::Undo),
        Some(other) => {
            return Err(Denial {
                message: format!("invalid spec.onDrainTimeout {other:?}: it must be Hold or Undo"),
            });
        }
    };
    Ok(NodeMaintenance::new(
        "",
        NodeMaintenanceSpec {
            node_name,
            reason: spec.reason.clone(),
            drain_timeout: spec.drain_timeout.clone(),
            on_drain_timeout,
        },
    ))
}
