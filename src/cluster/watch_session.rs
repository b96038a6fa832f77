//! One watch, from its initial list to its first failure: the events kube-runtime's `watcher`
//! gives, at a fraction of its memory.
//!
//! nmo holds a pod watch per node in maintenance, so what one watch holds while it waits is paid
//! a thousand times at a thousand drains. kube's watch stream keeps an 8 KiB line buffer
//! (`FramedRead` with `LinesCodec`) per watch, allocated at the first byte and kept for the
//! life of the WATCH, and kube-runtime's watcher keeps its list and watch request futures
//! inline: a heap profile at 1,000 drains put the two at 17 MB. Here an event is decoded
//! straight from the HTTP/2 frame that carries it, a line that spans frames is the only thing
//! copied (into a buffer freed with it), the request futures are boxed, and between events a
//! watch holds its response body, the last resourceVersion and its request's settings: the
//! session is a small state machine (`Session`, under 1 KB with its stream), not one async
//! generator, which kept a slot for whatever any of its awaits held (4 KB per watch).
//!
//! A session yields `Init`, the initial objects and `InitDone`, then the changes. Its WATCH is
//! asked again from the last resourceVersion when the API server ends it (its
//! `timeoutSeconds`) or it is silent for longer than that; any failure is yielded and ends
//! the session, and [`super::watch::events`] starts a new one after its wait.

use std::fmt::Debug;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use http_body::Body as HttpBody;
use http_body_util::BodyExt;
use kube::api::{ListParams, VersionMatch, WatchParams};
use kube::core::{Status, WatchEvent};
use kube::runtime::watcher::{self, Event, InitialListStrategy, ListSemantic};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// The annotation of the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How long past its `timeoutSeconds` a silent WATCH is given before it is asked again (the
/// server should have ended it by then), as kube-runtime's watcher waits.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The server's default `timeoutSeconds` when the config gives none (kube's).
const DEFAULT_TIMEOUT_SECS: u32 = 290;

/// The events of one watch of `api` with `config` (the module's doc says which).
pub fn session<K>(
    api: Api<K>,
    config: watcher::Config,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    futures::stream::unfold(Session::new(&api, config), |mut session| async move {
        let event = session.next().await?;
        Some((event, session))
    })
    .boxed()
}

/// One watch's state between its events: a few hundred bytes, whichever step it is at. (As
/// one async generator the session was 4 KB at rest, for each of a thousand pod watches: a
/// generator keeps a slot for whatever any of its awaits holds.)
struct Session<K> {
    /// For the LIST pages.
    api: Api<K>,
    /// For the WATCHes, at `url`.
    client: kube::Client,
    url: String,
    config: watcher::Config,
    /// How long a WATCH may be silent before it is asked again.
    idle: Duration,
    step: Step<K>,
}

/// Where a session is.
enum Step<K> {
    /// Nothing asked yet: `Init` comes first.
    Start,
    /// The initial list arrives as the first events of this WATCH (a streaming list).
    StreamingList(Lines<kube::client::Body>),
    /// The initial list arrives as LIST pages: the rest of this page's objects, then the next
    /// page (`params` carries its continue token), or the list's resourceVersion once done.
    Listing {
        params: ListParams,
        objects: std::vec::IntoIter<K>,
        listed_version: Option<String>,
    },
    /// The changes since `version`, from `lines` (none: the WATCH is to be asked again).
    Watching {
        lines: Option<Lines<kube::client::Body>>,
        version: String,
    },
    /// Failed or ended: nothing more.
    Ended,
}

/// What the next step yields, if anything, and where it leaves the session.
type Next<K> = Option<watcher::Result<Event<K>>>;

impl<K> Session<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn new(api: &Api<K>, config: watcher::Config) -> Self {
        let idle = Duration::from_secs(u64::from(config.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)))
            + IDLE_MARGIN;
        Session {
            api: api.clone(),
            client: api.clone().into_client(),
            url: api.resource_url().to_owned(),
            config,
            idle,
            step: Step::Start,
        }
    }

    /// The session's next event; none once it has ended (after a failure it yields).
    async fn next(&mut self) -> Next<K> {
        loop {
            // Each step's future is boxed, so that the session holds only the one it waits on.
            let next = match std::mem::replace(&mut self.step, Step::Ended) {
                Step::Start => Box::pin(self.start()).await,
                Step::StreamingList(lines) => Box::pin(self.streamed(lines)).await,
                Step::Listing {
                    params,
                    objects,
                    listed_version,
                } => Box::pin(self.listed(params, objects, listed_version)).await,
                Step::Watching { lines, version } => Box::pin(self.watched(lines, version)).await,
                Step::Ended => return None,
            };
            if next.is_some() {
                return next;
            }
        }
    }

    /// `Init`, and the request that brings the initial list.
    async fn start(&mut self) -> Next<K> {
        if self.config.initial_list_strategy == InitialListStrategy::StreamingList {
            let params = watch_params(&self.config, true);
            match Box::pin(open(&self.client, &self.url, &params, "0")).await {
                Ok(lines) => self.step = Step::StreamingList(lines),
                Err(error) => return Some(Err(watcher::Error::WatchStartFailed(error))),
            }
        } else {
            self.step = Step::Listing {
                params: list_params(&self.config),
                objects: Vec::new().into_iter(),
                listed_version: None,
            };
        }
        Some(Ok(Event::Init))
    }

    /// The next event of a streaming list's initial events.
    async fn streamed(&mut self, mut lines: Lines<kube::client::Body>) -> Next<K> {
        loop {
            let event = match Box::pin(lines.next_event::<K>(self.idle)).await {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Some(Err(watcher::Error::WatchFailed(error))),
                // Ended before its list did: the next session lists again.
                None => return None,
            };
            match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    self.step = Step::StreamingList(lines);
                    return Some(Ok(Event::InitApply(object)));
                }
                // The API server sends no deletion before the initial list ends.
                WatchEvent::Deleted(_) => {}
                WatchEvent::Bookmark(bookmark) => {
                    if bookmark
                        .metadata
                        .annotations
                        .contains_key(INITIAL_EVENTS_END)
                    {
                        self.step = Step::Watching {
                            lines: Some(lines),
                            version: bookmark.metadata.resource_version,
                        };
                        return Some(Ok(Event::InitDone));
                    }
                }
                WatchEvent::Error(status) => {
                    return Some(Err(watcher::Error::WatchError(status)));
                }
            }
        }
    }

    /// The next object of the LIST pages, the next page, or `InitDone`.
    async fn listed(
        &mut self,
        mut params: ListParams,
        mut objects: std::vec::IntoIter<K>,
        listed_version: Option<String>,
    ) -> Next<K> {
        if let Some(object) = objects.next() {
            self.step = Step::Listing {
                params,
                objects,
                listed_version,
            };
            return Some(Ok(Event::InitApply(object)));
        }
        if let Some(version) = listed_version {
            self.step = Step::Watching {
                lines: None,
                version,
            };
            return Some(Ok(Event::InitDone));
        }
        let list = match Box::pin(self.api.list(&params)).await {
            Ok(list) => list,
            Err(error) => return Some(Err(watcher::Error::InitialListFailed(error))),
        };
        params.continue_token = list.metadata.continue_.filter(|token| !token.is_empty());
        let listed_version = match params.continue_token {
            Some(_) => None,
            None => match list.metadata.resource_version.filter(|v| !v.is_empty()) {
                Some(version) => Some(version),
                None => return Some(Err(watcher::Error::NoResourceVersion)),
            },
        };
        self.step = Step::Listing {
            params,
            objects: list.items.into_iter(),
            listed_version,
        };
        None
    }

    /// The next change, asking the WATCH again from `version` whenever the server ends it.
    async fn watched(
        &mut self,
        lines: Option<Lines<kube::client::Body>>,
        mut version: String,
    ) -> Next<K> {
        let mut lines = match lines {
            Some(lines) => lines,
            None => {
                let params = watch_params(&self.config, false);
                match Box::pin(open(&self.client, &self.url, &params, &version)).await {
                    Ok(lines) => lines,
                    Err(error) => return Some(Err(watcher::Error::WatchStartFailed(error))),
                }
            }
        };
        loop {
            let event = match Box::pin(lines.next_event::<K>(self.idle)).await {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Some(Err(watcher::Error::WatchFailed(error))),
                // Ended by the server (or silent too long): watch again from `version`.
                None => {
                    self.step = Step::Watching {
                        lines: None,
                        version,
                    };
                    return None;
                }
            };
            let (object_version, event) = match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    (object.resource_version(), Event::Apply(object))
                }
                WatchEvent::Deleted(object) => (object.resource_version(), Event::Delete(object)),
                WatchEvent::Bookmark(bookmark) => {
                    version = bookmark.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(status) => {
                    return Some(Err(watcher::Error::WatchError(status)));
                }
            };
            return match object_version.filter(|v| !v.is_empty()) {
                Some(object_version) => {
                    self.step = Step::Watching {
                        lines: Some(lines),
                        version: object_version,
                    };
                    Some(Ok(event))
                }
                None => Some(Err(watcher::Error::NoResourceVersion)),
            };
        }
    }
}

/// The WATCH of `config`: the first one of a streaming list (`initial`), or one resumed from
/// a resourceVersion.
fn watch_params(config: &watcher::Config, initial: bool) -> WatchParams {
    WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        bookmarks: config.bookmarks,
        send_initial_events: initial,
    }
}

/// The LIST of `config` (when the API server serves no streaming lists): any resourceVersion,
/// from the API server's cache, for `ListSemantic::Any`.
fn list_params(config: &watcher::Config) -> ListParams {
    let (resource_version, version_match) = match config.list_semantic {
        ListSemantic::Any => (Some("0".to_string()), Some(VersionMatch::NotOlderThan)),
        ListSemantic::MostRecent => (None, None),
    };
    ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        resource_version,
        version_match,
        limit: config.page_size,
        ..ListParams::default()
    }
}

/// Sends the WATCH of the objects at `url` with `params` from `version`, and gives its response's lines.
async fn open(
    client: &kube::Client,
    url: &str,
    params: &WatchParams,
    version: &str,
) -> Result<Lines<kube::client::Body>, kube::Error> {
    let mut request = kube::core::Request::new(url)
        .watch(params, version)
        .map_err(kube::Error::BuildRequest)?;
    // A gzipped watch stream is compressed one member per event, which the client's
    // decompression does not read past the first of (kube asks the same).
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    request.extensions_mut().insert("watch");
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        let body = response.into_body().collect_bytes().await?;
        return Err(kube::Error::Api(Box::new(api_status(status, &body))));
    }
    Ok(Lines::new(response.into_body()))
}

/// The API's `Status` in an error response's `body`, or one made of its text when the body is
/// none (a proxy's answer): what kube makes of an error response.
pub(crate) fn api_status(code: http::StatusCode, body: &[u8]) -> Status {
    serde_json::from_slice::<Status>(body).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(body);
        Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
    })
}

/// Whether a body's `error` only ends its stream: a read that timed out or an unexpected end
/// of the body, anywhere in its chain of causes.
fn ends_the_stream(error: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        let Some(io) = error.downcast_ref::<std::io::Error>() else {
            cause = error.source();
            continue;
        };
        if matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::UnexpectedEof
        ) {
            return true;
        }
        // An `io::Error` wrapping another error gives that error's causes as its source,
        // not the error itself.
        cause = match io.get_ref() {
            Some(inner) => Some(inner),
            None => error.source(),
        };
    }
    false
}

/// The newline-separated events of a WATCH's response body.
struct Lines<B> {
    body: B,
    /// What is left of the last frame read, past the lines already given.
    frame: Bytes,
    /// The start of a line whose end is in a later frame.
    partial: Vec<u8>,
}

impl<B> Lines<B>
where
    B: HttpBody<Data = Bytes, Error = kube::Error> + Unpin,
{
    fn new(body: B) -> Self {
        Lines {
            body,
            frame: Bytes::new(),
            partial: Vec::new(),
        }
    }

    /// The next event, or none once the body has ended or been silent for `idle`.
    async fn next_event<K: DeserializeOwned>(
        &mut self,
        idle: Duration,
    ) -> Option<Result<WatchEvent<K>, kube::Error>> {
        loop {
            let line = match tokio::time::timeout(idle, self.next_line()).await {
                Ok(Some(Ok(line))) => line,
                Ok(Some(Err(error))) => return Some(Err(error)),
                Ok(None) | Err(_) => return None,
            };
            match serde_json::from_slice::<WatchEvent<K>>(&line) {
                Ok(event) => return Some(Ok(event)),
                // A line cut short by the end of the body.
                Err(error) if error.is_eof() => continue,
                Err(error) => {
                    return Some(Err(match serde_json::from_slice::<Status>(&line) {
                        Ok(status) => kube::Error::Api(Box::new(status)),
                        Err(_) => kube::Error::SerdeError(error),
                    }));
                }
            }
        }
    }

    /// The next non-empty line, without its newline; none once the body has ended.
    async fn next_line(&mut self) -> Option<Result<Bytes, kube::Error>> {
        loop {
            if let Some(end) = self.frame.iter().position(|&byte| byte == b'\n') {
                let head = self.frame.split_to(end + 1);
                if self.frame.is_empty() {
                    // An empty slice would still hold the connection's read buffer.
                    self.frame = Bytes::new();
                }
                let line = if self.partial.is_empty() {
                    head.slice(..end)
                } else {
                    self.partial.extend_from_slice(&head[..end]);
                    Bytes::from(std::mem::take(&mut self.partial))
                };
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(Ok(line));
            }
            if !self.frame.is_empty() {
                self.partial.extend_from_slice(&self.frame);
                self.frame = Bytes::new();
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.frame = data;
                    }
                }
                // The connection's read timeout, or a body cut off: the WATCH is asked again
                // from where it was, as kube resumes its own watch streams.
                Some(Err(error)) if ends_the_stream(&error) => return None,
                Some(Err(error)) => return Some(Err(error)),
                None => {
                    // The last line, if the body ended without its newline.
                    let rest = std::mem::take(&mut self.partial);
                    return (!rest.iter().all(u8::is_ascii_whitespace))
                        .then(|| Ok(Bytes::from(rest)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body::Frame;
    use http_body_util::StreamBody;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    type Frames = std::vec::IntoIter<Result<Frame<Bytes>, kube::Error>>;

    fn body(frames: Vec<&'static str>) -> StreamBody<futures::stream::Iter<Frames>> {
        let frames: Vec<_> = frames
            .into_iter()
            .map(|frame| Ok(Frame::data(Bytes::from_static(frame.as_bytes()))))
            .collect();
        StreamBody::new(futures::stream::iter(frames))
    }

    async fn all_lines(frames: Vec<&'static str>) -> Vec<String> {
        let mut lines = Lines::new(body(frames));
        let mut all = Vec::new();
        while let Some(line) = lines.next_line().await {
            let line = line.expect("a line");
            all.push(String::from_utf8(line.to_vec()).expect("utf-8"));
        }
        all
    }

    #[tokio::test]
    async fn lines_are_found_within_and_across_frames() {
        let lines = all_lines(vec!["a\nb", "c", "d\n\ne\nf\n", "\n", "g"]).await;
        assert_eq!(lines, vec!["a", "bcd", "e", "f", "g"]);
    }

    #[tokio::test]
    async fn a_line_that_spans_frames_leaves_no_buffer_behind() {
        let mut lines = Lines::new(body(vec!["{\"a\"", ":1}\n", "x"]));
        let line = lines.next_line().await.expect("a line").expect("no error");
        assert_eq!(&line[..], b"{\"a\":1}");
        assert_eq!(lines.partial.capacity(), 0);
        assert!(lines.frame.is_empty());
    }

    #[tokio::test]
    async fn events_are_decoded_and_error_lines_become_api_errors() {
        let added = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}}
"#;
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}
"#;
        let status = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"boom\",\"code\":500}\n";
        let mut lines = Lines::new(body(vec![added, gone, status, "{\"type\":\"ADD"]));
        let idle = Duration::from_secs(5);
        match lines.next_event::<ConfigMap>(idle).await {
            Some(Ok(WatchEvent::Added(object))) => {
                assert_eq!(object.name_any(), "a");
                assert_eq!(object.resource_version().as_deref(), Some("7"));
            }
            other => panic!("expected an added object, got {other:?}"),
        }
        match lines.next_event::<ConfigMap>(idle).await {
            Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
            other => panic!("expected an error event, got {other:?}"),
        }
        match lines.next_event::<ConfigMap>(idle).await {
            Some(Err(kube::Error::Api(status))) => assert_eq!(status.code, 500),
            other => panic!("expected an API error, got {other:?}"),
        }
        // A line cut short by the end of the body is no event.
        assert!(lines.next_event::<ConfigMap>(idle).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_watch_ends_after_its_idle_time() {
        let silent =
            StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, kube::Error>>());
        let mut lines = Lines::new(silent);
        let started = tokio::time::Instant::now();
        assert!(
            lines
                .next_event::<ConfigMap>(Duration::from_secs(605))
                .await
                .is_none()
        );
        assert_eq!(started.elapsed(), Duration::from_secs(605));
    }

    #[test]
    fn the_requests_carry_the_configs_selectors_and_timeout() {
        let config = watcher::Config::default()
            .fields("spec.nodeName=n1")
            .labels("a=b")
            .any_semantic()
            .timeout(600);
        let initial = watch_params(&config, true);
        assert!(initial.send_initial_events);
        assert_eq!(initial.field_selector.as_deref(), Some("spec.nodeName=n1"));
        assert_eq!(initial.label_selector.as_deref(), Some("a=b"));
        assert_eq!(initial.timeout, Some(600));
        assert!(initial.bookmarks);
        assert!(!watch_params(&config, false).send_initial_events);
        let list = list_params(&config);
        assert_eq!(list.resource_version.as_deref(), Some("0"));
        assert_eq!(list.field_selector.as_deref(), Some("spec.nodeName=n1"));
        let latest = list_params(&watcher::Config::default());
        assert_eq!(latest.resource_version, None);
        assert_eq!(latest.limit, Some(500));
    }

    #[test]
    fn a_timed_out_or_cut_off_read_ends_the_stream_and_other_errors_fail_it() {
        let timed_out = kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(ends_the_stream(&timed_out));
        let nested = kube::Error::Service(Box::new(std::io::Error::other(std::io::Error::from(
            std::io::ErrorKind::UnexpectedEof,
        ))));
        assert!(ends_the_stream(&nested));
        let reset =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!ends_the_stream(&reset));
    }

    #[test]
    fn an_error_body_that_is_no_status_keeps_its_text_and_code() {
        let status = api_status(http::StatusCode::BAD_GATEWAY, b" upstream down \n");
        assert_eq!(status.code, 502);
        assert_eq!(status.message, "upstream down");
        let parsed = api_status(
            http::StatusCode::GONE,
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gone","code":410}"#,
        );
        assert_eq!(parsed.code, 410);
    }
}
