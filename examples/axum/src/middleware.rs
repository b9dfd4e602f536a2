//! The tower layer that checks a route's policies before its handler runs.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName};
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};

use crate::config::{Config, FailMode};
use crate::headers;
use crate::identity::Client;
use crate::limiter::{Limiter, Verdict};
use crate::local::LocalLimiter;
use crate::policy::{Check, Cost, Policy, MAX_UNITS};
use crate::problem;

/// The configuration and the Redis connection every route's layer shares.
#[derive(Clone)]
pub struct RateLimiter {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    limiter: Limiter,
    /// The `local` fail mode's limiter (empty until Redis fails).
    local: LocalLimiter,
}

impl RateLimiter {
    /// Checks the Redis URL; the connection is made by the first request.
    pub fn new(config: Config) -> redis::RedisResult<RateLimiter> {
        let limiter = Limiter::new(
            &config.redis_url,
            &config.cluster_nodes,
            config.redis_timeout,
        )?;
        let local = LocalLimiter::new(config.local_max_keys);
        Ok(RateLimiter {
            shared: Arc::new(Shared {
                config,
                limiter,
                local,
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// A layer for one route (`route_layer`), checking `policies` together:
    /// a request is recorded by all of them or, refused, by none.
    pub fn layer(&self, policies: impl IntoIterator<Item = Policy>) -> RateLimitLayer {
        RateLimitLayer {
            shared: self.shared.clone(),
            policies: policies.into_iter().collect(),
        }
    }
}

#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
    policies: Arc<[Policy]>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    layer: RateLimitLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request> for RateLimit<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The service polled ready goes into the future; a clone stays.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move { Ok(layer.run(req, ready).await) })
    }
}

impl RateLimitLayer {
    async fn run<S>(self, req: Request, inner: S) -> Response
    where
        S: Service<Request, Response = Response, Error = Infallible>,
    {
        let (req, checks) = match self.checks(req).await {
            Ok(prepared) => prepared,
            Err(refusal) => return refusal.into_response(),
        };
        if checks.is_empty() {
            return call(inner, req).await;
        }
        let verdict = match self.shared.limiter.check(&checks).await {
            Ok(verdict) => verdict,
            Err(e) => match self.shared.config.fail_mode {
                FailMode::Open => {
                    tracing::warn!("rate limiting skipped (fail-open): {e}");
                    return call(inner, req).await;
                }
                FailMode::Closed => {
                    tracing::error!("request refused (fail-closed): {e}");
                    return problem::limiter_unavailable();
                }
                FailMode::Local => {
                    tracing::warn!("rate limiting in this process (fail-local): {e}");
                    let (admitted, replies) = self.shared.local.check(&checks);
                    Verdict { admitted, replies }
                }
            },
        };
        let Verdict { admitted, replies } = verdict;
        // One reply per check (a reply of another length is cut to match).
        let n = replies.len().min(checks.len());
        let (checks, replies) = (&checks[..n], &replies[..n]);
        let mut response = if admitted {
            call(inner, req).await
        } else {
            // The refusal names the most restrictive denying policy.
            let worst = headers::most_restrictive(replies).unwrap_or(0);
            match (checks.get(worst), replies.get(worst)) {
                (Some(check), Some(reply)) => problem::too_many_requests(check, reply),
                _ => problem::limiter_unavailable(),
            }
        };
        headers::write(response.headers_mut(), checks, replies, admitted);
        response
    }

    /// The policies that apply to this request (none for an exempt
    /// loopback client), each with its key and cost. The request comes back
    /// whole, its body read into memory if it had to be measured.
    async fn checks(&self, mut req: Request) -> Result<(Request, Vec<Check<'_>>), Refusal> {
        let config = &self.shared.config;
        let client = Client::of(&req, config);
        let applying: Vec<_> = self
            .policies
            .iter()
            .map(|policy| (policy, client.subject(policy.scope)))
            .filter(|(_, subject)| !(config.exempt_loopback && subject.is_loopback()))
            .collect();
        let mut body_len = 0;
        if applying.iter().any(|(p, _)| p.cost == Cost::BodyBytes) {
            (req, body_len) = measure_body(req, config.max_body_bytes).await?;
        }
        let mut checks = Vec::with_capacity(applying.len());
        for (policy, subject) in applying {
            let cost = match &policy.cost {
                Cost::One => 1,
                Cost::BodyBytes => body_len.clamp(1, MAX_UNITS),
                Cost::Header(name) => header_cost(req.headers(), name)?,
            };
            // The subject is the hash tag: one client's keys share a slot.
            let base = format!("{}{{{subject}}}", config.key_prefix);
            checks.push(Check {
                policy,
                key: format!("{base}:{}", policy.name),
                override_key: policy
                    .overridable
                    .then(|| format!("{base}:override:{}", policy.name)),
                cost,
            });
        }
        Ok((req, checks))
    }
}

async fn call<S>(mut inner: S, req: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    match inner.call(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// A request refused before any policy is checked.
enum Refusal {
    /// The cost header is not an integer from 1 to 2^50.
    BadCost(HeaderName),
    /// A body without Content-Length is longer than this.
    BodyTooLarge(usize),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::BadCost(name) => {
                problem::bad_request(&format!("{name} must be an integer from 1 to 2^50."))
            }
            Refusal::BodyTooLarge(max) => problem::payload_too_large(max),
        }
    }
}

/// The body's size: its Content-Length (hyper holds the body to it), else
/// the length of the body read into memory, up to `max` bytes.
async fn measure_body(req: Request, max: usize) -> Result<(Request, u64), Refusal> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared {
        return Ok((req, len));
    }
    let (parts, body) = req.into_parts();
    let bytes = to_bytes(body, max)
        .await
        .map_err(|_| Refusal::BodyTooLarge(max))?;
    let len = bytes.len() as u64;
    Ok((Request::from_parts(parts, Body::from(bytes)), len))
}

/// The cost a request declares in `name`: 1 when absent.
fn header_cost(headers: &HeaderMap, name: &HeaderName) -> Result<u64, Refusal> {
    let Some(value) = headers.get(name) else {
        return Ok(1);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|cost| (1..=MAX_UNITS).contains(cost))
        .ok_or_else(|| Refusal::BadCost(name.clone()))
}
