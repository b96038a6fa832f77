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
            api,
        }
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

/// The hook, if one is set.
#[derive(Default)]
pub struct Audit {
    hook: RwLock<Option<AuditHook>>,
}

impl Audit {
    /// Sets (or with None, removes) the hook.
    pub fn set(&self, hook: Option<AuditHook>) {
        *self.hook.write().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    /// Calls the hook, if any.
    pub(crate) fn served(&self, served: &Served<'_>) {
        let hook = self.hook.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook(served);
        }
    }
}
