//! The CA bundle in the ValidatingWebhookConfiguration: each webhook that calls nmo's Service
//! gets the Secret's CAs as its `caBundle`, and, once it has them, the failure policy its
//! annotation asks for. The install ships the webhook with `failurePolicy: Ignore` and the
//! annotation `Fail`: until nmo's certificate is trusted, the API server lets NodeMaintenances
//! through unchecked instead of refusing every one for a certificate nmo has not made yet
//! (nmo itself still refuses to drive a second maintenance of a node, and fails one for a
//! missing node); from then on the webhook fails closed, as the Go operator's does.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::info;

use super::ServingCertConfig;

/// The failure policy a webhook gets once its CA bundle is in place (`Fail` or `Ignore`);
/// without the annotation nmo leaves the policy alone.
pub const FAILURE_POLICY_ANNOTATION: &str = "nmo.medik8s.io/failure-policy-when-trusted";

/// Why the CA bundle could not be published (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The API server refused or failed.
    #[error("ValidatingWebhookConfiguration {name}: {source}")]
    Api {
        /// The configuration's name.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// No answer in time.
    #[error("ValidatingWebhookConfiguration {name}: no answer within {limit:?}")]
    Timeout {
        /// The configuration's name.
        name: String,
        /// The deadline.
        limit: std::time::Duration,
    },
    /// The configuration has no webhook calling nmo's Service: nothing would trust nmo.
    #[error(
        "ValidatingWebhookConfiguration {name} has no webhook calling service {namespace}/{service}"
    )]
    NoWebhook {
        /// The configuration's name.
        name: String,
        /// nmo's namespace.
        namespace: String,
        /// The webhook Service.
        service: String,
    },
}

/// The JSON patch that brings `configuration` in line (None: already is). Its first op tests
/// the resourceVersion read, so a configuration changed meanwhile is read again next round
/// rather than overwritten.
pub fn patch_for(
    configuration: &Value,
    config: &ServingCertConfig,
    ca_bundle: &[u8],
) -> Result<Option<Value>, PublishError> {
    // k8s-openapi's ByteString is base64 on the wire, as `caBundle` is.
    let encoded = serde_json::to_value(k8s_openapi::ByteString(ca_bundle.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let wanted_policy = configuration["metadata"]["annotations"][FAILURE_POLICY_ANNOTATION]
        .as_str()
        .filter(|p| matches!(*p, "Fail" | "Ignore"));
    let mut ops = Vec::new();
    let mut ours = 0;
    for (index, webhook) in configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let service = &webhook["clientConfig"]["service"];
        if service["name"] != config.service.as_str()
            || service["namespace"] != config.namespace.as_str()
        {
            continue;
        }
        ours += 1;
        if webhook["clientConfig"]["caBundle"] != encoded.as_str() {
            ops.push(json!({"op": "add", "path": format!("/webhooks/{index}/clientConfig/caBundle"), "value": encoded}));
        }
        if let Some(policy) = wanted_policy
            && webhook["failurePolicy"] != policy
        {
            ops.push(json!({"op": "add", "path": format!("/webhooks/{index}/failurePolicy"), "value": policy}));
        }
    }
    if ours == 0 {
        return Err(PublishError::NoWebhook {
            name: config.webhook_configuration.clone(),
            namespace: config.namespace.clone(),
            service: config.service.clone(),
        });
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let version = configuration["metadata"]["resourceVersion"].clone();
    ops.insert(
        0,
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": version}),
    );
    Ok(Some(Value::Array(ops)))
}

/// Reads the configuration and patches it when it differs.
pub async fn publish(
    client: &Client,
    config: &ServingCertConfig,
    ca_bundle: &[u8],
) -> Result<(), PublishError> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = &config.webhook_configuration;
    let limit = config.call_timeout;
    let error = |source| PublishError::Api {
        name: name.clone(),
        source,
    };
    let timeout = || PublishError::Timeout {
        name: name.clone(),
        limit,
    };
    let current = tokio::time::timeout(limit, api.get(name))
        .await
        .map_err(|_| timeout())?
        .map_err(error)?;
    let current = serde_json::to_value(&current).map_err(|e| error(kube::Error::SerdeError(e)))?;
    let Some(ops) = patch_for(&current, config, ca_bundle)? else {
        return Ok(());
    };
    let patch: json_patch::Patch =
        serde_json::from_value(ops).map_err(|e| error(kube::Error::SerdeError(e)))?;
    let (params, patch) = (PatchParams::default(), Patch::Json::<()>(patch));
    let patched = api.patch(name, &params, &patch);
    tokio::time::timeout(limit, patched)
        .await
        .map_err(|_| timeout())?
        .map_err(error)?;
    info!(configuration = %name, "webhook CA bundle published");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ServingCertConfig {
        ServingCertConfig {
            secret: "nmo-webhook-cert".into(),
            namespace: "nmo-system".into(),
            service: "nmo-webhook".into(),
            webhook_configuration: "nmo-validating-webhook".into(),
            lifetimes: super::super::Lifetimes::default(),
            check_interval: std::time::Duration::from_secs(60),
            call_timeout: std::time::Duration::from_secs(10),
        }
    }

    fn configuration(ca_bundle: Option<&str>, policy: &str, annotated: bool) -> Value {
        let mut client_config =
            json!({"service": {"name": "nmo-webhook", "namespace": "nmo-system"}});
        if let Some(ca) = ca_bundle {
            client_config["caBundle"] = json!(ca);
        }
        let annotations = if annotated {
            json!({FAILURE_POLICY_ANNOTATION: "Fail"})
        } else {
            json!({})
        };
        json!({
            "metadata": {"name": "nmo-validating-webhook", "resourceVersion": "7", "annotations": annotations},
            "webhooks": [
                {"name": "other", "clientConfig": {"service": {"name": "else", "namespace": "x"}}, "failurePolicy": "Ignore"},
                {"name": "vnodemaintenance.kb.io", "clientConfig": client_config, "failurePolicy": policy},
            ]
        })
    }

    #[test]
    fn the_bundle_and_the_annotated_policy_go_to_nmo_s_webhook_only_under_a_version_test() {
        let ops = patch_for(&configuration(None, "Ignore", true), &config(), b"CA")
            .expect("ours")
            .expect("a patch");
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Q0E="},
                {"op": "add", "path": "/webhooks/1/failurePolicy", "value": "Fail"},
            ])
        );
    }

    #[test]
    fn nothing_is_patched_when_in_line_and_the_policy_is_left_alone_without_the_annotation() {
        assert_eq!(
            patch_for(&configuration(Some("Q0E="), "Fail", true), &config(), b"CA").expect("ours"),
            None
        );
        assert_eq!(
            patch_for(
                &configuration(Some("Q0E="), "Ignore", false),
                &config(),
                b"CA"
            )
            .expect("ours"),
            None
        );
    }

    #[test]
    fn a_configuration_without_nmo_s_webhook_is_an_error() {
        let mut other = config();
        other.service = "missing".into();
        let error =
            patch_for(&configuration(None, "Ignore", true), &other, b"CA").expect_err("not ours");
        assert!(error.to_string().contains("nmo-system/missing"), "{error}");
    }
}
