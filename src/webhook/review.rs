//! The AdmissionReview wire format (`admission.k8s.io/v1`): decode a request, decide, encode
//! the response. A body that is not a v1 AdmissionReview with a request is the caller's error
//! (HTTP 400); anything about the NodeMaintenance itself is answered with a normal denial.

use kube::Client;
use kube::core::DynamicObject;
use kube::core::Status;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;
use tracing::info;

use super::rules::Denial;
use super::validate;
use crate::crd::NodeMaintenance;

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

/// Parses a request body into the AdmissionRequest it carries.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(ReviewError::Malformed)?;
    if review.types.api_version != ADMISSION_API_VERSION || review.types.kind != "AdmissionReview" {
        return Err(ReviewError::WrongType {
            api_version: review.types.api_version,
            kind: review.types.kind,
        });
    }
    review.try_into().map_err(|_| ReviewError::NoRequest)
}

/// Decides one admission request, never failing: every problem is a denial with a message.
pub async fn decide(
    client: &Client,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let verdict = match request.operation {
        Operation::Create => match object(request.object.as_ref(), "object") {
            Ok(nm) => validate::create(client, &nm).await,
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
    let response = AdmissionResponse::from(request);
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

fn object(object: Option<&DynamicObject>, field: &str) -> Result<NodeMaintenance, Denial> {
    let object = object.ok_or_else(|| Denial {
        message: format!("invalid request: the AdmissionRequest has no {field}"),
    })?;
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| Denial {
            message: format!("invalid request: {field} is not a NodeMaintenance: {e}"),
        })
}
