//! The framework-free part of the contract: a [`RateLimiter`] holds the
//! configuration, the Redis connection, the local fail mode, the hook and
//! the user resolver, and turns one request's facts into a [`Decided`]
//! (checks, replies, and the response the request gets), then settles
//! `count: failed` / `succeeded` once the status is known. The tower
//! adapter (`layer.rs`) only moves requests and responses.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use http::{Extensions, HeaderMap};
use ipnet::IpNet;
use librl_client::{Concurrent, Decision, LeaseId};

use crate::breaker::{Breaker, Pass};
use crate::configuration::{validate_policies, whole_shadow, Config, ConfigError, FailMode, Mode};
use crate::decide::{Admitted, Backend, Failure, RedisTarget, Unavailable, Verdict};
use crate::fail::LocalLimiter;
use crate::hook::{self, CheckReport, DecisionEvent, DecisionHook, Outcome};
use crate::identity::Client;
use crate::lease::{Held, Leases};
use crate::plan::{self, Check, Planned, Refusal, RequestFacts};
use crate::policy::{Count, Policy};
use crate::refusals::{self, Refusing, Reply};
use crate::resolvers::{ModeResolver, RequestMode, RequestParts, ResolvedLimit, Resolvers};
use crate::routes::PolicySet;
use crate::{headers, RateLimitLayer};

/// The user an authentication layer has verified. Insert it into the
/// request's extensions before the rate limiter runs, and `key: user`
/// policies count that user (or give the builder a resolver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUser(pub String);

/// Finds the authenticated user of a request.
pub type UserResolver = dyn Fn(&HeaderMap, &Extensions) -> Option<String> + Send + Sync;

/// Why a rate limiter could not be built.
#[derive(Debug)]
pub enum BuildError {
    Config(ConfigError),
    Redis(redis::RedisError),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Config(e) => e.fmt(f),
            BuildError::Redis(e) => write!(f, "librl: redis location: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> BuildError {
        BuildError::Config(e)
    }
}

/// The configuration and the Redis connection every layer shares. Cheap
/// to clone; [`RateLimiter::reload`] swaps the configuration for every
/// clone and every `config_layer`.
#[derive(Clone)]
pub struct RateLimiter {
    live: Arc<Live>,
}

/// The current configuration's state, and what a reload keeps.
pub(crate) struct Live {
    current: RwLock<Arc<Shared>>,
    parts: Parts,
}

/// What the builder was given besides the configuration.
struct Parts {
    target: RedisTarget,
    hook: Option<Arc<dyn DecisionHook>>,
    user: Option<Arc<UserResolver>>,
    resolvers: Resolvers,
}

impl Live {
    /// The configuration requests start on now (a request in flight keeps
    /// the one it started on).
    pub(crate) fn current(&self) -> Arc<Shared> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Parts {
    /// A configuration's state, validated (start-up validation), on a new
    /// connection to the same Redis.
    fn shared(&self, config: Config) -> Result<Shared, BuildError> {
        let validated = config.validated(&self.resolvers)?;
        let backend = Backend::new(&self.target, config.timeout).map_err(BuildError::Redis)?;
        let routes = Arc::new(PolicySet::new(
            validated.policies,
            &config.routes,
            &config.deny,
        ));
        let mode_resolver = config
            .mode_resolver
            .as_ref()
            .and_then(|name| self.resolvers.mode.get(name).cloned());
        Ok(Shared {
            local: LocalLimiter::new(config.local_max_keys),
            exempt: plan::exempt_networks(&config.exempt, config.exempt_loopback),
            deny: Refusing::new(&config.deny),
            fail_deny: Refusing::new(&config.fail_deny),
            breaker: Breaker::new(config.timeout),
            config,
            backend,
            hook: self.hook.clone(),
            user: self.user.clone(),
            routes,
            mode_resolver,
            resolvers: self.resolvers.clone(),
            warned: Mutex::new(None),
        })
    }
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    backend: Backend,
    local: LocalLimiter,
    hook: Option<Arc<dyn DecisionHook>>,
    user: Option<Arc<UserResolver>>,
    /// The configuration's own policies and routes.
    pub(crate) routes: Arc<PolicySet>,
    /// `exempt`, and the loopback networks with `exempt_loopback`.
    exempt: Vec<IpNet>,
    /// `deny` and `fail_deny`, ready to send.
    deny: Refusing,
    fail_deny: Refusing,
    /// `mode: code:<name>`'s resolver.
    mode_resolver: Option<Arc<ModeResolver>>,
    /// Every resolver registered (for layers built in code).
    resolvers: Resolvers,
    /// Applies the fail mode at once while Redis is failing.
    breaker: Breaker,
    /// When fail-open last logged, so it logs at most every 10 s.
    warned: Mutex<Option<Instant>>,
}

/// Builds a [`RateLimiter`]: `RateLimiter::builder(config).redis_url(..)`.
pub struct Builder {
    config: Config,
    target: RedisTarget,
    hook: Option<Box<dyn DecisionHook>>,
    user: Option<Box<UserResolver>>,
    resolvers: Resolvers,
}

impl Builder {
    pub fn redis_url(mut self, url: impl Into<String>) -> Builder {
        self.target = RedisTarget::Url(url.into());
        self
    }

    /// A cluster's node URLs (`redis://host:port`, or `host:port`).
    pub fn redis_cluster<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Builder {
        let nodes = nodes
            .into_iter()
            .map(Into::into)
            .map(|n: String| {
                if n.contains("://") {
                    n
                } else {
                    format!("redis://{n}")
                }
            })
            .collect();
        self.target = RedisTarget::Cluster(nodes);
        self
    }

    pub fn redis(mut self, target: RedisTarget) -> Builder {
        self.target = target;
        self
    }

    /// Called once per checked request (docs/http.md, Decision hook).
    pub fn hook(mut self, hook: impl DecisionHook) -> Builder {
        self.hook = Some(Box::new(hook));
        self
    }

    /// Where `key: user` finds the user; default: the [`AuthUser`] extension.
    pub fn user_resolver(
        mut self,
        resolver: impl Fn(&HeaderMap, &Extensions) -> Option<String> + Send + Sync + 'static,
    ) -> Builder {
        self.user = Some(Box::new(resolver));
        self
    }

    /// Registers the cost resolver `cost: code:<name>` names
    /// (docs/http.md, Resolvers): the request's cost, 1 to 2^50; anything
    /// else (None, 0, more) is answered 400 before any check.
    pub fn cost_resolver(
        mut self,
        name: &str,
        resolver: impl Fn(&RequestParts<'_>) -> Option<u64> + Send + Sync + 'static,
    ) -> Builder {
        self.resolvers.cost.insert(name.into(), Arc::new(resolver));
        self
    }

    /// Registers the limit resolver `limit: code:<name>` names: the
    /// subject's limit and window (and a token policy's burst); None: the
    /// policy does not apply to this request.
    pub fn limit_resolver(
        mut self,
        name: &str,
        resolver: impl Fn(&RequestParts<'_>) -> Option<ResolvedLimit> + Send + Sync + 'static,
    ) -> Builder {
        self.resolvers.limit.insert(name.into(), Arc::new(resolver));
        self
    }

    /// Registers the mode resolver `mode: code:<name>` names: each
    /// request's mode (`Off`: not checked, no headers, no hook call).
    pub fn mode_resolver(
        mut self,
        name: &str,
        resolver: impl Fn(&RequestParts<'_>) -> RequestMode + Send + Sync + 'static,
    ) -> Builder {
        self.resolvers.mode.insert(name.into(), Arc::new(resolver));
        self
    }

    /// Checks the whole configuration (start-up validation, `code:<name>`
    /// against the resolvers registered) and the Redis location; connects
    /// on the first request, so Redis may be down.
    pub fn build(self) -> Result<RateLimiter, BuildError> {
        let parts = Parts {
            target: self.target,
            hook: self.hook.map(Arc::from),
            user: self.user.map(Arc::from),
            resolvers: self.resolvers,
        };
        let shared = parts.shared(self.config)?;
        Ok(RateLimiter {
            live: Arc::new(Live {
                current: RwLock::new(Arc::new(shared)),
                parts,
            }),
        })
    }
}

impl RateLimiter {
    pub fn builder(config: Config) -> Builder {
        Builder {
            config,
            target: RedisTarget::Url("redis://127.0.0.1:6379".into()),
            hook: None,
            user: None,
            resolvers: Resolvers::default(),
        }
    }

    /// `RateLimiter::builder(config).redis(target).build()`.
    pub fn new(config: Config, target: RedisTarget) -> Result<RateLimiter, BuildError> {
        RateLimiter::builder(config).redis(target).build()
    }

    /// The configuration requests start on now.
    pub fn config(&self) -> Config {
        self.live.current().config.clone()
    }

    /// Swaps the configuration (docs/http.md, Reload): requests that
    /// start from now on use `config` (its routes in every
    /// `config_layer`), requests in flight finish on the old one. One
    /// that does not validate is refused with the start-up error, and the
    /// old one stays. The hook, user resolver, resolvers and Redis
    /// location are the builder's; the connection, the breaker and the
    /// `local` fail mode's counts start afresh. Layers built from code
    /// (`layer`, `named_layer`) keep the configuration they were built on.
    pub fn reload(&self, config: Config) -> Result<(), BuildError> {
        let shared = Arc::new(self.live.parts.shared(config)?);
        *self.live.current.write().unwrap_or_else(|p| p.into_inner()) = shared;
        Ok(())
    }

    /// A layer applying the configuration's policies by its `routes`,
    /// following [`RateLimiter::reload`].
    pub fn config_layer(&self) -> RateLimitLayer {
        RateLimitLayer::live(self.live.clone())
    }

    /// A layer for one route (axum's `route_layer`) checking `policies`
    /// together. Panics, naming the field, on a policy the module would
    /// refuse: policies in code are checked when the app starts.
    pub fn layer(&self, policies: impl IntoIterator<Item = Policy>) -> RateLimitLayer {
        self.try_layer(policies).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`RateLimiter::layer`], returning the error instead.
    pub fn try_layer(
        &self,
        policies: impl IntoIterator<Item = Policy>,
    ) -> Result<RateLimitLayer, ConfigError> {
        let policies: Vec<Policy> = policies.into_iter().collect();
        let shared = self.live.current();
        let mut policies = validate_policies(
            &policies,
            "layer",
            &shared.config.identities,
            &shared.resolvers,
        )?;
        whole_shadow(shared.config.mode, &mut policies);
        let set = Arc::new(PolicySet::new(policies, &[], &shared.config.deny));
        Ok(RateLimitLayer::new(shared, set))
    }

    /// A layer for one route checking the configuration's policies of
    /// these names, in this order.
    pub fn named_layer<'n>(
        &self,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<RateLimitLayer, ConfigError> {
        let mut policies = Vec::new();
        let shared = self.live.current();
        for (i, name) in names.into_iter().enumerate() {
            let policy = shared
                .config
                .policies
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| {
                    ConfigError::new(
                        format!("named_layer[{i}]"),
                        format!("no policy is named \"{name}\""),
                    )
                })?;
            policies.push(policy.clone());
        }
        self.try_layer(policies)
    }
}

/// One request's decision and what to answer.
pub(crate) struct Decided {
    pub checks: Vec<Check>,
    pub replies: Vec<Decision>,
    pub outcome: Outcome,
    /// Decided in this process (the `local` fail mode).
    pub local: bool,
    /// The response to send instead of calling the handler (boxed: rare,
    /// and kept small in every request's future).
    pub refusal: Option<Box<Reply>>,
    /// The concurrency leases the request holds until its response is
    /// finished.
    pub leases: Vec<Held>,
    /// A queued request's turn: how long to wait before serving it.
    pub wait: Option<Duration>,
}

impl Shared {
    /// The applying policies, or None when the request is not checked (no
    /// route, every policy exempt).
    pub(crate) fn plan(&self, set: &PolicySet, facts: &RequestFacts<'_>) -> Option<Planned> {
        let mode = match &self.mode_resolver {
            None => self.config.mode,
            Some(resolve) => match resolve(&facts.parts()) {
                RequestMode::Off => return None,
                RequestMode::Enforce => Mode::Enforce,
                RequestMode::Shadow => Mode::Shadow,
            },
        };
        let selection = set.select(facts.method, facts.path.as_bytes())?;
        let c = &self.config;
        let user = match &self.user {
            Some(resolve) => resolve(facts.headers, facts.extensions),
            None => facts.extensions.get::<AuthUser>().map(|u| u.0.clone()),
        };
        let client = Client::new(
            facts.peer,
            facts.headers,
            &c.trusted_proxies,
            &c.api_key_header,
            user,
            c.ipv6_prefix,
        );
        if plan::is_exempt(&self.exempt, &client) {
            return None;
        }
        let applying = plan::applying(selection.policies, &client, facts);
        (!applying.is_empty()).then(|| Planned {
            route: selection.route.map(|(_, path)| path.to_string()),
            deny: selection.deny.cloned(),
            mode,
            applying,
        })
    }

    pub(crate) fn max_body_bytes(&self) -> u64 {
        self.config.max_body_bytes
    }

    /// Costs, then one `RL.ALL` per subject (or the fail mode), the hook,
    /// and the response: the handler's (admitted, shadow, fail-open) or a
    /// refusal.
    pub(crate) async fn decide(
        self: &Arc<Self>,
        mut planned: Planned,
        facts: &RequestFacts<'_>,
        body_len: Option<u64>,
    ) -> Result<Decided, Reply> {
        // Taken, not cloned: the checks need neither.
        let route = planned.route.take();
        let deny = planned.deny.take();
        let mode = planned.mode;
        let checks = planned
            .checks(&self.config.prefix, &facts.parts(), body_len)
            .map_err(|r: Refusal| refusals::refused(&r))?;
        let checked = match self.breaker.pass() {
            Pass::Check => {
                let checked = self.check(&checks).await;
                self.breaker.record(checked.is_ok());
                checked
            }
            Pass::Skip => Err(Failure {
                error: Unavailable::BreakerOpen,
                admitted: Vec::new(),
            }),
        };
        let (outcome, replies, local, error, leases) = match checked {
            Ok(v) => {
                let leases = verdict_leases(&checks, &v);
                let outcome = Outcome::decided(v.admitted, v.shadow_denied, mode);
                (outcome, v.replies, false, None, leases)
            }
            // Boxed: rare, and kept out of every request's future.
            Err(failure) => Box::pin(self.fail(&checks, failure, mode)).await,
        };
        let worst = headers::most_restrictive(&checks, &replies, outcome == Outcome::Denied);
        if outcome == Outcome::WouldDeny {
            if let Some(i) = worst {
                tracing::warn!(
                    "librl: shadow mode: policy {:?} would deny {} {}",
                    checks[i].policy.name,
                    facts.method,
                    facts.path
                );
            }
        }
        if let Some(hook) = &self.hook {
            let event = DecisionEvent {
                outcome,
                local,
                method: facts.method,
                path: facts.path,
                route: route.as_deref(),
                checks: checks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| CheckReport {
                        policy: &c.policy.name,
                        subject: c.subject.to_string(),
                        key: &c.key,
                        cost: c.cost.get(),
                        decision: replies.get(i).copied(),
                    })
                    .collect(),
                error,
            };
            hook::call(hook.as_ref(), &event);
        }
        let refusal = match outcome {
            Outcome::Denied => match worst {
                Some(i) => {
                    let deny = deny.as_deref().unwrap_or(&self.deny);
                    Some(Box::new(refusals::denied(deny, &checks[i], &replies[i])))
                }
                None => Some(Box::new(refusals::unavailable(&self.fail_deny))),
            },
            Outcome::FailClosed => Some(Box::new(refusals::unavailable(&self.fail_deny))),
            Outcome::Allowed | Outcome::WouldDeny | Outcome::FailOpen => None,
        };
        let wait = match refusal {
            None => queued_turn(&checks, &replies),
            Some(_) => None,
        };
        Ok(Decided {
            checks,
            replies,
            outcome,
            local,
            refusal,
            leases,
            wait,
        })
    }

    /// The request's exchange with Redis. One that takes concurrency slots
    /// runs it on a task of its own: a request dropped mid-exchange (the
    /// client went away) would lose the leases Redis gave it, and the slots
    /// would stay taken until `lease` ended them. The task hands the leases
    /// over as a [`Leases`], which releases them when no request is left to
    /// claim them (docs/http.md, Concurrency policies).
    async fn check(self: &Arc<Self>, checks: &[Check]) -> Result<Verdict, Failure> {
        let takes_leases = checks.iter().any(|c| c.policy.is_concurrency());
        let runtime = match takes_leases {
            true => tokio::runtime::Handle::try_current().ok(),
            false => None,
        };
        let Some(runtime) = runtime else {
            return self.backend.check(checks).await;
        };
        let shared = Arc::clone(self);
        let owned = checks.to_vec();
        let (handed, claimed) = tokio::sync::oneshot::channel();
        runtime.spawn(async move {
            let checked = shared.backend.check(&owned).await;
            let held = match &checked {
                Ok(v) => verdict_leases(&owned, v),
                Err(failure) => redis_leases(&owned, &failure.admitted),
            };
            // Sent to a request that is gone, the leases are dropped
            // unclaimed, and released.
            let _ = handed.send((checked, Leases::new(shared, held)));
        });
        match claimed.await {
            Ok((checked, mut leases)) => {
                // The request holds them from here (`Decided::leases`).
                leases.claim();
                checked
            }
            Err(_) => Err(Failure {
                error: Unavailable::Redis(redis::RedisError::from(std::io::Error::other(
                    "the exchange's task ended without an answer",
                ))),
                admitted: Vec::new(),
            }),
        }
    }

    /// Sends the `RELEASE`s of a finished request's leases (errors
    /// ignored: a lease not released ends by itself).
    pub(crate) async fn release(&self, releases: &[Concurrent]) {
        self.backend.release(releases).await;
    }

    /// Releases a lease the `local` fail mode gave.
    pub(crate) fn release_local(&self, check: &Check, id: LeaseId) {
        self.local.release(check, id);
    }

    /// The rate-limit headers for this decision (none when Redis failed
    /// open or closed).
    pub(crate) fn write_headers(&self, decided: &Decided, headers: &mut HeaderMap) {
        if decided.replies.len() == decided.checks.len() {
            headers::write(
                headers,
                self.config.headers,
                self.config.legacy_reset,
                unix_ms(),
                &decided.checks,
                &decided.replies,
                decided.outcome,
            );
        }
    }

    /// `count: failed` refunds below 400, `count: succeeded` from 400:
    /// before the response goes out, so the client's next request sees it.
    /// None when nothing is to be refunded (the common case: no future to
    /// allocate or poll).
    pub(crate) fn settle<'a>(
        &'a self,
        decided: &'a Decided,
        status: u16,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'a> {
        // Only what Redis recorded is refunded there.
        if decided.outcome != Outcome::Allowed || decided.local {
            return None;
        }
        let refund: Vec<&Check> = decided
            .checks
            .iter()
            .filter(|c| match c.policy.count {
                Count::All => false,
                Count::Failed => status < 400,
                Count::Succeeded => status >= 400,
            })
            .collect();
        if refund.is_empty() {
            return None;
        }
        Some(async move {
            if let Err(e) = self.backend.refund(&refund).await {
                tracing::warn!("librl: could not refund after the response: {e}");
            }
        })
    }

    /// Redis could not answer (docs/http.md, Fail modes), maybe after it
    /// admitted some groups: a request that is served keeps them counted
    /// (and holds their leases), one that is refused has them given back
    /// before it is answered.
    async fn fail(
        &self,
        checks: &[Check],
        failure: Failure,
        mode: Mode,
    ) -> (Outcome, Vec<Decision>, bool, Option<String>, Vec<Held>) {
        let Failure { error, admitted } = failure;
        match self.config.fail {
            FailMode::Open => {
                self.warn_open(&error);
                (
                    Outcome::FailOpen,
                    Vec::new(),
                    false,
                    Some(error.to_string()),
                    redis_leases(checks, &admitted),
                )
            }
            FailMode::Closed => {
                tracing::error!("librl: request refused (fail closed): {error}");
                self.backend.refund_groups(checks, &admitted).await;
                (
                    Outcome::FailClosed,
                    Vec::new(),
                    false,
                    Some(error.to_string()),
                    Vec::new(),
                )
            }
            FailMode::Local => {
                let (served, replies) = self.local_check(checks);
                let leases = if served {
                    let mut leases = redis_leases(checks, &admitted);
                    leases.extend(Held::local(checks, &replies));
                    leases
                } else {
                    self.backend.refund_groups(checks, &admitted).await;
                    Vec::new()
                };
                let shadow_denied = checks
                    .iter()
                    .zip(&replies)
                    .any(|(c, r)| c.policy.shadow && !r.allowed);
                let outcome = Outcome::decided(served, shadow_denied, mode);
                (outcome, replies, true, Some(error.to_string()), leases)
            }
        }
    }

    /// The `local` fail mode's decision: the enforced policies
    /// all-or-nothing, then the shadow ones apart (as in Redis: a shadow
    /// policy never refuses, nor is refused by another); replies in check
    /// order.
    fn local_check(&self, checks: &[Check]) -> (bool, Vec<Decision>) {
        if !checks.iter().any(|c| c.policy.shadow) {
            return self.local.check(checks);
        }
        let (shadow, enforced): (Vec<&Check>, Vec<&Check>) =
            checks.iter().partition(|c| c.policy.shadow);
        let owned = |part: Vec<&Check>| part.into_iter().cloned().collect::<Vec<Check>>();
        let (served, enforced_replies) = self.local.check(&owned(enforced));
        let (_, shadow_replies) = self.local.check(&owned(shadow));
        let (mut e, mut s) = (enforced_replies.into_iter(), shadow_replies.into_iter());
        let replies = checks
            .iter()
            .filter_map(|c| if c.policy.shadow { s.next() } else { e.next() })
            .collect();
        (served, replies)
    }

    fn warn_open(&self, e: &Unavailable) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
            *warned = Some(Instant::now());
            tracing::warn!("librl: rate limiting skipped (fail open): {e}");
        }
    }
}

/// The latest turn a `queue` policy booked for an admitted request
/// (docs/http.md, Lockouts and queues); None when none must wait.
fn queued_turn(checks: &[Check], replies: &[Decision]) -> Option<Duration> {
    checks
        .iter()
        .zip(replies)
        .filter(|(c, r)| c.policy.queue_ms.is_some() && r.allowed)
        .filter_map(|(_, r)| r.retry_after.duration())
        .max()
        .filter(|d| !d.is_zero())
}

/// Now, in ms since the Unix epoch (`legacy_reset: unix`).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The leases Redis gave a request it answered. A request refused took no
/// lease of an enforced policy (RL.ALL admitted nothing, and other
/// subjects' leases were given back); a shadow policy's is released as any.
fn verdict_leases(checks: &[Check], verdict: &Verdict) -> Vec<Held> {
    match verdict.admitted {
        true => Held::redis(checks, &verdict.replies),
        false => Held::redis_shadow(checks, &verdict.replies),
    }
}

/// The leases Redis gave the groups it admitted before it failed.
fn redis_leases(checks: &[Check], admitted: &[Admitted]) -> Vec<Held> {
    admitted
        .iter()
        .flat_map(|group| {
            let members: Vec<Check> = group
                .members
                .iter()
                .filter_map(|&i| checks.get(i).cloned())
                .collect();
            Held::redis(&members, &group.replies)
        })
        .collect()
}
