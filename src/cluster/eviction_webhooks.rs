//! The admission webhooks that see eviction requests: one read-only watch each of the
//! Validating and the Mutating WebhookConfigurations (few objects on any cluster), reduced to
//! the names of the webhooks whose rules match `pods/eviction`. KubeVirt's virt-api
//! (`virt-launcher-eviction-interceptor.kubevirt.io`) and Strimzi's Drain Cleaner register one.

use std::collections::BTreeSet;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
};
use kube::runtime::watcher;
use kube::{Api, Client};
use nmo_actors::interception::EvictionWebhooks;

use super::watch::{self, InitialLists};
use super::watch_health::WatchHealth;

/// Whether a list of rule values holds `wanted` or the wildcard.
fn holds(values: Option<&Vec<String>>, wanted: &str) -> bool {
    values.is_some_and(|values| values.iter().any(|v| v == wanted || v == "*"))
}

/// Whether a webhook rule matches the creation of a `pods/eviction` (core group, v1).
/// `resources` may name it, `pods/*`, `*/eviction` or `*/*`; a bare `*` means every resource
/// but no subresource, as the API server reads it.
fn rule_matches_eviction(rule: &RuleWithOperations) -> bool {
    let resource = rule.resources.as_ref().is_some_and(|resources| {
        resources.iter().any(|r| {
            matches!(
                r.as_str(),
                "pods/eviction" | "pods/*" | "*/eviction" | "*/*"
            )
        })
    });
    let scope = rule
        .scope
        .as_deref()
        .is_none_or(|scope| scope == "*" || scope == "Namespaced");
    resource
        && scope
        && holds(rule.operations.as_ref(), "CREATE")
        && holds(rule.api_groups.as_ref(), "")
        && holds(rule.api_versions.as_ref(), "v1")
}

/// The names of the webhooks, given as (name, rules), whose rules match `pods/eviction`.
fn eviction_webhooks<'a>(
    webhooks: impl Iterator<Item = (&'a String, Option<&'a Vec<RuleWithOperations>>)>,
) -> Vec<String> {
    webhooks
        .filter(|(_, rules)| rules.is_some_and(|rules| rules.iter().any(rule_matches_eviction)))
        .map(|(name, _)| name.clone())
        .collect()
}

pub(crate) fn validating(config: &ValidatingWebhookConfiguration) -> Vec<String> {
    let webhooks = config.webhooks.iter().flatten();
    eviction_webhooks(webhooks.map(|w| (&w.name, w.rules.as_ref())))
}

pub(crate) fn mutating(config: &MutatingWebhookConfiguration) -> Vec<String> {
    let webhooks = config.webhooks.iter().flatten();
    eviction_webhooks(webhooks.map(|w| (&w.name, w.rules.as_ref())))
}

/// Which of the two watches a list came from.
enum Kind {
    Validating(Vec<Vec<String>>),
    Mutating(Vec<Vec<String>>),
}

/// The webhooks on `pods/eviction`: the whole set after each list and change of either kind of
/// configuration. Watch errors are retried with backoff (and logged) by the watches, which
/// report to `health` (deploy/ grants both lists, so a failing one is a fault to see).
pub fn watch(
    client: Client,
    lists: InitialLists,
    health: &WatchHealth,
) -> BoxStream<'static, EvictionWebhooks> {
    let config = watcher::Config::default();
    let validating = watch::snapshots(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        config.clone(),
        lists.clone(),
        health.register("ValidatingWebhookConfigurations"),
        validating,
    )
    .map(Kind::Validating);
    let mutating = watch::snapshots(
        Api::<MutatingWebhookConfiguration>::all(client),
        config,
        lists,
        health.register("MutatingWebhookConfigurations"),
        mutating,
    )
    .map(Kind::Mutating);
    let mut seen: (BTreeSet<String>, BTreeSet<String>) = Default::default();
    futures::stream::select(validating, mutating)
        .map(move |list| {
            let flatten = |configs: Vec<Vec<String>>| configs.into_iter().flatten().collect();
            match list {
                Kind::Validating(configs) => seen.0 = flatten(configs),
                Kind::Mutating(configs) => seen.1 = flatten(configs),
            }
            EvictionWebhooks {
                names: seen.0.union(&seen.1).cloned().collect(),
            }
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        ops: &[&str],
    ) -> RuleWithOperations {
        let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        RuleWithOperations {
            api_groups: strings(groups),
            api_versions: strings(versions),
            resources: strings(resources),
            operations: strings(ops),
            scope: None,
        }
    }

    #[test]
    fn rules_on_pods_eviction_and_wildcards_covering_it_match() {
        // KubeVirt's virt-api-validator and Strimzi's Drain Cleaner.
        assert!(rule_matches_eviction(&rule(
            &[""],
            &["v1"],
            &["pods/eviction"],
            &["CREATE"]
        )));
        assert!(rule_matches_eviction(&rule(
            &["*"],
            &["*"],
            &["*/*"],
            &["*"]
        )));
        assert!(rule_matches_eviction(&rule(
            &[""],
            &["v1"],
            &["pods/*"],
            &["CREATE"]
        )));
        // A bare `*` is every resource but no subresource.
        assert!(!rule_matches_eviction(&rule(
            &["*"],
            &["*"],
            &["*"],
            &["*"]
        )));
        assert!(!rule_matches_eviction(&rule(
            &[""],
            &["v1"],
            &["pods"],
            &["CREATE"]
        )));
        assert!(!rule_matches_eviction(&rule(
            &[""],
            &["v1"],
            &["pods/eviction"],
            &["UPDATE"]
        )));
        assert!(!rule_matches_eviction(&rule(
            &["apps"],
            &["v1"],
            &["pods/eviction"],
            &["CREATE"]
        )));
        let mut cluster_scoped = rule(&[""], &["v1"], &["pods/eviction"], &["CREATE"]);
        cluster_scoped.scope = Some("Cluster".into());
        assert!(!rule_matches_eviction(&cluster_scoped));
    }

    #[test]
    fn only_the_webhooks_with_a_matching_rule_are_named() {
        let config: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "virt-api-validator"},
            "webhooks": [
                {"name": "virt-launcher-eviction-interceptor.kubevirt.io",
                 "clientConfig": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                            "resources": ["pods/eviction"]}]},
                {"name": "virtualmachine-validator.kubevirt.io",
                 "clientConfig": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "rules": [{"apiGroups": ["kubevirt.io"], "apiVersions": ["v1"],
                            "operations": ["CREATE"], "resources": ["virtualmachines"]}]}
            ]
        }))
        .expect("a valid configuration");
        assert_eq!(
            validating(&config),
            ["virt-launcher-eviction-interceptor.kubevirt.io"]
        );
    }
}
