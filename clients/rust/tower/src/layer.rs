//! The tower adapter: moves an `http::Request` into the contract's flow
//! (`limiter.rs`) and the decision back into an `http::Response`. Works in
//! axum (`route_layer`, `layer`), hyper (`service_fn` behind
//! `ServiceBuilder`) and tonic (`Server::builder().layer`), over any body:
//! the wrapped service gets the request's own body, or the bytes read to
//! measure it ([`RequestBody`]), and answers with its own response body or
//! the middleware's ([`ResponseBody`], which also releases the request's
//! concurrency leases when it ends).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Either, Full, Limited};
use tower_layer::Layer;
use tower_service::Service;

use crate::lease::{Leases, ResponseBody};
use crate::limiter::{Live, Shared};
use crate::plan::{Refusal, RequestFacts};
use crate::refusals::{self, Reply};
use crate::routes::PolicySet;

/// The TCP peer's address, for servers that do not record it as axum's
/// `ConnectInfo` does: insert it into the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// A layer checking a set of policies (from the configuration's routes or
/// from code) against every request of the service it wraps.
#[derive(Clone)]
pub struct RateLimitLayer {
    policies: Policies,
}

/// Which policies a layer checks: a set fixed when it was built, or the
/// configuration's routes as they are when each request starts.
#[derive(Clone)]
enum Policies {
    Fixed(Arc<Shared>, Arc<PolicySet>),
    Live(Arc<Live>),
}

impl Policies {
    fn now(&self) -> (Arc<Shared>, Arc<PolicySet>) {
        match self {
            Policies::Fixed(shared, set) => (shared.clone(), set.clone()),
            Policies::Live(live) => {
                let shared = live.current();
                let set = shared.routes.clone();
                (shared, set)
            }
        }
    }
}

impl RateLimitLayer {
    pub(crate) fn new(shared: Arc<Shared>, set: Arc<PolicySet>) -> RateLimitLayer {
        RateLimitLayer {
            policies: Policies::Fixed(shared, set),
        }
    }

    pub(crate) fn live(live: Arc<Live>) -> RateLimitLayer {
        RateLimitLayer {
            policies: Policies::Live(live),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            policies: self.policies.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    policies: Policies,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body the wrapped service receives: the request's own, or (when a
/// `body-bytes` policy had to read a body without Content-Length) the
/// bytes read. axum's routes and tonic's accept any such body.
pub type RequestBody<B> = Either<B, Full<Bytes>>;

impl<S, B, R> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<RequestBody<B>>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: Send + 'static,
{
    type Response = Response<ResponseBody<R>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<ResponseBody<R>>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The service polled ready goes into the future; a clone stays.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (shared, set) = self.policies.now();
        Box::pin(handle(shared, set, req, inner))
    }
}

async fn handle<S, B, R>(
    shared: Arc<Shared>,
    set: Arc<PolicySet>,
    req: Request<B>,
    mut inner: S,
) -> Result<Response<ResponseBody<R>>, S::Error>
where
    S: Service<Request<RequestBody<B>>, Response = Response<R>>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let peer = peer_of(&req);
    let grpc = refusals::grpc_content_type(req.headers());
    let planned = shared.plan(&set, &facts(&req, peer));
    let Some(planned) = planned else {
        let response = inner.call(req.map(Either::Left)).await?;
        return Ok(response.map(|body| ResponseBody::new(Either::Left(body), None)));
    };
    let mut body_len = None;
    let req = if planned.needs_body_len() {
        // Boxed: only `body-bytes` policies measure, and its future is
        // kept out of every request's.
        match Box::pin(measure(req, shared.max_body_bytes())).await {
            Ok((req, len)) => {
                body_len = Some(len);
                req
            }
            Err(refusal) => return Ok(respond(refusals::refused(&refusal), grpc.as_ref())),
        }
    } else {
        req.map(Either::Left)
    };
    let mut decided = match shared.decide(planned, &facts(&req, peer), body_len).await {
        Ok(decided) => decided,
        Err(reply) => return Ok(respond(reply, grpc.as_ref())),
    };
    // Held from here: released when the body ends, or when this future or
    // the body is dropped (the handler failed, panicked, or the client
    // went away).
    let leases = Leases::new(shared.clone(), std::mem::take(&mut decided.leases));
    // The refusal moves into the response (the headers read only the
    // checks and replies).
    let mut response = match decided.refusal.take() {
        Some(reply) => respond(*reply, grpc.as_ref()),
        None => {
            if let Some(turn) = decided.wait {
                // A queued request is served at its turn; boxed, so the
                // timer stays out of every request's future.
                Box::pin(tokio::time::sleep(turn)).await;
            }
            let response = inner.call(req).await?;
            if let Some(settle) = shared.settle(&decided, response.status().as_u16()) {
                Box::pin(settle).await;
            }
            response.map(|body| ResponseBody::new(Either::Left(body), Some(leases)))
        }
    };
    shared.write_headers(&decided, response.headers_mut());
    Ok(response)
}

fn facts<B>(req: &Request<B>, peer: Option<IpAddr>) -> RequestFacts<'_> {
    RequestFacts {
        method: req.method(),
        uri: req.uri(),
        path: req.uri().path(),
        query: req.uri().query(),
        headers: req.headers(),
        extensions: req.extensions(),
        peer,
    }
}

/// [`PeerAddr`], else axum's `ConnectInfo<SocketAddr>`.
fn peer_of<B>(req: &Request<B>) -> Option<IpAddr> {
    if let Some(PeerAddr(addr)) = req.extensions().get::<PeerAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = req
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    None
}

/// The body's size: its Content-Length, else the length of the body read
/// into memory (then passed on as bytes); more than `max` bytes is refused.
async fn measure<B>(req: Request<B>, max: u64) -> Result<(Request<RequestBody<B>>, u64), Refusal>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let too_large = Refusal::BodyTooLarge { max };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(len) = declared {
        return if len > max {
            Err(too_large)
        } else {
            Ok((req.map(Either::Left), len))
        };
    }
    let (parts, body) = req.into_parts();
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|_| too_large)?
        .to_bytes();
    let len = bytes.len() as u64;
    Ok((
        Request::from_parts(parts, Either::Right(Full::new(bytes))),
        len,
    ))
}

/// The refusal as a response: the status and body, or for a gRPC request
/// a trailers-only gRPC response (HTTP 200, no body, `grpc-status` and
/// `grpc-message` in the headers, and the request's own gRPC content type;
/// docs/http.md, gRPC).
fn respond<R>(reply: Reply, grpc: Option<&HeaderValue>) -> Response<ResponseBody<R>> {
    if let Some(content_type) = grpc {
        let mut response = Response::new(ResponseBody::new(
            Either::Right(Full::new(Bytes::new())),
            None,
        ));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, content_type.clone());
        headers.insert("grpc-status", HeaderValue::from(u16::from(reply.grpc_code)));
        headers.insert("grpc-message", refusals::grpc_message(&reply.detail));
        extra_headers(headers, &reply);
        return response;
    }
    let mut response = Response::new(ResponseBody::new(
        Either::Right(Full::new(reply.body.clone())),
        None,
    ));
    *response.status_mut() = reply.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, reply.content_type.clone());
    extra_headers(headers, &reply);
    response
}

/// The refusal's configured headers (`deny.headers`), each line as given.
fn extra_headers(headers: &mut http::HeaderMap, reply: &Reply) {
    for (name, value) in reply.headers.iter() {
        headers.append(name.clone(), value.clone());
    }
}
