//! An audit hook: a function the simulator calls for every request it is about to serve
//! (after RBAC and fault injection, right before the request takes effect), with the request
//! and read access to the stored objects as they are at that moment. Soak tests use it to
//! check invariants at the instant of each write (who led when a write landed, what a deleted
//! pod was), which counters alone cannot tell.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::accounting::RequestKey;
use crate::rest::Api;
use crate::selectors::Filter;

/// A request about to be served.
pub struct Served<'a> {
    /// What it is counted under (verb, resource, subresource, user, User-Agent).
    pub key: &'a RequestKey,
    /// Its namespace ("" when cluster scoped or across namespaces).
    pub namespace: &'a str,
    /// The object's name ("" for lists and creates of a collection).
    pub name: &'a str,
    /// Fault injection delivered it late, after its client may have given up
    /// ([`crate::FaultRule::delivered_late`]).
    pub late: bool,
    /// How long fault injection held it before it takes effect (zero: not at all).
    pub delay: std::time::Duration,
    api: &'a Api,
}

impl<'a> Served<'a> {
    pub(crate) fn new(
        key: &'a RequestKey,
        namespace: &'a str,
        name: &'a str,
        api: &'a Api,
    ) -> Self {
        Served {
            key,
            namespace,
            name,
            late: false,
            delay: std::time::Duration::ZERO,
            api,
        }
    }

    pub(crate) fn delivered_late(mut self, late: bool, delay: std::time::Duration) -> Self {
        self.late = late;
        self.delay = delay;
        self
    }

    /// An object as stored now (None when missing). `group` "" for core; `ns` "" when
    /// cluster scoped.
    pub fn get_json(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let def = self.api.registry.by_name((group, plural))?;
        self.api.store.get(&def, ns, name)?.value().ok()
    }

    /// The objects of a resource as stored now (namespace "" for all).
    pub fn list_json(&self, group: &str, plural: &str, ns: &str) -> Vec<Value> {
        let Ok(def) = self.api.def((group, plural)) else {
            return Vec::new();
        };
        let filter = Filter {
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        };
        self.api
            .store
            .list(&def, &filter, None, 0)
            .0
            .iter()
            .filter_map(|o| o.value().ok())
            .collect()
    }
}

/// The hook's type.
pub type AuditHook = Arc<dyn Fn(&Served<'_>) + Send + Sync>;

/// The type of the hook called once a request was served, with the HTTP status it was
/// answered with (the stored objects are then as the request left them).
pub type OutcomeHook = Arc<dyn Fn(&Served<'_>, u16) + Send + Sync>;

/// The hooks, if set.
#[derive(Default)]
pub struct Audit {
    hook: RwLock<Option<AuditHook>>,
    outcome: RwLock<Option<OutcomeHook>>,
}

impl Audit {
    /// Sets (or with None, removes) the hook.
    pub fn set(&self, hook: Option<AuditHook>) {
        *self.hook.write().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    /// Sets (or with None, removes) the outcome hook.
    pub fn set_outcome(&self, hook: Option<OutcomeHook>) {
        *self.outcome.write().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    /// Calls the outcome hook, if any.
    pub(crate) fn outcome(&self, served: &Served<'_>, status: u16) {
        let hook = self
            .outcome
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(served, status);
        }
    }

    /// Calls the hook, if any.
    pub(crate) fn served(&self, served: &Served<'_>) {
        let hook = self.hook.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook(served);
        }
    }
}
