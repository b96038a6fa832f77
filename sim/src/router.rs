//! The HTTP front end: URL parsing, verb mapping, accounting, RBAC, fault injection, content
//! negotiation (JSON or Table), and dispatch to the REST layer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::accounting::{Accounting, RequestKey};
use crate::audit::{Audit, Served};
use crate::discovery;
use crate::errors::ApiError;
use crate::eviction;
use crate::faults::Faults;
use crate::object::StoredObject;
use crate::patch::PatchType;
use crate::rbac::Rbac;
use crate::resources::ResourceDef;
use crate::rest::{Api, DeleteOpts, Deleted, Sub};
use crate::selectors::{FieldSelector, Filter, LabelSelector};
use crate::store::WatchFrom;
use crate::table::{self, Include};
use crate::watch::{self, WatchParams};

/// State shared by all requests.
pub struct Shared {
    /// The REST layer.
    pub api: Arc<Api>,
    /// Request counters.
    pub accounting: Arc<Accounting>,
    /// Fault rules.
    pub faults: Arc<Faults>,
    /// RBAC enforcement, when configured.
    pub rbac: Option<Arc<Rbac>>,
    /// Bearer token -> user name.
    pub tokens: HashMap<String, String>,
    /// host:port, for `/api`.
    pub addr: String,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Fires on shutdown (ends watches).
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Called for every request about to be served.
    pub audit: Arc<Audit>,
}

/// The axum router.
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

fn json_response(code: u16, body: Bytes) -> Response {
    http::Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn value_response(code: u16, v: &Value) -> Response {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

fn object_response(code: u16, def: &ResourceDef, o: &StoredObject) -> Response {
    json_response(code, crate::convert::render(def, o))
}

fn list_bytes(
    def: &ResourceDef,
    items: &[Arc<StoredObject>],
    rv: u64,
    cont: Option<&str>,
) -> Bytes {
    let size: usize = items.iter().map(|o| o.json.len() + 1).sum();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
            def.list_kind,
            def.api_version(),
            meta
        )
        .as_bytes(),
    );
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&crate::list_item::without_type(&crate::convert::render(
            def, o,
        )));
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// A parsed resource URL.
struct Target {
    def: Arc<ResourceDef>,
    ns: Option<String>,
    name: Option<String>,
    sub: String,
    watch_path: bool,
}

fn parse_target(api: &Api, group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
    let (watch_path, rest) = match rest.first() {
        Some(&"watch") => (true, &rest[1..]),
        _ => (false, rest),
    };
    let lookup = |p: &str| api.registry.get(group, version, p);
    let (ns, plural, tail): (Option<String>, &str, &[&str]) = match rest {
        ["namespaces", ns, plural, tail @ ..] if lookup(plural).is_some_and(|d| d.namespaced) => {
            (Some(ns.to_string()), plural, tail)
        }
        [plural, tail @ ..] => (None, plural, tail),
        [] => return Err(ApiError::path_not_found()),
    };
    let def = lookup(plural).ok_or_else(ApiError::path_not_found)?;
    if tail.len() > 2 || (ns.is_some() && !def.namespaced) {
        return Err(ApiError::path_not_found());
    }
    let name = tail.first().map(|s| s.to_string());
    let sub = tail.get(1).map(|s| s.to_string()).unwrap_or_default();
    let sub_ok = match sub.as_str() {
        "" => true,
        "status" => def.status_subresource,
        "eviction" => def.group.is_empty() && def.plural == "pods",
        _ => false,
    };
    if !sub_ok {
        return Err(ApiError::path_not_found());
    }
    Ok(Target {
        def,
        ns,
        name,
        sub,
        watch_path,
    })
}

fn query_map(uri: &http::Uri) -> HashMap<String, String> {
    axum::extract::Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

fn truthy(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("yaml") {
        return serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

fn injected(code: u16) -> ApiError {
    match code {
        429 => ApiError::too_many_requests("Too many requests, please try again later.", 1, vec![]),
        503 => ApiError::unavailable(
            "the server is currently unable to handle the request (injected fault)",
        ),
        504 => ApiError::new(
            504,
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request",
        ),
        500 => ApiError::internal("injected fault"),
        c => ApiError::new(c, "", "injected fault"),
    }
}

async fn handle(State(sh): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
    };
    let caller = match identify(&sh, &parts) {
        Ok(caller) => caller,
        Err(unauthorized) => return unauthorized.into_response(),
    };
    let path = parts.uri.path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let q = query_map(&parts.uri);
    let method = parts.method.clone();
    let count_nonresource = || {
        let verb = method.as_str().to_lowercase();
        sh.accounting
            .record(caller.key(verb, String::new(), String::new(), path.clone()))
    };
    let (group, version, rest) = match route(&sh, &method, &segs) {
        Route::Resources(group, version, rest) => (group, version, rest),
        Route::Answered { counted, response } => {
            if counted {
                count_nonresource();
            }
            return response;
        }
    };
    let (target, verb) = match target_and_verb(&sh.api, &method, &group, &version, rest, &q) {
        Ok(found) => found,
        Err(e) => {
            count_nonresource();
            return e.into_response();
        }
    };
    let key = caller.key(
        verb.to_string(),
        group,
        target.def.plural.clone(),
        target.sub.clone(),
    );
    sh.accounting.record(key.clone());
    let incoming = Incoming {
        key,
        verb,
        target,
        q,
        accept: header(&parts, http::header::ACCEPT),
        ctype: header(&parts, http::header::CONTENT_TYPE),
        body,
    };
    if let Err(e) = authorize(&sh, &incoming) {
        return refused(&sh, &incoming, e.into_response());
    }
    deliver(sh, incoming).await
}

/// Header `h` of the request ("" when it has none, or none in ASCII).
fn header(parts: &http::request::Parts, h: http::header::HeaderName) -> String {
    parts
        .headers
        .get(h)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Who sent a request.
struct Caller {
    user: String,
    ua: String,
}

impl Caller {
    /// The counters' key of a request of this caller.
    fn key(
        &self,
        verb: String,
        group: String,
        resource: String,
        subresource: String,
    ) -> RequestKey {
        RequestKey {
            verb,
            group,
            resource,
            subresource,
            user: self.user.clone(),
            user_agent: self.ua.clone(),
        }
    }
}

/// The caller of a request (its connection counted for it).
fn identify(sh: &Shared, parts: &http::request::Parts) -> Result<Caller, ApiError> {
    let ua = header(parts, http::header::USER_AGENT);
    let user = authenticate(sh, parts)?;
    if let Some(connection) = parts.extensions.get::<crate::server::ConnectionId>() {
        sh.accounting.record_connection(connection.0, &user, &ua);
    }
    Ok(Caller { user, ua })
}

/// The user of the request's bearer token ("" without one, or when no tokens are configured);
/// a 401 for a token no user has.
fn authenticate(sh: &Shared, parts: &http::request::Parts) -> Result<String, ApiError> {
    let token = header(parts, http::header::AUTHORIZATION)
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_string());
    match &token {
        Some(t) => match sh.tokens.get(t) {
            Some(u) => Ok(u.clone()),
            None if sh.tokens.is_empty() => Ok(String::new()),
            None => Err(ApiError::new(401, "Unauthorized", "Unauthorized")),
        },
        None => Ok(String::new()),
    }
}

/// Where `route` sends a request.
enum Route<'a> {
    /// A resource request: its group, version and the path below them.
    Resources(String, String, &'a [&'a str]),
    /// Answered at once; `counted` as a non-resource request or not.
    Answered { counted: bool, response: Response },
}

/// A resource request's group, version and path; any other path (health, version, discovery,
/// OpenAPI, the simulator's request counters) is answered here.
fn route<'a>(sh: &Shared, method: &http::Method, segs: &'a [&'a str]) -> Route<'a> {
    let registry = &sh.api.registry;
    let counted = |response: Response| Route::Answered {
        counted: true,
        response,
    };
    let found = |d: Option<Value>| match d {
        Some(d) => counted(value_response(200, &d)),
        None => counted(ApiError::path_not_found().into_response()),
    };
    match segs {
        ["version"] => counted(value_response(200, &discovery::version())),
        ["healthz"] | ["readyz"] | ["livez"] => Route::Answered {
            counted: false,
            response: http::Response::builder()
                .status(200)
                .header(http::header::CONTENT_TYPE, "text/plain")
                .body(Body::from("ok"))
                .unwrap_or_else(|_| Response::new(Body::empty())),
        },
        ["debug", "sim", "requests"] => {
            if method == http::Method::DELETE {
                sh.accounting.reset();
            }
            Route::Answered {
                counted: false,
                response: value_response(200, &sh.accounting.to_json()),
            }
        }
        ["openapi", "v3"] => counted(value_response(200, &crate::openapi::root(registry))),
        ["openapi", "v3", rest @ ..] => {
            found(crate::openapi::group_version(registry, &rest.join("/")))
        }
        ["api"] => counted(value_response(200, &discovery::core_versions(&sh.addr))),
        ["apis"] => counted(value_response(200, &discovery::groups(registry))),
        ["apis", g] => found(discovery::group(registry, g)),
        ["api", "v1"] => found(discovery::resources(registry, "", "v1")),
        ["apis", g, v] => found(discovery::resources(registry, g, v)),
        ["api", "v1", rest @ ..] => Route::Resources(String::new(), "v1".to_string(), rest),
        ["apis", g, v, rest @ ..] => Route::Resources(g.to_string(), v.to_string(), rest),
        _ => counted(ApiError::path_not_found().into_response()),
    }
}

/// The resource a request addresses and the verb its method means there.
fn target_and_verb(
    api: &Api,
    method: &http::Method,
    group: &str,
    version: &str,
    rest: &[&str],
    q: &HashMap<String, String>,
) -> Result<(Target, &'static str), ApiError> {
    let target = parse_target(api, group, version, rest)?;
    let is_watch = target.watch_path || truthy(q, "watch");
    let verb = match (method, target.name.is_some()) {
        (&http::Method::GET, _) if is_watch => "watch",
        (&http::Method::GET, true) => "get",
        (&http::Method::GET, false) => "list",
        (&http::Method::POST, false) => "create",
        (&http::Method::POST, true) if target.sub == "eviction" => "create",
        (&http::Method::PUT, true) => "update",
        (&http::Method::PATCH, true) => "patch",
        (&http::Method::DELETE, true) => "delete",
        (&http::Method::DELETE, false) => "deletecollection",
        _ => return Err(ApiError::method_not_allowed()),
    };
    Ok((target, verb))
}

/// A resource request, as `handle` took it apart.
struct Incoming {
    key: RequestKey,
    verb: &'static str,
    target: Target,
    q: HashMap<String, String>,
    accept: String,
    ctype: String,
    body: Bytes,
}

impl Incoming {
    fn ns(&self) -> &str {
        self.target.ns.as_deref().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or("")
    }
    fn is_eviction(&self) -> bool {
        self.verb == "create" && self.target.sub == "eviction"
    }
}

/// RBAC's verdict on the request, when RBAC is configured.
fn authorize(sh: &Shared, req: &Incoming) -> Result<(), ApiError> {
    let Some(rbac) = &sh.rbac else {
        return Ok(());
    };
    rbac.check(
        &req.key.user,
        req.verb,
        &req.target.def.group,
        &req.target.def.plural,
        &req.target.sub,
        req.ns(),
        req.name(),
    )
}

/// Counts the answer of a request refused before fault injection (an eviction's too).
fn refused(sh: &Shared, req: &Incoming, response: Response) -> Response {
    let code = response.status().as_u16();
    sh.accounting.record_status(&req.key, code);
    if req.is_eviction() {
        sh.accounting.record_eviction(req.ns(), req.name(), code);
    }
    response
}

/// Fault injection's decision on the request, then its effect.
async fn deliver(sh: Arc<Shared>, req: Incoming) -> Response {
    let fault = sh.faults.decide_for(
        req.verb,
        &req.target.def.plural,
        &req.target.sub,
        &req.key.user_agent,
        &req.key.user,
    );
    let late = fault.delivered_late;
    let rest = async move {
        if !fault.latency.is_zero() {
            tokio::time::sleep(fault.latency).await;
        }
        take_effect(&sh, &req, &fault).await
    };
    if late {
        // Delivered whether or not its client still waits: the request was on its way (in
        // the kernel, or handed to HTTP/2) when the client gave up or its process stopped.
        return tokio::spawn(rest)
            .await
            .unwrap_or_else(|_| ApiError::internal("request task failed").into_response());
    }
    rest.await
}

/// What follows fault injection's latency: an injected error, or the request served (audit
/// hooks around it).
async fn take_effect(
    sh: &Arc<Shared>,
    req: &Incoming,
    fault: &crate::faults::Decision,
) -> Response {
    let answered = |response: Response| {
        sh.accounting
            .record_status(&req.key, response.status().as_u16());
        response
    };
    if let Some(code) = fault.error_code {
        return answered(injected(code).into_response());
    }
    let target = &req.target;
    if fault.conflict {
        return answered(
            ApiError::stale(&target.def.group, &target.def.plural, req.name()).into_response(),
        );
    }
    let served = Served::new(&req.key, req.ns(), req.name(), &sh.api)
        .delivered_late(fault.delivered_late, fault.latency);
    sh.audit.served(&served);
    if req.is_eviction()
        && let Err(refusal) = review_eviction(sh, req).await
    {
        let response = refusal.into_response();
        sh.audit.outcome(&served, response.status().as_u16());
        return answered(response);
    }
    let ctx = Ctx {
        sh,
        t: target,
        q: &req.q,
        accept: &req.accept,
        ctype: &req.ctype,
        body: &req.body,
        fault_close: (fault.watch_close_after, fault.watch_close_after_events),
    };
    let response = match serve(&ctx, req.verb) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    sh.audit.outcome(&served, response.status().as_u16());
    answered(response)
}

/// Admission webhooks on pods/eviction see the request before it is decided.
async fn review_eviction(sh: &Shared, req: &Incoming) -> Result<(), ApiError> {
    let eviction = parse_body(&req.body, &req.ctype).unwrap_or(Value::Null);
    crate::admission::review_eviction(&sh.api, req.ns(), req.name(), &eviction, &req.key.user).await
}

struct Ctx<'a> {
    sh: &'a Arc<Shared>,
    t: &'a Target,
    q: &'a HashMap<String, String>,
    accept: &'a str,
    ctype: &'a str,
    body: &'a Bytes,
    fault_close: (Option<Duration>, Option<usize>),
}

impl Ctx<'_> {
    fn ns(&self) -> &str {
        self.t.ns.as_deref().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.t.name.as_deref().unwrap_or("")
    }
    fn sub(&self) -> Sub {
        if self.t.sub == "status" {
            Sub::Status
        } else {
            Sub::Main
        }
    }
    fn dry_run(&self) -> bool {
        self.q.get("dryRun").is_some_and(|d| !d.is_empty())
    }
    fn table(&self) -> Option<Include> {
        if !self
            .accept
            .split(',')
            .next()
            .unwrap_or_default()
            .contains("as=Table")
        {
            return None;
        }
        Some(match self.q.get("includeObject").map(|s| s.as_str()) {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        })
    }
    fn filter(&self) -> Result<Filter, ApiError> {
        let def = &self.t.def;
        let mut fields = match self.q.get("fieldSelector") {
            Some(s) => FieldSelector::parse(s, def)?,
            None => FieldSelector::default(),
        };
        if self.t.watch_path
            && let Some(n) = &self.t.name
        {
            // Deprecated single-object watch paths: a name field selector.
            fields.0.push(crate::selectors::FieldReq {
                target: crate::selectors::FieldTarget::Name,
                value: n.clone(),
                negate: false,
            });
        }
        Ok(Filter {
            namespace: self.t.ns.clone(),
            labels: match self.q.get("labelSelector") {
                Some(s) => LabelSelector::parse(s)?,
                None => LabelSelector::default(),
            },
            fields,
        })
    }
    /// `fieldValidation=Strict` (kubectl's default): unknown fields of a custom resource are a
    /// 400 instead of being pruned silently.
    fn strict_fields(&self, body: &Value) -> Result<(), ApiError> {
        let def = &self.t.def;
        if !def.custom || self.q.get("fieldValidation").map(|s| s.as_str()) != Some("Strict") {
            return Ok(());
        }
        let Some(schema) = &def.schema else {
            return Ok(());
        };
        let unknown = crate::schema::unknown_fields(body, schema);
        if unknown.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            list.join(", "),
            kind = def.kind,
            v = def.version
        )))
    }

    fn require_ns(&self) -> Result<(), ApiError> {
        if self.t.def.namespaced && self.t.ns.is_none() {
            return Err(ApiError::method_not_allowed());
        }
        Ok(())
    }
}

fn serve(c: &Ctx<'_>, verb: &str) -> Result<Response, ApiError> {
    match verb {
        "get" => c.get(),
        "list" => c.list(),
        "watch" => c.watch(),
        "create" => c.create(),
        "update" => c.update(),
        "patch" => c.patch(),
        "delete" => c.delete(),
        "deletecollection" => c.delete_collection(),
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// One handler per verb.
impl Ctx<'_> {
    fn get(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        self.require_ns()?;
        let o = api.get(def, self.ns(), self.name())?;
        Ok(match self.table() {
            Some(inc) => value_response(
                200,
                &table::table(
                    &*api.storage_def(def)?,
                    std::slice::from_ref(&o),
                    o.rv,
                    None,
                    inc,
                ),
            ),
            None => object_response(200, def, &o),
        })
    }

    fn list(&self) -> Result<Response, ApiError> {
        let (api, def, q) = (&self.sh.api, &self.t.def, self.q);
        let filter = self.filter()?;
        api.check_list_rv(
            def,
            q.get("resourceVersion").map(|s| s.as_str()),
            q.get("resourceVersionMatch").map(|s| s.as_str()),
        )?;
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(0);
        let page = api.list(def, &filter, limit, q.get("continue").map(|s| s.as_str()))?;
        Ok(match self.table() {
            Some(inc) => value_response(
                200,
                &table::table(
                    &*api.storage_def(def)?,
                    &page.items,
                    page.rv,
                    page.cont.as_deref(),
                    inc,
                ),
            ),
            None => json_response(
                200,
                list_bytes(def, &page.items, page.rv, page.cont.as_deref()),
            ),
        })
    }

    fn watch(&self) -> Result<Response, ApiError> {
        let filter = self.filter()?;
        let params = self.watch_params()?;
        let s = watch::stream(
            self.sh.api.store.clone(),
            self.t.def.clone(),
            filter,
            params,
            self.sh.shutdown.clone(),
        );
        Ok(http::Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::CACHE_CONTROL, "no-cache, private")
            .body(Body::from_stream(s))
            .unwrap_or_else(|_| Response::new(Body::empty())))
    }

    /// A watch's parameters, from the query (and the fault rules' closing).
    fn watch_params(&self) -> Result<WatchParams, ApiError> {
        let q = self.q;
        let rv = q.get("resourceVersion").map(|s| s.as_str()).unwrap_or("");
        let send_initial = truthy(q, "sendInitialEvents");
        let from = match rv {
            "" | "0" => WatchFrom::Current,
            _ if send_initial => WatchFrom::Current,
            r => WatchFrom::Rv(
                r.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {r}")))?,
            ),
        };
        if send_initial && q.get("resourceVersionMatch").map(|s| s.as_str()) != Some("NotOlderThan")
        {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![(
                    "FieldValueForbidden".into(),
                    "resourceVersionMatch".into(),
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
                )],
            ));
        }
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(Duration::from_secs(1800));
        Ok(WatchParams {
            from,
            bookmarks: truthy(q, "allowWatchBookmarks"),
            send_initial_events: send_initial,
            timeout,
            bookmark_interval: self.sh.bookmark_interval,
            close_after: self.fault_close.0,
            close_after_events: self.fault_close.1,
            table: self.table(),
        })
    }

    fn create(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        self.require_ns()?;
        let body = parse_body(self.body, self.ctype)?;
        if self.t.sub == "eviction" {
            eviction::evict(api, self.ns(), self.name(), &body)?;
            return Ok(value_response(
                201,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ));
        }
        self.strict_fields(&body)?;
        let o = api.create(def, self.ns(), body, self.dry_run(), false)?;
        Ok(object_response(201, def, &o))
    }

    fn update(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        self.require_ns()?;
        let body = parse_body(self.body, self.ctype)?;
        self.strict_fields(&body)?;
        let o = api.update(
            def,
            self.ns(),
            self.name(),
            body,
            self.sub(),
            self.dry_run(),
        )?;
        Ok(object_response(200, def, &o))
    }

    fn patch(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        self.require_ns()?;
        let pt = self.patch_type()?;
        let existed = api.store.get(def, self.ns(), self.name()).is_some();
        let o = api.patch(
            def,
            self.ns(),
            self.name(),
            pt,
            self.body,
            self.sub(),
            self.dry_run(),
        )?;
        Ok(object_response(if existed { 200 } else { 201 }, def, &o))
    }

    /// The patch type of the content type (an apply patch needs a field manager).
    fn patch_type(&self) -> Result<PatchType, ApiError> {
        let Some(pt) = PatchType::from_content_type(self.ctype) else {
            // What the real server answers for a content type no patch has.
            return Err(
                ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
                    .with_details(json!({})),
            );
        };
        if pt == PatchType::Apply && self.q.get("fieldManager").is_none_or(|f| f.is_empty()) {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![(
                    "FieldValueRequired".into(),
                    "fieldManager".into(),
                    "Required value: is required for apply patch".into(),
                )],
            ));
        }
        Ok(pt)
    }

    fn delete(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        self.require_ns()?;
        let mut opts = if self.body.is_empty() {
            DeleteOpts::default()
        } else {
            DeleteOpts::from_value(&parse_body(self.body, self.ctype)?)
        };
        if let Some(g) = self.grace_period() {
            opts.grace = Some(g);
        }
        if let Some(p) = self.q.get("propagationPolicy") {
            opts.propagation = Some(p.clone());
        }
        opts.dry_run |= self.dry_run();
        Ok(deleted_response(
            def,
            api.delete(def, self.ns(), self.name(), &opts)?,
        ))
    }

    /// `gracePeriodSeconds` of the query.
    fn grace_period(&self) -> Option<i64> {
        self.q
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse::<i64>().ok())
    }

    fn delete_collection(&self) -> Result<Response, ApiError> {
        let (api, def) = (&self.sh.api, &self.t.def);
        let filter = self.filter()?;
        let page = api.list(def, &filter, 0, None)?;
        let mut opts = DeleteOpts::default();
        if let Some(g) = self.grace_period() {
            opts.grace = Some(g);
        }
        let mut out = Vec::new();
        for o in &page.items {
            match api.delete(def, &o.namespace, &o.name, &opts) {
                Ok(Deleted::Gone(x)) | Ok(Deleted::Pending(x)) => out.push(x),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json_response(
            200,
            list_bytes(def, &out, api.store.current_rv(), None),
        ))
    }
}

/// A DELETE's answer: the object while it is still there (or where the kind returns it), a
/// Status once it is gone.
fn deleted_response(def: &ResourceDef, deleted: Deleted) -> Response {
    match deleted {
        Deleted::Pending(o) => object_response(200, def, &o),
        Deleted::Gone(o) if returns_deleted_object(def) => object_response(200, def, &o),
        Deleted::Gone(o) => {
            let mut details = json!({"name": o.name, "kind": def.plural, "uid": o.uid});
            if !def.group.is_empty() {
                details["group"] = json!(def.group);
            }
            value_response(
                200,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            )
        }
    }
}

/// Resources whose DELETE returns the deleted object rather than a Status (as in the real
/// registry's `ReturnDeletedObject`).
fn returns_deleted_object(def: &ResourceDef) -> bool {
    crate::strategy::returns_deleted_object(def)
}
