//! The REST semantics shared by the HTTP layer and the in-process controllers: create (names,
//! uids, defaults), update with optimistic concurrency, status subresource masking, generation,
//! graceful deletion and finalizers, patches, lists with pagination.

use std::sync::Arc;

use rand::Rng;
use serde_json::{Value, json};

use crate::convert;
use crate::errors::{ApiError, cause};
use crate::object::{Key, StoredObject};
use crate::patch::{self, PatchType};
use crate::resources::{self, Registry, ResourceDef, names};
use crate::schema;
use crate::selectors::Filter;
use crate::store::{CommitError, Expect, Store, Write};
use crate::strategy;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// The main resource (status changes are ignored when there is a status subresource).
    Main,
    /// The `status` subresource (only status changes are kept).
    Status,
}

/// DeleteOptions.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// gracePeriodSeconds.
    pub grace: Option<i64>,
    /// preconditions.uid.
    pub uid: Option<String>,
    /// preconditions.resourceVersion.
    pub rv: Option<String>,
    /// propagationPolicy.
    pub propagation: Option<String>,
    /// dryRun=All.
    pub dry_run: bool,
}

impl DeleteOpts {
    /// From a DeleteOptions object (request body or an Eviction's deleteOptions).
    pub fn from_value(v: &Value) -> Self {
        DeleteOpts {
            grace: v.get("gracePeriodSeconds").and_then(|g| g.as_i64()),
            uid: v
                .pointer("/preconditions/uid")
                .and_then(|x| x.as_str())
                .map(String::from),
            rv: v
                .pointer("/preconditions/resourceVersion")
                .and_then(|x| x.as_str())
                .map(String::from),
            propagation: v
                .get("propagationPolicy")
                .and_then(|x| x.as_str())
                .map(String::from),
            dry_run: v
                .get("dryRun")
                .and_then(|d| d.as_array())
                .is_some_and(|a| !a.is_empty()),
        }
    }
}

/// The outcome of a DELETE.
#[derive(Debug)]
pub enum Deleted {
    /// Removed from storage (its last state).
    Gone(Arc<StoredObject>),
    /// Still there, being deleted (grace period or finalizers).
    Pending(Arc<StoredObject>),
}

/// A page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// Items.
    pub items: Vec<Arc<StoredObject>>,
    /// The list's resourceVersion.
    pub rv: u64,
    /// The continue token, when more items remain.
    pub cont: Option<String>,
}

/// Now as a `metav1.Time`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `now + secs` as a `metav1.Time`.
pub fn later_rfc3339(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A random UUID (v4) string.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex_bytes(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The random suffix of generateName (the real alphabet: no vowels, no confusable digits).
pub fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = rand::rng();
    (0..5)
        .map(|_| ALPHA[r.random_range(0..ALPHA.len())] as char)
        .collect()
}

fn meta(v: &Value, k: &str) -> Option<Value> {
    v.get("metadata").and_then(|m| m.get(k)).cloned()
}

fn set_meta(v: &mut Value, k: &str, val: Option<Value>) {
    if !v.get("metadata").is_some_and(|m| m.is_object()) {
        v["metadata"] = json!({});
    }
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        match val {
            Some(x) => {
                m.insert(k.into(), x);
            }
            None => {
                m.remove(k);
            }
        }
    }
}

fn finalizers(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(|f| f.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn is_deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null())
}

/// The pod's QoS class, as the API server computes it on create.
pub fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(|r| r.as_object());
        let lim = c.pointer("/resources/limits").and_then(|r| r.as_object());
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(res));
            let r = req.and_then(|r| r.get(res)).or(l);
            if l.is_none() || r != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Everything but metadata (and status when `skip_status`): what `generation` tracks.
fn spec_part(v: &Value, skip_status: bool) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        if skip_status {
            m.remove("status");
        }
    }
    c
}

fn hex(s: &str) -> String {
    hex_bytes(s.as_bytes())
}

/// Lowercase hex, two digits a byte.
fn hex_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The API semantics over the store.
pub struct Api {
    /// Served resources.
    pub registry: Arc<Registry>,
    /// Objects.
    pub store: Arc<Store>,
}

impl Api {
    /// A def by (group, plural), or a 404.
    pub fn def(&self, gp: (&str, &str)) -> Result<Arc<ResourceDef>, ApiError> {
        self.registry
            .by_name(gp)
            .ok_or_else(ApiError::path_not_found)
    }

    /// GET.
    pub fn get(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.store
            .get(def, ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    /// Checks a LIST's `resourceVersion`/`resourceVersionMatch` against what the store can serve:
    /// the latest state only (any version not newer than it, or exactly it).
    pub fn check_list_rv(
        &self,
        def: &ResourceDef,
        rv: Option<&str>,
        matching: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(rv) = rv.filter(|r| !r.is_empty()) else {
            return Ok(());
        };
        let n: u64 = rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
        let current = self.store.current_rv();
        if n > current {
            return Err(ApiError::new(
                504,
                "Timeout",
                format!("Too large resource version: {n}, current: {current}"),
            )
            .with_details(json!({"causes": [cause("ResourceVersionTooLarge", "Too large resource version", None)], "retryAfterSeconds": 1})));
        }
        if matching == Some("Exact") && n != current && n != 0 {
            // Past states are not kept: an exact read of one cannot be served.
            return Err(ApiError::expired(format!(
                "too old resource version: {n} ({})",
                self.store.compacted(def).max(n) + 1
            )));
        }
        Ok(())
    }

    /// LIST with `limit`/`continue`.
    pub fn list(
        &self,
        def: &ResourceDef,
        filter: &Filter,
        limit: usize,
        cont: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let mut snapshot: Option<u64> = None;
        let after: Option<Key> = match cont {
            Some(c) if !c.is_empty() => {
                let bad = || ApiError::bad_request(format!("continue key is not valid: {c}"));
                let text = unhex(c).ok_or_else(bad)?;
                let v: Value = serde_json::from_str(&text).map_err(|_| bad())?;
                let rv = v.get("rv").and_then(|r| r.as_u64()).ok_or_else(bad)?;
                if rv < self.store.compacted(def) {
                    // The way on: the same place in the list, at the current version.
                    let mut renewed = v.clone();
                    renewed["rv"] = json!(self.store.current_rv());
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    )
                    .with_continue(hex(&renewed.to_string())));
                }
                snapshot = Some(rv);
                Some((
                    v.get("ns")
                        .and_then(|x| x.as_str())
                        .unwrap_or_default()
                        .to_string(),
                    v.get("name")
                        .and_then(|x| x.as_str())
                        .ok_or_else(bad)?
                        .to_string(),
                ))
            }
            _ => None,
        };
        let (items, current, more) = self.store.list(def, filter, after.as_ref(), limit);
        // Later pages report the first page's resourceVersion, so that a watch started from it
        // replays whatever changed while the pages were read (pages are not a snapshot here).
        let rv = snapshot.unwrap_or(current);
        let cont = match (more, items.last()) {
            (true, Some(last)) => Some(hex(
                &json!({"v": "meta.k8s.io/v1", "rv": rv, "ns": last.namespace, "name": last.name})
                    .to_string(),
            )),
            _ => None,
        };
        Ok(ListPage { items, rv, cont })
    }

    /// The NamespaceLifecycle admission check for creating `name` of `def` in `ns`.
    pub fn check_namespace_for(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        self.check_namespace(def, ns, name)
    }

    fn check_namespace(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let nsdef = self.def(names::NAMESPACES)?;
        let Some(nso) = self.store.get(&nsdef, "", ns) else {
            return Err(ApiError::not_found("", "namespaces", ns));
        };
        // Terminating namespaces always carry a deletionTimestamp here.
        if nso.deleting {
            let mut e = ApiError::forbidden(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            );
            if let Some(d) = e.details.as_mut() {
                d["causes"] = json!([cause(
                    "NamespaceTerminating",
                    &format!("namespace {ns} is being terminated"),
                    Some("metadata.namespace")
                )]);
            }
            return Err(e);
        }
        Ok(())
    }

    /// CREATE. `keep_status` keeps a status given on create (seeding: pods already Running).
    pub fn create(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        mut v: Value,
        dry_run: bool,
        keep_status: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if def.converted {
            return self.create_converted(def, ns, v, dry_run, keep_status);
        }
        if !v.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        self.check_type(def, &mut v)?;
        place_in_namespace(def, ns, &mut v)?;
        let name = object_name(def, &mut v)?;
        self.check_namespace(def, ns, &name)?;
        crate::validation::validate(def, &name, &v)?;
        self.prepare_create(def, &mut v, keep_status);
        apply_schema(def, &name, &mut v, None)?;
        if dry_run {
            if self.store.get(def, ns, &name).is_some() {
                return Err(ApiError::already_exists(&def.group, &def.plural, &name));
            }
            return Ok(Arc::new(StoredObject::from_value(def, &v)?));
        }
        let stored = match self
            .store
            .commit(def, ns, &name, Expect::Absent, Write::Put(v))
        {
            Ok(s) => s,
            Err(CommitError::Exists) => {
                return Err(ApiError::already_exists(&def.group, &def.plural, &name));
            }
            Err(CommitError::Api(e)) => return Err(e),
            Err(_) => return Err(ApiError::internal("unexpected store state")),
        };
        if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
            return self.established_crd(def, &stored);
        }
        Ok(stored)
    }

    /// CREATE of a kind stored as another (events.k8s.io Events): validated as stored, and as
    /// its own API requires, then created as the stored kind.
    fn create_converted(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        v: Value,
        dry_run: bool,
        keep_status: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let sdef = self.storage_def(def)?;
        let mut stored = convert::to_storage(def, v.clone());
        set_meta(&mut stored, "namespace", Some(json!(ns)));
        let name = meta(&stored, "name")
            .and_then(|n| n.as_str().map(String::from))
            .unwrap_or_default();
        let mut causes = crate::validation::causes(&sdef, &stored);
        causes.extend(crate::validation::events_api_causes(&v));
        crate::validation::refuse(&sdef, &name, causes)?;
        self.create(&sdef, ns, convert::to_storage(def, v), dry_run, keep_status)
    }

    /// Registers a CRD's resources and writes the status the apiextensions controller would.
    fn established_crd(
        &self,
        def: &Arc<ResourceDef>,
        stored: &Arc<StoredObject>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let v = stored.value()?;
        self.registry.register_crd(&v).map_err(|e| {
            ApiError::invalid(
                &def.group,
                &def.kind,
                &stored.name,
                vec![("FieldValueInvalid".into(), "spec".into(), e.to_string())],
            )
        })?;
        let status = resources::crd_status(&v, &now_rfc3339());
        self.mutate(def, "", &stored.name, |o| {
            o["status"] = status.clone();
            Ok(true)
        })?
        .ok_or_else(|| ApiError::internal("CRD vanished"))
    }

    fn check_type(&self, def: &ResourceDef, v: &mut Value) -> Result<(), ApiError> {
        let av = def.api_version();
        match v.get("apiVersion").and_then(|a| a.as_str()) {
            Some(a) if a != av => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({a}) does not match the expected API version ({av})"
                )));
            }
            _ => v["apiVersion"] = json!(av),
        }
        match v.get("kind").and_then(|a| a.as_str()) {
            Some(k) if k != def.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    def.kind
                )));
            }
            _ => v["kind"] = json!(def.kind),
        }
        Ok(())
    }

    fn prepare_create(&self, def: &ResourceDef, v: &mut Value, keep_status: bool) {
        set_meta(v, "uid", Some(json!(new_uid())));
        set_meta(v, "creationTimestamp", Some(json!(now_rfc3339())));
        set_meta(
            v,
            "generation",
            strategy::tracks_generation(def).then(|| json!(1)),
        );
        set_meta(v, "resourceVersion", None);
        set_meta(v, "deletionTimestamp", None);
        set_meta(v, "deletionGracePeriodSeconds", None);
        let kind = (def.group.as_str(), def.plural.as_str());
        if kind == names::PODS {
            default_pod(v, keep_status);
        } else if kind == names::EVENTS {
            // A Go struct, always serialized: what an event that names no source shows.
            if v.get("source").is_none() {
                v["source"] = json!({});
            }
        } else if kind == names::NAMESPACES {
            let name = meta(v, "name").unwrap_or(json!(""));
            let mut labels = meta(v, "labels").unwrap_or(json!({}));
            labels["kubernetes.io/metadata.name"] = name;
            set_meta(v, "labels", Some(labels));
            v["spec"] = json!({"finalizers": ["kubernetes"]});
            v["status"] = json!({"phase": "Active"});
        } else if kind != names::NODES && def.status_subresource && !keep_status {
            // Status is reset on create, except for Nodes (the kubelet registers them with it).
            if let Some(m) = v.as_object_mut() {
                m.remove("status");
            }
        }
    }

    /// Applies the update strategy: immutable metadata, status masking, finalizer rules,
    /// schema, generation.
    fn finish_update(
        &self,
        def: &ResourceDef,
        sub: Sub,
        old: &Value,
        new: Value,
    ) -> Result<Value, ApiError> {
        let mut new = new;
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        let name = old
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        self.check_type(def, &mut new)?;
        check_same_object(def, &name, old, &new)?;
        if sub == Sub::Status {
            // Only status changes are kept.
            new = with_status(old.clone(), new.get("status").cloned());
        } else if def.status_subresource {
            // Status changes are ignored.
            let status = old.get("status").cloned();
            new = with_status(new, status);
        }
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            set_meta(&mut new, k, meta(old, k));
        }
        check_no_new_finalizers(def, &name, old, &new)?;
        if sub == Sub::Status {
            strategy::default_status(def, &mut new);
        }
        crate::validation::validate_update(def, &name, old, &new)?;
        apply_schema(def, &name, &mut new, Some(old))?;
        let track_status = !def.status_subresource;
        if strategy::tracks_generation(def)
            && spec_part(old, !track_status) != spec_part(&new, !track_status)
        {
            let g = old
                .pointer("/metadata/generation")
                .and_then(|g| g.as_i64())
                .unwrap_or(0);
            set_meta(&mut new, "generation", Some(json!(g + 1)));
        }
        Ok(new)
    }

    /// The update loop behind PUT and PATCH: reads the current object, computes the new one,
    /// commits if nobody wrote in between (else recomputes). A resourceVersion in the new
    /// object is a precondition (409 when stale). `create` handles a missing object
    /// (server-side apply).
    #[allow(clippy::too_many_arguments)]
    fn update_with(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        sub: Sub,
        dry_run: bool,
        mut compute: impl FnMut(&Value) -> Result<Value, ApiError>,
        create: Option<&dyn Fn() -> Result<Value, ApiError>>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        for _ in 0..100 {
            let Some(cur) = self.store.get(def, ns, name) else {
                if let Some(mk) = create {
                    return self.create(def, ns, mk()?, dry_run, false);
                }
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            };
            let old = cur.value()?;
            let newv = compute(&old)?;
            if let Some(rv) = newv
                .pointer("/metadata/resourceVersion")
                .and_then(|r| r.as_str())
                && !rv.is_empty()
                && rv != cur.rv.to_string()
            {
                if rv.parse::<u64>().is_err() {
                    return Err(ApiError::bad_request(format!(
                        "invalid resource version: {rv}"
                    )));
                }
                return Err(ApiError::stale(&def.group, &def.plural, name));
            }
            let mut fin = self.finish_update(def, sub, &old, newv)?;
            set_meta(&mut fin, "resourceVersion", Some(json!(cur.rv.to_string())));
            if fin == old {
                return Ok(cur);
            }
            let write = if is_deleting(&fin)
                && finalizers(&fin).is_empty()
                && !self.graceful_pending(def, &fin)
            {
                Write::Delete(fin)
            } else {
                Write::Put(fin)
            };
            if dry_run {
                return Ok(Arc::new(StoredObject::from_value(def, write.value())?));
            }
            match self.store.commit(def, ns, name, Expect::Rv(cur.rv), write) {
                Ok(s) => return Ok(s),
                Err(e) => commit_failed(def, name, e)?,
            }
        }
        Err(ApiError::stale(&def.group, &def.plural, name))
    }

    /// A pod whose graceful deletion is still running is removed by the kubelet, not by the
    /// removal of its last finalizer.
    fn graceful_pending(&self, def: &ResourceDef, v: &Value) -> bool {
        (def.group.as_str(), def.plural.as_str()) == names::PODS
            && v.pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(|g| g.as_i64())
                .unwrap_or(0)
                > 0
    }

    /// PUT.
    pub fn update(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        body: Value,
        sub: Sub,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let unconditional = body
            .pointer("/metadata/resourceVersion")
            .and_then(|r| r.as_str())
            .is_none_or(|r| r.is_empty());
        // Custom resources do not allow unconditional updates (the real strategy's
        // AllowUnconditionalUpdate is false for them).
        if def.custom && unconditional {
            return Err(rv_required(&def.group, &def.kind, name, "0x0"));
        }
        if unconditional && !strategy::allows_unconditional_update(def) {
            // Named by resource, as the registry's check names it.
            return Err(rv_required(&def.group, &def.plural, name, "0"));
        }
        if def.converted {
            let sdef = self.storage_def(def)?;
            let body = convert::to_storage(def, body);
            return self.update_with(&sdef, ns, name, sub, dry_run, |_| Ok(body.clone()), None);
        }
        self.update_with(def, ns, name, sub, dry_run, |_| Ok(body.clone()), None)
    }

    /// The def whose storage a converted resource uses (core/v1 events for events.k8s.io).
    pub fn storage_def(&self, def: &Arc<ResourceDef>) -> Result<Arc<ResourceDef>, ApiError> {
        if def.converted {
            self.def(("", &def.plural))
        } else {
            Ok(def.clone())
        }
    }

    /// PATCH.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        sub: Sub,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if ptype == PatchType::Strategic && def.custom {
            return Err(ApiError::unsupported_media_type(
                &patch::accepted_patch_types(true),
            ));
        }
        // Converted resources are patched in their own shape and stored converted back.
        let view = def.clone();
        let def = &self.storage_def(def)?;
        let patched: fn(&Value, &[u8]) -> Result<Value, ApiError> = match ptype {
            PatchType::Json => patch::json_patch,
            PatchType::Merge => patch::merge_patch,
            PatchType::Strategic => patch::strategic_merge,
            PatchType::Apply => {
                let applied = applied_configuration(name, body)?;
                return self.server_side_apply(def, &view, ns, name, &applied, sub, dry_run);
            }
        };
        self.update_with(
            def,
            ns,
            name,
            sub,
            dry_run,
            |old| through(&view, old, &|o| patched(o, body)),
            None,
        )
    }

    /// Server-side apply of `applied` (creating the object if it is missing).
    #[allow(clippy::too_many_arguments)]
    fn server_side_apply(
        &self,
        def: &Arc<ResourceDef>,
        view: &ResourceDef,
        ns: &str,
        name: &str,
        applied: &Value,
        sub: Sub,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mk = || {
            let mut v = applied.clone();
            set_meta(&mut v, "name", Some(json!(name)));
            Ok(convert::to_storage(view, v))
        };
        self.update_with(
            def,
            ns,
            name,
            sub,
            dry_run,
            |old| {
                let mut a = applied.clone();
                set_meta(&mut a, "resourceVersion", None);
                through(view, old, &|o| patch::apply(o, &a))
            },
            if sub == Sub::Main { Some(&mk) } else { None },
        )
    }

    /// Internal write for controllers: `f` edits the object (returns false for no change).
    /// Returns the new state (None when the object is gone).
    pub fn mutate(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        mut f: impl FnMut(&mut Value) -> Result<bool, ApiError>,
    ) -> Result<Option<Arc<StoredObject>>, ApiError> {
        for _ in 0..100 {
            let Some(cur) = self.store.get(def, ns, name) else {
                return Ok(None);
            };
            let mut v = cur.value()?;
            if !f(&mut v)? {
                return Ok(Some(cur));
            }
            match self
                .store
                .commit(def, ns, name, Expect::Rv(cur.rv), Write::Put(v))
            {
                Ok(s) => return Ok(Some(s)),
                Err(CommitError::Stale) => continue,
                Err(CommitError::Missing) => return Ok(None),
                Err(CommitError::Api(e)) => return Err(e),
                Err(CommitError::Exists) => {
                    return Err(ApiError::internal("unexpected store state"));
                }
            }
        }
        Err(ApiError::stale(&def.group, &def.plural, name))
    }

    /// DELETE: graceful for scheduled pods, deferred while finalizers remain, immediate otherwise.
    pub fn delete(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        for _ in 0..100 {
            let cur = self.get(def, ns, name)?;
            check_delete_preconditions(def, name, &cur, opts)?;
            let Some(deletion) = self.deletion(def, &cur, opts)? else {
                return Ok(Deleted::Pending(cur));
            };
            if let Write::Put(nv) = &deletion.write
                && cur.value().is_ok_and(|o| &o == nv)
            {
                return Ok(Deleted::Pending(cur));
            }
            if opts.dry_run {
                let gone = matches!(deletion.write, Write::Delete(_));
                let s = Arc::new(StoredObject::from_value(def, deletion.write.value())?);
                return Ok(deleted(s, gone));
            }
            if let Some(done) = self.commit_deletion(def, ns, name, &cur, deletion)? {
                return Ok(done);
            }
        }
        Err(ApiError::stale(&def.group, &def.plural, name))
    }

    /// What deleting `cur` writes; None when it is already being deleted as asked (nothing
    /// to write).
    fn deletion(
        &self,
        def: &ResourceDef,
        cur: &StoredObject,
        opts: &DeleteOpts,
    ) -> Result<Option<Deletion>, ApiError> {
        let gr = (def.group.as_str(), def.plural.as_str());
        let mut v = cur.value()?;
        let deleting = is_deleting(&v);
        let marked = if gr == names::PODS {
            mark_pod(def, &mut v, opts, deleting)
        } else if gr == names::NAMESPACES {
            mark_namespace(&mut v, deleting)
        } else {
            Mark::NotYet
        };
        Ok(match marked {
            Mark::Already => None,
            Mark::Write(write) => Some(Deletion {
                write,
                foreground: Vec::new(),
                deleting,
            }),
            Mark::NotYet => self.propagate_and_finalize(def, cur, v, opts, deleting),
        })
    }

    /// The deletion of an object no grace period keeps: its dependents' propagation, then
    /// the object marked while finalizers remain, removed otherwise. None when it is already
    /// being deleted and waits for its finalizers.
    fn propagate_and_finalize(
        &self,
        def: &ResourceDef,
        cur: &StoredObject,
        mut v: Value,
        opts: &DeleteOpts,
        deleting: bool,
    ) -> Option<Deletion> {
        let mut foreground = Vec::new();
        let dependents = self.store.dependents(&cur.uid);
        if opts.propagation.as_deref() == Some("Foreground")
            && !dependents.is_empty()
            && !deleting
            && !opts.dry_run
        {
            // The garbage collector deletes the dependents first, then removes the
            // finalizer (see lifecycle.rs).
            let mut f = finalizers(&v);
            f.push("foregroundDeletion".into());
            set_meta(&mut v, "finalizers", Some(json!(f)));
            foreground = dependents;
        } else if opts.propagation.as_deref() == Some("Orphan") && !opts.dry_run {
            self.orphan_dependents(&cur.uid, &dependents);
        }
        if finalizers(&v).is_empty() {
            return Some(Deletion {
                write: Write::Delete(v),
                foreground,
                deleting,
            });
        }
        if deleting && (def.group.as_str(), def.plural.as_str()) != names::PODS {
            return None;
        }
        if !is_deleting(&v) {
            strategy::bump_generation(def, &mut v);
            mark_deleted_now(&mut v);
        }
        Some(Deletion {
            write: Write::Put(v),
            foreground,
            deleting,
        })
    }

    /// Commits a deletion of `cur` (None when someone wrote in between: to do again), then
    /// drops a removed CRD's resource and deletes the foreground dependents.
    fn commit_deletion(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        cur: &StoredObject,
        deletion: Deletion,
    ) -> Result<Option<Deleted>, ApiError> {
        let gr = (def.group.as_str(), def.plural.as_str());
        let gone = matches!(deletion.write, Write::Delete(_));
        // A pod deleted at once is first marked (deletionTimestamp, grace 0), then removed:
        // two writes, so a watch sees MODIFIED then DELETED, as from a real server.
        let done = match deletion.write {
            Write::Delete(marked) if gr == names::PODS && !deletion.deleting => {
                match self.store.commit(
                    def,
                    ns,
                    name,
                    Expect::Rv(cur.rv),
                    Write::Put(marked.clone()),
                ) {
                    Ok(s) => self.remove_marked(def, ns, name, s, marked)?,
                    Err(e) => return commit_failed(def, name, e).map(|()| None),
                }
            }
            write => match self.store.commit(def, ns, name, Expect::Rv(cur.rv), write) {
                Ok(s) => {
                    if gone && gr == names::CRDS {
                        self.drop_crd(&s);
                    }
                    Some(deleted(s, gone))
                }
                Err(e) => return commit_failed(def, name, e).map(|()| None),
            },
        };
        if done.is_some() {
            self.delete_dependents(&deletion.foreground);
        }
        Ok(done)
    }

    /// Removes a pod this DELETE has just marked (`marked`: deletionTimestamp, grace 0). The
    /// mark is the deletion: whoever acts on it may remove the pod before this write (the
    /// kubelet does so at once), and the pod is then gone as asked and answered so, as by a
    /// real server, whose deletion is one write. None when the pod changed meanwhile and is
    /// still there (the caller computes the deletion again).
    fn remove_marked(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        marked: Arc<StoredObject>,
        last: Value,
    ) -> Result<Option<Deleted>, ApiError> {
        match self
            .store
            .commit(def, ns, name, Expect::Rv(marked.rv), Write::Delete(last))
        {
            Ok(s) => Ok(Some(Deleted::Gone(s))),
            Err(CommitError::Missing) => Ok(Some(Deleted::Gone(marked))),
            Err(CommitError::Stale) if self.store.get(def, ns, name).is_none() => {
                Ok(Some(Deleted::Gone(marked)))
            }
            Err(e) => commit_failed(def, name, e).map(|()| None),
        }
    }

    /// Deletes dependents (foreground propagation).
    fn delete_dependents(&self, dependents: &[(String, Key)]) {
        for (tkey, key) in dependents {
            if let Some(d) = self.registry.all().into_iter().find(|d| &d.key() == tkey) {
                let _ = self.delete(&d, &key.0, &key.1, &DeleteOpts::default());
            }
        }
    }

    /// Removes the owner reference to `uid` from its dependents (orphan propagation).
    fn orphan_dependents(&self, uid: &str, dependents: &[(String, Key)]) {
        for (tkey, key) in dependents {
            let Some(d) = self.registry.all().into_iter().find(|d| &d.key() == tkey) else {
                continue;
            };
            let _ = self.mutate(&d, &key.0, &key.1, |o| {
                let Some(refs) = o
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(|r| r.as_array_mut())
                else {
                    return Ok(false);
                };
                let before = refs.len();
                refs.retain(|r| r.get("uid").and_then(|u| u.as_str()) != Some(uid));
                if refs.len() == before {
                    return Ok(false);
                }
                if refs.is_empty()
                    && let Some(m) = o.get_mut("metadata").and_then(|m| m.as_object_mut())
                {
                    m.remove("ownerReferences");
                }
                Ok(true)
            });
        }
    }

    /// Removes the `foregroundDeletion` finalizer of an owner whose dependents are all gone.
    pub fn finish_foreground(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(o) = self.store.get(def, ns, name) else {
            return Ok(());
        };
        if self.store.has_dependents(&o.uid) {
            return Ok(());
        }
        let v = o.value()?;
        let f = finalizers(&v);
        if !f.iter().any(|x| x == "foregroundDeletion") {
            return Ok(());
        }
        let rest: Vec<String> = f
            .into_iter()
            .filter(|x| x != "foregroundDeletion")
            .collect();
        let body = json!({"metadata": {"finalizers": rest}}).to_string();
        self.patch(
            def,
            ns,
            name,
            PatchType::Merge,
            body.as_bytes(),
            Sub::Main,
            false,
        )?;
        Ok(())
    }

    fn drop_crd(&self, crd: &StoredObject) {
        if let Ok(v) = crd.value() {
            let group = text_at(&v, "/spec/group");
            let plural = text_at(&v, "/spec/names/plural");
            if let Some(d) = self.registry.by_name((group, plural)) {
                self.store.drop_resource(&d);
            }
            self.registry.unregister(group, plural);
        }
    }
}

/// The 422 of an update without a resourceVersion where one is required (`shown`: how the
/// real server prints the missing value).
fn rv_required(group: &str, kind: &str, name: &str, shown: &str) -> ApiError {
    ApiError::invalid(
        group,
        kind,
        name,
        vec![(
            "FieldValueInvalid".into(),
            "metadata.resourceVersion".into(),
            format!("Invalid value: {shown}: must be specified for an update"),
        )],
    )
}

/// The string at `pointer` ("" when there is none).
fn text_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(|x| x.as_str())
        .unwrap_or_default()
}

/// Puts a created object in the request's namespace (or none, for a cluster-scoped kind); a
/// namespace in the body must be that one.
fn place_in_namespace(def: &ResourceDef, ns: &str, v: &mut Value) -> Result<(), ApiError> {
    if !def.namespaced {
        set_meta(v, "namespace", None);
        return Ok(());
    }
    let body_ns = meta(v, "namespace")
        .and_then(|n| n.as_str().map(String::from))
        .unwrap_or_default();
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    set_meta(v, "namespace", Some(json!(ns)));
    Ok(())
}

/// A created object's name: its own, or one made from its `generateName`.
fn object_name(def: &ResourceDef, v: &mut Value) -> Result<String, ApiError> {
    let name = meta(v, "name")
        .and_then(|n| n.as_str().map(String::from))
        .unwrap_or_default();
    if !name.is_empty() {
        return Ok(name);
    }
    match meta(v, "generateName").and_then(|n| n.as_str().map(String::from)) {
        Some(g) if !g.is_empty() => {
            let name = format!("{g}{}", name_suffix());
            set_meta(v, "name", Some(json!(name)));
            Ok(name)
        }
        _ => Err(ApiError::invalid(
            &def.group,
            &def.kind,
            "",
            vec![(
                "FieldValueRequired".into(),
                "metadata.name".into(),
                "Required value: name or generateName is required".into(),
            )],
        )),
    }
}

/// A custom resource's schema: its defaults and pruning, then its validation (of an update
/// of `old`, or of a create).
fn apply_schema(
    def: &ResourceDef,
    name: &str,
    v: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if def.custom
        && let Some(s) = &def.schema
    {
        schema::default_and_prune(v, s);
        let errs = schema::validate(v, old, s);
        if !errs.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, name, errs));
        }
    }
    Ok(())
}

/// The API's defaults for a created pod (and the admission plugins' a real server runs), its
/// status Pending unless `keep_status`.
fn default_pod(v: &mut Value, keep_status: bool) {
    let spec = &mut v["spec"];
    if spec.get("terminationGracePeriodSeconds").is_none() {
        spec["terminationGracePeriodSeconds"] = json!(30);
    }
    for (k, d) in [
        ("restartPolicy", "Always"),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("serviceAccountName", "default"),
    ] {
        if spec.get(k).is_none() {
            spec[k] = json!(d);
        }
    }
    if spec.get("priority").is_none() {
        spec["priority"] = json!(0);
    }
    // The Priority admission plugin and the API's defaults.
    for (k, d) in [
        ("preemptionPolicy", json!("PreemptLowerPriority")),
        ("enableServiceLinks", json!(true)),
        ("securityContext", json!({})),
    ] {
        if spec.get(k).is_none() {
            spec[k] = d;
        }
    }
    default_tolerations(spec);
    if let Some(cs) = spec.get_mut("containers").and_then(|c| c.as_array_mut()) {
        cs.iter_mut().for_each(default_container);
    }
    if !keep_status {
        let q = qos_class(v);
        v["status"] = json!({"phase": "Pending", "qosClass": q});
    } else if v.pointer("/status/qosClass").is_none() {
        let q = qos_class(v);
        v["status"]["qosClass"] = json!(q);
    }
}

/// The DefaultTolerationSeconds admission plugin.
fn default_tolerations(spec: &mut Value) {
    let mut tol = spec
        .get("tolerations")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tol
            .iter()
            .any(|t| t.get("key").and_then(|k| k.as_str()) == Some(key))
        {
            tol.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    spec["tolerations"] = Value::Array(tol);
}

/// A container's defaults.
fn default_container(c: &mut Value) {
    if c.get("terminationMessagePath").is_none() {
        c["terminationMessagePath"] = json!("/dev/termination-log");
    }
    if c.get("resources").is_none() {
        c["resources"] = json!({});
    }
    if c.get("terminationMessagePolicy").is_none() {
        c["terminationMessagePolicy"] = json!("File");
    }
    if c.get("imagePullPolicy").is_none() {
        let latest = c
            .get("image")
            .and_then(|i| i.as_str())
            .is_some_and(|i| i.ends_with(":latest") || !i.contains(':'));
        c["imagePullPolicy"] = json!(if latest { "Always" } else { "IfNotPresent" });
    }
}

/// An update names the object it updates (its name, and its namespace if it gives one).
fn check_same_object(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if let Some(n) = new.pointer("/metadata/name").and_then(|n| n.as_str())
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced {
        let ons = meta(old, "namespace");
        if let Some(n) = meta(new, "namespace")
            && Some(&n) != ons.as_ref()
            && n != json!("")
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(())
}

/// `object` with `status` (none: without a status).
fn with_status(mut object: Value, status: Option<Value>) -> Value {
    match status {
        Some(s) => object["status"] = s,
        None => {
            if let Some(m) = object.as_object_mut() {
                m.remove("status");
            }
        }
    }
    object
}

/// No finalizer can be added to an object being deleted.
fn check_no_new_finalizers(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &def.group,
        &def.kind,
        name,
        vec![(
            "FieldValueForbidden".into(),
            "metadata.finalizers".into(),
            format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                added
                    .iter()
                    .map(|f| format!("{f:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )],
    ))
}

/// `f` applied to a stored object as `view` presents it, the result converted back to storage.
fn through(
    view: &ResourceDef,
    old: &Value,
    f: &dyn Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    Ok(convert::to_storage(
        view,
        f(&convert::from_storage(view, old))?,
    ))
}

/// The configuration of an apply patch: a YAML (or JSON) object of the object on the URL.
fn applied_configuration(name: &str, body: &[u8]) -> Result<Value, ApiError> {
    let applied: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "apply configuration must be an object",
        ));
    }
    if let Some(n) = applied.pointer("/metadata/name").and_then(|n| n.as_str())
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    Ok(applied)
}

/// What a DELETE writes, and the dependents to delete once the owner is marked (foreground
/// propagation).
struct Deletion {
    write: Write,
    foreground: Vec<(String, Key)>,
    /// The object was being deleted already.
    deleting: bool,
}

/// How a kind with a deletion of its own (pods' grace period, namespaces' termination) marks
/// an object being deleted.
enum Mark {
    /// It is already marked as asked: nothing to write.
    Already,
    /// Marked: this write.
    Write(Write),
    /// Not by the kind: finalizers and propagation decide (the object may have been edited).
    NotYet,
}

/// A pod's graceful deletion: marked with its grace period (a scheduled, unfinished pod), or
/// to be removed at once.
fn mark_pod(def: &ResourceDef, v: &mut Value, opts: &DeleteOpts, deleting: bool) -> Mark {
    let mut grace = opts
        .grace
        .or_else(|| {
            v.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(|g| g.as_i64())
        })
        .unwrap_or(30)
        .max(0);
    let phase = text_at(v, "/status/phase");
    if text_at(v, "/spec/nodeName").is_empty() || phase == "Succeeded" || phase == "Failed" {
        grace = 0;
    }
    if grace > 0 {
        let current = v
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(|g| g.as_i64());
        if deleting && current.is_some_and(|c| c <= grace) {
            return Mark::Already;
        }
        if !deleting {
            strategy::bump_generation(def, v);
        }
        set_meta(v, "deletionTimestamp", Some(json!(later_rfc3339(grace))));
        set_meta(v, "deletionGracePeriodSeconds", Some(json!(grace)));
        return Mark::Write(Write::Put(v.clone()));
    }
    if deleting {
        set_meta(v, "deletionGracePeriodSeconds", Some(json!(0)));
    } else {
        // Deleted at once, answered as the real server does: as it was marked for deletion
        // (grace 0) just before it went.
        strategy::bump_generation(def, v);
        mark_deleted_now(v);
    }
    Mark::NotYet
}

/// A namespace's deletion: Terminating until the namespace controller has emptied it.
fn mark_namespace(v: &mut Value, deleting: bool) -> Mark {
    if deleting {
        return Mark::Already;
    }
    mark_deleted_now(v);
    v["status"]["phase"] = json!("Terminating");
    Mark::Write(Write::Put(v.clone()))
}

/// Marks an object deleted now, with no grace period.
fn mark_deleted_now(v: &mut Value) {
    set_meta(v, "deletionTimestamp", Some(json!(now_rfc3339())));
    set_meta(v, "deletionGracePeriodSeconds", Some(json!(0)));
}

/// A DELETE's preconditions (uid, resourceVersion) on the current object.
fn check_delete_preconditions(
    def: &ResourceDef,
    name: &str,
    cur: &StoredObject,
    opts: &DeleteOpts,
) -> Result<(), ApiError> {
    if let Some(u) = &opts.uid
        && u != &cur.uid
    {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {u}, UID in object meta: {}",
                cur.uid
            ),
        )
        .with_kind_in_details(&def.kind));
    }
    if let Some(r) = &opts.rv
        && r != &cur.rv.to_string()
    {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {r}, ResourceVersion in object meta: {}",
                cur.rv
            ),
        ));
    }
    Ok(())
}

/// The outcome of a DELETE whose last state is `s`.
fn deleted(s: Arc<StoredObject>, gone: bool) -> Deleted {
    if gone {
        Deleted::Gone(s)
    } else {
        Deleted::Pending(s)
    }
}

/// A failed commit of a write to an existing object: Ok when it was stale (to compute again),
/// the error to answer otherwise.
fn commit_failed(def: &ResourceDef, name: &str, e: CommitError) -> Result<(), ApiError> {
    match e {
        CommitError::Stale => Ok(()),
        CommitError::Missing => Err(ApiError::not_found(&def.group, &def.plural, name)),
        CommitError::Api(e) => Err(e),
        CommitError::Exists => Err(ApiError::internal("unexpected store state")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_with_running_pod() -> (Api, Arc<ResourceDef>, Arc<StoredObject>) {
        let api = Api {
            registry: Arc::new(Registry::new()),
            store: Store::new(100),
        };
        let namespaces = api.def(names::NAMESPACES).expect("namespaces are served");
        api.create(
            &namespaces,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}),
            false,
            false,
        )
        .expect("namespace created");
        let pods = api.def(names::PODS).expect("pods are served");
        let pod = api
            .create(
                &pods,
                "web",
                json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "web-1", "namespace": "web"},
                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
                    "status": {"phase": "Running"}
                }),
                false,
                true,
            )
            .expect("pod created");
        (api, pods, pod)
    }

    /// The simulator's kubelet removes a pod marked for deletion with grace 0 as soon as it
    /// sees the mark, which can land between the two writes of a deletion at once: the DELETE
    /// that marked it must still answer that it deleted it, not that there was no such pod.
    #[test]
    fn a_pod_removed_between_its_mark_and_its_removal_is_answered_as_deleted() {
        let (api, pods, cur) = api_with_running_pod();
        let mut last = cur.value().expect("stored as JSON");
        mark_deleted_now(&mut last);
        let marked = api
            .store
            .commit(
                &pods,
                "web",
                "web-1",
                Expect::Rv(cur.rv),
                Write::Put(last.clone()),
            )
            .expect("marked");
        // The kubelet acts on the mark before the DELETE's second write.
        let kubelet = DeleteOpts {
            grace: Some(0),
            ..DeleteOpts::default()
        };
        assert!(matches!(
            api.delete(&pods, "web", "web-1", &kubelet),
            Ok(Deleted::Gone(_))
        ));
        let answer = api.remove_marked(&pods, "web", "web-1", marked, last);
        assert!(
            matches!(answer, Ok(Some(Deleted::Gone(_)))),
            "{:?}",
            answer.map(|d| d.is_some())
        );
    }

    /// A pod deleted at once with nobody in between is removed by the DELETE itself.
    #[test]
    fn a_pod_deleted_at_once_is_gone() {
        let (api, pods, _) = api_with_running_pod();
        let opts = DeleteOpts {
            grace: Some(0),
            ..DeleteOpts::default()
        };
        assert!(matches!(
            api.delete(&pods, "web", "web-1", &opts),
            Ok(Deleted::Gone(_))
        ));
        assert!(api.get(&pods, "web", "web-1").is_err());
    }
}
