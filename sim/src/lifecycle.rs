//! Object lifecycle controllers: the namespace controller (a deleted namespace empties itself,
//! then goes) and the garbage collector (dependents whose owners are all gone are deleted).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::controller::next_batch;
use crate::resources::names;
use crate::rest::{Api, DeleteOpts};
use crate::selectors::Filter;
use crate::store::{EventType, Expect, Write};

/// Deletes the content of terminating namespaces and finally the namespaces.
fn sync_namespaces(api: &Api) -> bool {
    let Ok(nsdef) = api.def(names::NAMESPACES) else {
        return false;
    };
    let mut any = false;
    for ns in api.store.list(&nsdef, &Filter::default(), None, 0).0 {
        if !ns.deleting {
            continue;
        }
        any = true;
        let filter = Filter {
            namespace: Some(ns.name.clone()),
            ..Default::default()
        };
        let mut left = 0;
        for def in api.registry.all().into_iter().filter(|d| d.namespaced) {
            // Several versions of a resource share their objects: visit each once.
            if api
                .registry
                .by_name((&def.group, &def.plural))
                .is_some_and(|d| d.version != def.version)
            {
                continue;
            }
            for o in api.store.list(&def, &filter, None, 0).0 {
                left += 1;
                if !o.deleting {
                    let _ = api.delete(&def, &o.namespace, &o.name, &DeleteOpts::default());
                }
            }
        }
        if left == 0
            && let Ok(v) = ns.value()
        {
            let _ = api
                .store
                .commit(&nsdef, "", &ns.name, Expect::Rv(ns.rv), Write::Delete(v));
        }
    }
    any
}

/// Deletes the dependents of a deleted object whose owners are all gone.
fn collect(api: &Api, uid: &str) {
    for (tkey, key) in api.store.dependents(uid) {
        let Some(def) = api.registry.all().into_iter().find(|d| d.key() == tkey) else {
            continue;
        };
        let Some(o) = api.store.get(&def, &key.0, &key.1) else {
            continue;
        };
        if o.deleting || o.owner_uids.iter().any(|u| api.store.uid_exists(u)) {
            continue;
        }
        let _ = api.delete(&def, &key.0, &key.1, &DeleteOpts::default());
    }
}

/// Runs both until shutdown.
pub async fn run(api: Arc<Api>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = api.store.subscribe();
    let mut terminating = sync_namespaces(&api);
    loop {
        let idle = if terminating {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        let Some(batch) = next_batch(&mut rx, &mut shutdown, idle).await else {
            return;
        };
        let mut ns_changed = batch.resync || terminating;
        for ev in &batch.events {
            if ev.kind == EventType::Deleted {
                collect(&api, &ev.obj.uid);
                // An owner in foreground deletion goes once its last dependent is gone.
                for owner in &ev.obj.owner_uids {
                    if let Some((tkey, key)) = api.store.lookup_uid(owner)
                        && let Some(def) = api.registry.all().into_iter().find(|d| d.key() == tkey)
                    {
                        let _ = api.finish_foreground(&def, &key.0, &key.1);
                    }
                }
            }
            if (ev.def.group.as_str(), ev.def.plural.as_str()) == names::NAMESPACES {
                ns_changed = true;
            }
        }
        if ns_changed {
            terminating = sync_namespaces(&api);
        }
    }
}
