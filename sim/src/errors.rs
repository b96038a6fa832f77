//! `metav1.Status` errors with the codes, reasons and messages a real API server sends.

use bytes::Bytes;
use serde_json::{Value, json};

/// An API error, rendered as a `metav1.Status` body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason` (empty for some errors, as in the real server).
    pub reason: String,
    /// Human readable message.
    pub message: String,
    /// `metav1.StatusDetails`, when the real server sends them.
    pub details: Option<Value>,
    /// Seconds for the `Retry-After` header (0: no header).
    pub retry_after: u64,
    /// A continue token in the Status's list metadata (an expired list's way on). Boxed: the
    /// error travels in `Result`s everywhere and stays small.
    pub list_continue: Option<Box<str>>,
}

/// A `metav1.StatusCause`.
pub fn cause(reason: &str, message: &str, field: Option<&str>) -> Value {
    let mut c = json!({"reason": reason, "message": message});
    if let Some(f) = field {
        c["field"] = json!(f);
    }
    c
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Value::Object(d)
}

/// `plural` or `plural.group`, as the server formats a GroupResource.
pub fn group_resource(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    /// A bare error.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: 0,
            list_continue: None,
        }
    }

    /// Adds details.
    #[must_use]
    pub fn with_details(mut self, d: Value) -> Self {
        self.details = Some(d);
        self
    }

    /// Carries a continue token in the Status's metadata.
    #[must_use]
    pub fn with_continue(mut self, token: String) -> Self {
        self.list_continue = Some(token.into_boxed_str());
        self
    }

    /// Names the object's kind (`Pod`) rather than its resource (`pods`) in the details, as
    /// the real server does for a failed precondition.
    #[must_use]
    pub fn with_kind_in_details(mut self, kind: &str) -> Self {
        if let Some(details) = self.details.as_mut() {
            details["kind"] = json!(kind);
        }
        self
    }

    /// 404 `<resource> "<name>" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", group_resource(group, plural)),
        )
        .with_details(details(name, group, plural))
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!(
                "{} \"{name}\" already exists",
                group_resource(group, plural)
            ),
        )
        .with_details(details(name, group, plural))
    }

    /// 409 Conflict with the given explanation.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                group_resource(group, plural)
            ),
        )
        .with_details(details(name, group, plural))
    }

    /// 409 Conflict for a stale resourceVersion (the optimistic concurrency failure).
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `<Kind> "<name>" is invalid: <field>: <detail>`.
    pub fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<(String, String, String)>,
    ) -> Self {
        // causes: (reason, field, message)
        let parts: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = details(name, group, kind);
        d["causes"] = Value::Array(
            causes
                .iter()
                .map(|(r, f, m)| cause(r, m, Some(f)))
                .collect(),
        );
        Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {joined}"),
        )
        .with_details(d)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden: `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let gr = group_resource(group, plural);
        let msg = if name.is_empty() {
            format!("{gr} is forbidden: {why}")
        } else {
            format!("{gr} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", msg).with_details(details(name, group, plural))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 429 TooManyRequests with optional causes.
    pub fn too_many_requests(message: &str, retry_after: u64, causes: Vec<Value>) -> Self {
        let mut d = serde_json::Map::new();
        if !causes.is_empty() {
            d.insert("causes".into(), Value::Array(causes));
        }
        if retry_after > 0 {
            d.insert("retryAfterSeconds".into(), json!(retry_after));
        }
        let mut e = Self::new(429, "TooManyRequests", message).with_details(Value::Object(d));
        e.retry_after = retry_after;
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let m = message.into();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {m}"),
        )
        .with_details(json!({"causes": [{"message": m}]}))
    }

    /// 410 Expired (`too old resource version`).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        });
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(token) = &self.list_continue {
            s["metadata"]["continue"] = json!(token.as_ref());
        }
        s["code"] = json!(self.code);
        s
    }

    /// The HTTP response for this error.
    pub fn into_response(self) -> axum::response::Response {
        let body = Bytes::from(serde_json::to_vec(&self.to_status()).unwrap_or_default());
        let mut b = http::Response::builder()
            .status(self.code)
            .header(http::header::CONTENT_TYPE, "application/json");
        if self.retry_after > 0 {
            b = b.header(http::header::RETRY_AFTER, self.retry_after.to_string());
        }
        b.body(axum::body::Body::from(body))
            .unwrap_or_else(|_| axum::response::Response::new(axum::body::Body::empty()))
    }
}

/// Errors of the simulator's own machinery (startup, configuration, files).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Binding or serving the HTTP listener failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A configuration object (CRD, scenario object) was not valid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The API layer refused an object while seeding.
    #[error("API error while seeding: {0}")]
    Api(#[from] ApiError),
    /// Building a kube client failed.
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// YAML (de)serialization failed.
    #[error("YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}
