//! Admission webhooks on `pods/eviction`, called as kube-apiserver calls them: every
//! ValidatingWebhookConfiguration (and MutatingWebhookConfiguration) in the store with a rule
//! matching the creation of `pods/eviction` and a `clientConfig.url` gets an `admission.k8s.io/v1`
//! AdmissionReview of the Eviction, over HTTPS trusting its `caBundle`, before the eviction is
//! decided. A refusal is the webhook's `status.code` (403 when it sets none below 400) and
//! `admission webhook "<name>" denied the request: <message>`, k8s.io/apiserver's words
//! (`webhookerrors.ToStatusErr`); a webhook that cannot be reached fails the request with a 500
//! under `failurePolicy: Fail` (the default) and is skipped under `Ignore`.
//!
//! Only URL webhooks are called (a Service reference has no Service to reach here), and
//! namespace and object selectors are not evaluated: enough for tests that run their own
//! webhook, as on a real API server, and for emulating workloads that act on evictions.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::ByteString;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::rest::Api;
use crate::selectors::Filter;

/// How long a webhook may take when its configuration says nothing (the API's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A webhook on `pods/eviction` found in the store.
#[derive(Debug, Clone)]
struct Webhook {
    name: String,
    url: String,
    ca_bundle: Vec<u8>,
    ignore_failure: bool,
    timeout: Duration,
}

fn holds(values: &Value, wanted: &str) -> bool {
    values
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == wanted || v == "*"))
}

/// Whether a rule matches the creation of `pods/eviction` (see the adapter's reading of the
/// same rules in nmo's `cluster::eviction_webhooks`).
fn rule_matches(rule: &Value) -> bool {
    let resource = rule["resources"].as_array().is_some_and(|r| {
        r.iter().any(|r| {
            matches!(
                r.as_str(),
                Some("pods/eviction" | "pods/*" | "*/eviction" | "*/*")
            )
        })
    });
    let scope = rule["scope"]
        .as_str()
        .is_none_or(|s| s == "*" || s == "Namespaced");
    resource
        && scope
        && holds(&rule["operations"], "CREATE")
        && holds(&rule["apiGroups"], "")
        && holds(&rule["apiVersions"], "v1")
}

fn webhook_of(hook: &Value) -> Option<Webhook> {
    let rules = hook["rules"].as_array()?;
    if !rules.iter().any(rule_matches) {
        return None;
    }
    let url = hook["clientConfig"]["url"].as_str()?.to_string();
    let ca_bundle = serde_json::from_value::<ByteString>(hook["clientConfig"]["caBundle"].clone())
        .map(|b| b.0)
        .unwrap_or_default();
    Some(Webhook {
        name: hook["name"].as_str().unwrap_or_default().to_string(),
        url,
        ca_bundle,
        ignore_failure: hook["failurePolicy"].as_str() == Some("Ignore"),
        timeout: hook["timeoutSeconds"]
            .as_u64()
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
    })
}

/// The webhooks on `pods/eviction` in the store: mutating ones first, as the API server runs
/// them.
fn eviction_webhooks(api: &Api) -> Vec<Webhook> {
    let mut found = Vec::new();
    for plural in [
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ] {
        let Ok(def) = api.def(("admissionregistration.k8s.io", plural)) else {
            continue;
        };
        for stored in api.store.list(&def, &Filter::default(), None, 0).0 {
            let Ok(config) = stored.value() else {
                continue;
            };
            let hooks = config["webhooks"].as_array().cloned().unwrap_or_default();
            found.extend(hooks.iter().filter_map(webhook_of));
        }
    }
    found
}

/// The clients of the webhooks called so far, by (base URL, CA bundle).
type Clients = Mutex<HashMap<(String, Vec<u8>), kube::Client>>;

/// A client for a webhook's URL, trusting its CA bundle; one per (URL, bundle), kept.
fn client_for(hook: &Webhook) -> Result<(kube::Client, String), String> {
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    let uri: http::Uri = hook.url.parse().map_err(|e| format!("bad URL: {e}"))?;
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), ToString::to_string);
    let base = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().map(ToString::to_string).unwrap_or_default()
    );
    let key = (base.clone(), hook.ca_bundle.clone());
    let clients = CLIENTS.get_or_init(Mutex::default);
    let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = clients.get(&key) {
        return Ok((client.clone(), path));
    }
    let mut config = kube::Config::new(base.parse().map_err(|e| format!("bad URL: {e}"))?);
    let roots: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(&hook.ca_bundle)
        .filter_map(Result::ok)
        .map(|der| der.to_vec())
        .collect();
    if !roots.is_empty() {
        config.root_cert = Some(roots);
    }
    config.read_timeout = Some(hook.timeout);
    config.connect_timeout = Some(hook.timeout);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    clients.insert(key, client.clone());
    Ok((client, path))
}

/// The AdmissionReview kube-apiserver sends for the eviction `body` of `ns/name` by `user`.
fn review_of(ns: &str, name: &str, body: &Value, user: &str) -> Value {
    let uid = format!("{:032x}", rand::random::<u128>());
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": name,
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": user},
            "object": body,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// Calls one webhook: its verdict (None: allowed), or why it could not be asked.
async fn call(hook: &Webhook, review: &Value) -> Result<Option<ApiError>, String> {
    let (client, path) = client_for(hook)?;
    let bytes = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(bytes)
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(hook.timeout, client.request::<Value>(request))
        .await
        .map_err(|_| "the webhook did not answer in time".to_string())?
        .map_err(|e| e.to_string())?;
    let response = &answer["response"];
    if response["allowed"].as_bool() == Some(true) {
        return Ok(None);
    }
    let status = &response["status"];
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(403);
    let denied = format!("admission webhook \"{}\" denied the request", hook.name);
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{denied}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{denied}: {r}"),
        _ => format!("{denied} without explanation"),
    };
    let reason = status["reason"].as_str().unwrap_or_default();
    Ok(Some(ApiError::new(code, reason, message)))
}

/// Asks every webhook on `pods/eviction` about the eviction `body` of `ns/name` by `user`.
pub async fn review_eviction(
    api: &Api,
    ns: &str,
    name: &str,
    body: &Value,
    user: &str,
) -> Result<(), ApiError> {
    let hooks = eviction_webhooks(api);
    if hooks.is_empty() {
        return Ok(());
    }
    let review = review_of(ns, name, body, user);
    for hook in hooks {
        match call(&hook, &review).await {
            Ok(None) => {}
            Ok(Some(refusal)) => return Err(refusal),
            Err(_) if hook.ignore_failure => {}
            Err(error) => {
                return Err(ApiError::internal(format!(
                    "failed calling webhook \"{}\": {error}",
                    hook.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_webhooks_whose_rules_cover_pods_eviction_are_called() {
        let hook = |resources: Value| {
            json!({"name": "h", "clientConfig": {"url": "https://127.0.0.1:1/r"},
                   "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": resources}]})
        };
        assert!(webhook_of(&hook(json!(["pods/eviction"]))).is_some());
        assert!(webhook_of(&hook(json!(["*/*"]))).is_some());
        assert!(webhook_of(&hook(json!(["pods"]))).is_none());
        assert!(webhook_of(&hook(json!(["*"]))).is_none());
        let service = json!({"name": "h", "clientConfig": {"service": {"name": "s"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                       "resources": ["pods/eviction"]}]});
        assert!(webhook_of(&service).is_none(), "no Service to reach here");
    }
}
