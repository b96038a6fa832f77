//! Who may read `/metrics` (`--metrics-secure`), as controller-runtime's secure metrics
//! server decides it: the request's bearer token is authenticated by the API server
//! (TokenReview), and the token's user must be allowed `get` on the path (a
//! SubjectAccessReview of the non-resource URL `/metrics`, which the `nmo-metrics-reader`
//! ClusterRole grants). No token or an unknown one is 401, a user without the right 403.
//!
//! Verdicts are cached for a short while (allowed 60 s, refused 30 s), as controller-runtime's
//! authenticator and authorizer cache theirs, so a scrape every 15 s costs the API server two
//! reviews a minute, not two per scrape; a revoked binding takes effect within a minute. Reviews
//! not in the cache run a few at a time: a client sending made-up tokens cannot turn nmo into a
//! flood of reviews.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// How long an allowed token is trusted without asking again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again.
pub const REFUSED_TTL: Duration = Duration::from_secs(30);
/// Verdicts kept at most (each a token and a path); more, and the expired ones go, then all.
const CACHE_CAPACITY: usize = 1024;
/// Reviews sent at once; a request waits for its turn at most [`REVIEW_DEADLINE`].
const CONCURRENT_REVIEWS: usize = 4;
/// How long a request may wait for its reviews (turn and both calls).
pub const REVIEW_DEADLINE: Duration = Duration::from_secs(5);

/// What the API server said about a token and a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated, and allowed.
    Allowed,
    /// Not authenticated (an unknown, expired or malformed token).
    Unauthenticated,
    /// Authenticated as this user, who may not get the path.
    Forbidden(String),
}

/// Why no verdict could be had.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// A review call failed.
    #[error("{what} failed: {source}")]
    Api {
        /// Which review.
        what: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The reviews did not finish in time (or too many were waiting).
    #[error("no verdict within {0:?}")]
    Timeout(Duration),
}

/// Verdicts by token and path, with when they expire.
type VerdictCache = HashMap<(String, String), (Verdict, Instant)>;

/// The authenticator and authorizer of the metrics endpoint; cheap to clone.
#[derive(Clone)]
pub struct MetricsAuth {
    client: Client,
    cache: Arc<Mutex<VerdictCache>>,
    turns: Arc<Semaphore>,
}

impl MetricsAuth {
    /// Reviews through `client` (nmo's: it needs `create` on tokenreviews and
    /// subjectaccessreviews).
    pub fn new(client: Client) -> Self {
        MetricsAuth {
            client,
            cache: Arc::default(),
            turns: Arc::new(Semaphore::new(CONCURRENT_REVIEWS)),
        }
    }

    /// `router` with every request checked first.
    pub fn protect(&self, router: Router) -> Router {
        router.layer(middleware::from_fn_with_state(self.clone(), check))
    }

    /// The verdict for `token` getting `path`: from the cache, or from the API server.
    pub async fn verdict(&self, token: &str, path: &str) -> Result<Verdict, ReviewError> {
        let key = (token.to_string(), path.to_string());
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        let reviewed = tokio::time::timeout(REVIEW_DEADLINE, async {
            let _turn = self.turns.acquire().await;
            self.review(token, path).await
        })
        .await
        .map_err(|_| ReviewError::Timeout(REVIEW_DEADLINE))??;
        self.remember(key, reviewed.clone());
        Ok(reviewed)
    }

    fn cached(&self, key: &(String, String)) -> Option<Verdict> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(key)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(verdict, _)| verdict.clone())
    }

    fn remember(&self, key: (String, String), verdict: Verdict) {
        let ttl = match verdict {
            Verdict::Allowed => ALLOWED_TTL,
            Verdict::Unauthenticated | Verdict::Forbidden(_) => REFUSED_TTL,
        };
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_CAPACITY {
            cache.retain(|_, (_, until)| now < *until);
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(key, (verdict, now + ttl));
    }

    /// A TokenReview, then, for an authenticated token, a SubjectAccessReview.
    async fn review(&self, token: &str, path: &str) -> Result<Verdict, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError::Api {
                what: "TokenReview",
                source,
            })?;
        let status = reviewed.status.unwrap_or_default();
        let user = match status.user {
            Some(user) if status.authenticated == Some(true) => user,
            _ => return Ok(Verdict::Unauthenticated),
        };
        let name = user.username.unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(name.clone()),
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".to_string()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|source| ReviewError::Api {
                what: "SubjectAccessReview",
                source,
            })?;
        let allowed = decided.status.is_some_and(|status| status.allowed);
        Ok(if allowed {
            Verdict::Allowed
        } else {
            Verdict::Forbidden(name)
        })
    }
}

/// The bearer token of `request`, if it carries one.
fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

async fn check(State(auth): State<MetricsAuth>, request: Request, next: Next) -> Response {
    let Some(token) = bearer(&request) else {
        return unauthorized();
    };
    // Every method is checked as `get`, the only one served (others are 405 after this).
    match auth.verdict(token, request.uri().path()).await {
        Ok(Verdict::Allowed) => next.run(request).await,
        Ok(Verdict::Unauthenticated) => unauthorized(),
        Ok(Verdict::Forbidden(user)) => (
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: user {user:?} may not get {} (bind the nmo-metrics-reader ClusterRole)\n",
                request.uri().path()
            ),
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(%error, "cannot authorize a metrics request");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot authorize the request\n",
            )
                .into_response()
        }
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "Unauthorized\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt as _;

    use super::*;

    /// A client whose every request fails: nothing may be asked for these requests.
    fn no_api() -> Client {
        let service = tower::service_fn(|_request: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no API server"))
        });
        Client::new(service, "nmo")
    }

    fn router(auth: &MetricsAuth) -> Router {
        auth.protect(Router::new().route("/metrics", get(|| async { "metrics" })))
    }

    async fn status(auth: &MetricsAuth, authorization: Option<&str>) -> StatusCode {
        let mut request = http::Request::get("/metrics");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        router(auth)
            .oneshot(request.body(Body::empty()).expect("a request"))
            .await
            .expect("answers")
            .status()
    }

    #[tokio::test]
    async fn no_token_is_401_without_asking_the_api_server() {
        let auth = MetricsAuth::new(no_api());
        for authorization in [None, Some("Basic dTpw"), Some("Bearer "), Some("Bearer")] {
            assert_eq!(
                status(&auth, authorization).await,
                StatusCode::UNAUTHORIZED,
                "{authorization:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_failed_review_is_500_and_not_remembered() {
        let auth = MetricsAuth::new(no_api());
        assert_eq!(
            status(&auth, Some("Bearer t")).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert!(auth.cached(&("t".into(), "/metrics".into())).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn verdicts_are_remembered_for_their_time() {
        let auth = MetricsAuth::new(no_api());
        auth.remember(("good".into(), "/metrics".into()), Verdict::Allowed);
        auth.remember(
            ("bad".into(), "/metrics".into()),
            Verdict::Forbidden("u".into()),
        );
        assert_eq!(status(&auth, Some("Bearer good")).await, StatusCode::OK);
        assert_eq!(
            status(&auth, Some("bearer bad")).await,
            StatusCode::FORBIDDEN
        );
        tokio::time::advance(REFUSED_TTL).await;
        // The refusal expired (asked again: the API fails), the allowance not yet.
        assert_eq!(
            status(&auth, Some("Bearer bad")).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(status(&auth, Some("Bearer good")).await, StatusCode::OK);
        tokio::time::advance(ALLOWED_TTL.saturating_sub(REFUSED_TTL)).await;
        assert_eq!(
            status(&auth, Some("Bearer good")).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
