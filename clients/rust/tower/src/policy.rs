//! One named limit (docs/http.md, Policies): its algorithm, limit and
//! window, whose counter it uses, what a request costs, and which
//! responses it counts. [`Policy`] is what an application writes (plain
//! numbers, checked when a layer is built); [`ValidPolicy`] is what a
//! validated one holds: librl-core's [`Amount`] and [`Window`], so the rest
//! of the crate never meets a limit or window the module would refuse.

use std::time::Duration;

use http::{HeaderName, HeaderValue};

use std::sync::Arc;

use crate::configuration::Mode;
use crate::identity::{Keyed, Source};
use crate::resolvers::{CostResolver, LimitResolver, Named, Resolvers};
use librl_core::units::{Amount, Window};

/// Which RL.* command a policy calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `RL.FIXED`; `aligned` windows start on multiples of the window in
    /// Unix time (per-minute limits that reset on the minute).
    Fixed { aligned: bool },
    /// `RL.SLIDING`: the exact log.
    Sliding,
    /// `RL.SLIDING ... APPROX`: the constant-memory two-window counter.
    Approx,
    /// `RL.TOKEN`: `limit` tokens per window into a bucket of `burst` tokens
    /// (default `limit`).
    Token { burst: Option<u64> },
    /// `RL.CONCURRENT`: at most `limit` requests in flight; the policy's
    /// `window` is the lease, after which a slot whose release never came
    /// frees itself.
    Concurrency,
}

/// Whose counter a policy uses (docs/http.md, Identity).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// The client's address (proxy headers believed only from trusted proxies).
    Ip,
    /// The API key's SHA-256 prefix; no key: the address.
    ApiKey,
    /// The authenticated user; else the API key; else the address.
    User,
    /// This header's value; absent: the address.
    Header(HeaderName),
    /// This cookie's value (the name as written); absent: the address.
    Cookie(String),
    /// This query parameter's value; absent: the address.
    Query(String),
    /// The credentials of `Authorization: <Scheme> ...`, hashed; absent:
    /// the address.
    Authorization(String),
    /// This request attribute ([`Attributes`](crate::Attributes); the
    /// name as written, case-sensitive); absent: the address.
    Attribute(String),
    /// An identity of the configuration's `identities` (docs/http.md,
    /// Named identities); `api-key` and `user` are [`KeyKind::ApiKey`] and
    /// [`KeyKind::User`], redefined there or not.
    Identity(String),
    /// One counter for everyone.
    Global,
}

/// What one request costs against a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cost {
    /// The same units for every request (1 by default).
    Units(u64),
    /// The request body's size in bytes (at least 1).
    BodyBytes,
    /// The integer in the request header of this name (as the 400's detail
    /// writes it: `X-Batch-Size`), 1 when absent.
    Header(String),
    /// What the cost resolver registered under this name gives
    /// (docs/http.md, Resolvers).
    Code(String),
}

/// Which requests stay counted once the response is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    All,
    /// Refunded when the response status is below 400.
    Failed,
    /// Refunded when the response status is 400 or above.
    Succeeded,
}

/// One named limit. The name is part of the key, so policies with the same
/// name share each subject's counter on every route that uses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub algorithm: Algorithm,
    /// Units per window (for `Token`, the rate: tokens added per window;
    /// for `Concurrency`, the slots).
    pub limit: u64,
    /// For `Concurrency`, the lease.
    pub window: Duration,
    pub key: KeyKind,
    pub cost: Cost,
    pub count: Count,
    /// Sends `OVERRIDE <prefix>{subject}:override:<name>`, so that an
    /// operator's `RL.OVERRIDE SET` on that key gives one subject its own plan.
    pub overridable: bool,
    /// `Some(Shadow)`: checked and counted, never refusing (docs/http.md,
    /// Shadow mode); None: the configuration's `mode`.
    pub mode: Option<Mode>,
    /// `limit: code:<name>`: the limit resolver of this name gives each
    /// request's limit and window (`limit`, `window` and burst are then
    /// unused).
    pub limit_resolver: Option<String>,
    /// Once this policy denies a subject, the subject is locked out this
    /// long (the module's `BLOCK`; docs/http.md, Lockouts and queues).
    pub block: Option<Duration>,
    /// Token policies: a request over the rate is given its turn up to
    /// this far ahead (`RESERVE`) and served when it comes.
    pub queue: Option<Duration>,
}

impl Policy {
    /// `limit` requests per fixed `window`, counted per client address.
    pub fn fixed(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Fixed { aligned: false }, limit, window)
    }

    /// At most `limit` requests in any `window` (the exact log).
    pub fn sliding(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Sliding, limit, window)
    }

    /// The sliding window's constant-memory approximation.
    pub fn approx(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Approx, limit, window)
    }

    /// A bucket refilled with `rate` tokens per `window`.
    pub fn token(name: &str, rate: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Token { burst: None }, rate, window)
    }

    /// At most `limit` requests in flight at once, each holding its slot
    /// (its cost in slots) until its response has been sent; a slot whose
    /// release never arrives frees itself after `lease`.
    pub fn concurrency(name: &str, limit: u64, lease: Duration) -> Policy {
        Policy::new(name, Algorithm::Concurrency, limit, lease)
    }

    /// Values are checked when a layer is built, so a bad policy stops the
    /// program at start-up. The defaults are the schema's (a test holds
    /// them to it).
    pub fn new(name: &str, algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
        Policy {
            name: name.to_string(),
            algorithm,
            limit,
            window,
            key: KeyKind::Ip,
            cost: Cost::Units(1),
            count: Count::All,
            overridable: false,
            mode: None,
            limit_resolver: None,
            block: None,
            queue: None,
        }
    }

    /// `limit: code:<name>`: the limit resolver registered as `resolver`
    /// gives each request's limit and window (docs/http.md, Resolvers).
    pub fn resolved(name: &str, algorithm: Algorithm, resolver: &str) -> Policy {
        let mut policy = Policy::new(name, algorithm, 1, Duration::from_secs(1));
        policy.limit_resolver = Some(resolver.to_string());
        policy
    }

    /// Checked and counted beside the enforced policies, never refusing
    /// (docs/http.md, Shadow mode).
    pub fn shadow(mut self) -> Policy {
        self.mode = Some(Mode::Shadow);
        self
    }

    /// Fixed windows aligned to Unix time. Panics on another algorithm:
    /// a policy table is code, and a typo in it stops the program at start.
    pub fn aligned(mut self) -> Policy {
        match &mut self.algorithm {
            Algorithm::Fixed { aligned } => *aligned = true,
            other => panic!(
                "policy {}: aligned is for fixed policies, not {}",
                self.name,
                other.name()
            ),
        }
        self
    }

    /// The bucket's capacity. Panics on another algorithm than token.
    pub fn burst(mut self, capacity: u64) -> Policy {
        match &mut self.algorithm {
            Algorithm::Token { burst } => *burst = Some(capacity),
            other => panic!(
                "policy {}: burst is for token policies, not {}",
                self.name,
                other.name()
            ),
        }
        self
    }

    pub fn key(mut self, key: KeyKind) -> Policy {
        self.key = key;
        self
    }

    pub fn cost(mut self, cost: Cost) -> Policy {
        self.cost = cost;
        self
    }

    pub fn count(mut self, count: Count) -> Policy {
        self.count = count;
        self
    }

    pub fn overridable(mut self) -> Policy {
        self.overridable = true;
        self
    }
}

impl Algorithm {
    /// The configuration's name: `fixed`, `sliding`, `approx`, `token`.
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::Fixed { .. } => "fixed",
            Algorithm::Sliding => "sliding",
            Algorithm::Approx => "approx",
            Algorithm::Token { .. } => "token",
            Algorithm::Concurrency => "concurrency",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "fixed" => Some(Algorithm::Fixed { aligned: false }),
            "sliding" => Some(Algorithm::Sliding),
            "approx" => Some(Algorithm::Approx),
            "token" => Some(Algorithm::Token { burst: None }),
            "concurrency" => Some(Algorithm::Concurrency),
            _ => None,
        }
    }
}

impl KeyKind {
    /// The configuration's text: `ip`, `api-key`, `user`, `global`,
    /// `header:<name>`, `cookie:<name>`, an identity's name.
    pub fn to_config(&self) -> String {
        match self {
            KeyKind::Ip => "ip".into(),
            KeyKind::ApiKey => "api-key".into(),
            KeyKind::User => "user".into(),
            KeyKind::Global => "global".into(),
            KeyKind::Header(name) => format!("header:{name}"),
            KeyKind::Cookie(name) => format!("cookie:{name}"),
            KeyKind::Query(name) => format!("query:{name}"),
            KeyKind::Authorization(scheme) => format!("authorization:{scheme}"),
            KeyKind::Attribute(name) => format!("attribute:{name}"),
            KeyKind::Identity(name) => name.clone(),
        }
    }

    /// Reads a text the walker has checked against the schema's pattern.
    pub(crate) fn from_config(text: &str) -> Option<KeyKind> {
        Some(match text {
            "ip" => KeyKind::Ip,
            "api-key" => KeyKind::ApiKey,
            "user" => KeyKind::User,
            "global" => KeyKind::Global,
            _ => match Source::from_config(text) {
                Some(Source::Header(name)) => KeyKind::Header(name),
                Some(Source::Cookie(name)) => KeyKind::Cookie(name),
                Some(Source::Query(name)) => KeyKind::Query(name),
                Some(Source::Authorization(scheme)) => KeyKind::Authorization(scheme),
                Some(Source::Attribute(name)) => KeyKind::Attribute(name),
                Some(Source::User | Source::Ip) => return None,
                None if !text.contains(':') => KeyKind::Identity(text.into()),
                None => return None,
            },
        })
    }

    /// How the subject is found, with `identities` (the configuration's,
    /// in order) redefining `api-key` and `user`; None for an identity
    /// name `identities` does not hold.
    pub(crate) fn keyed(&self, identities: &[(String, Vec<Source>)]) -> Option<Keyed> {
        let named = |name: &str| {
            identities
                .iter()
                .find(|(n, _)| n == name)
                .map(|(n, sources)| Keyed::Sources {
                    label: Arc::from(n.as_str()),
                    hash: n == "api-key"
                        || sources
                            .iter()
                            .any(|s| matches!(s, Source::Authorization(_))),
                    sources: sources.clone().into(),
                })
        };
        let inline = |label: String, source: Source, hash: bool| Keyed::Sources {
            label: Arc::from(label),
            sources: Arc::from([source]),
            hash,
        };
        Some(match self {
            KeyKind::Ip => Keyed::Ip,
            KeyKind::Global => Keyed::Global,
            KeyKind::ApiKey => named("api-key").unwrap_or(Keyed::ApiKey),
            KeyKind::User => named("user").unwrap_or(Keyed::User),
            KeyKind::Identity(name) => named(name)?,
            KeyKind::Header(name) => Keyed::Header(name.clone()),
            KeyKind::Cookie(name) => inline(
                format!("cookie:{name}"),
                Source::Cookie(name.clone()),
                false,
            ),
            KeyKind::Query(name) => {
                inline(format!("query:{name}"), Source::Query(name.clone()), false)
            }
            KeyKind::Authorization(scheme) => inline(
                format!("authorization:{}", scheme.to_ascii_lowercase()),
                Source::Authorization(scheme.clone()),
                true,
            ),
            KeyKind::Attribute(name) => inline(
                format!("attribute:{name}"),
                Source::Attribute(name.clone()),
                false,
            ),
        })
    }
}

impl Count {
    pub fn name(self) -> &'static str {
        match self {
            Count::All => "all",
            Count::Failed => "failed",
            Count::Succeeded => "succeeded",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Count> {
        match name {
            "all" => Some(Count::All),
            "failed" => Some(Count::Failed),
            "succeeded" => Some(Count::Succeeded),
            _ => None,
        }
    }
}

/// A validated policy's algorithm: a token bucket's burst is an [`Amount`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValidAlgorithm {
    Fixed {
        aligned: bool,
    },
    Sliding,
    Approx,
    Token {
        burst: Option<Amount>,
    },
    /// The policy's `window` is the lease.
    Concurrency,
}

/// A validated policy's cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ValidCost {
    Units(Amount),
    BodyBytes,
    /// The header to read, and its name as configured (the 400's detail).
    Header {
        name: HeaderName,
        configured: String,
    },
    /// A cost resolver.
    Code(Named<CostResolver>),
}

/// A policy whose every number is one the module accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ValidPolicy {
    pub name: String,
    pub algorithm: ValidAlgorithm,
    pub limit: Amount,
    pub window: Window,
    pub key: Keyed,
    pub cost: ValidCost,
    pub count: Count,
    pub overridable: bool,
    /// Its own `mode: shadow` (what the top-level `mode: shadow` does to
    /// every policy is the limiter's).
    pub shadow: bool,
    /// `limit: code:<name>`: each request's limit, window and burst.
    pub limit_resolver: Option<Named<LimitResolver>>,
    /// `block`, in ms.
    pub block_ms: Option<u64>,
    /// `queue`, in ms (token policies).
    pub queue_ms: Option<u64>,
    /// What its checks send and show, made once for these numbers.
    pub premade: Premade,
}

/// A policy's clause and headers as far as they are the same for every
/// request: made when the policy is validated (or given a resolved
/// limit), so a request only adds its key, its override key and the
/// numbers of its reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Premade {
    /// Its `RateLimit-Policy` item, showing the policy's own limit.
    pub policy_item: Option<HeaderValue>,
    /// The policy's own limit, as `X-RateLimit-Limit` shows it.
    pub limit: Option<HeaderValue>,
    /// Its `RL.ALL` clause's words after the key at cost 1: those before
    /// the override key (ending in `OVERRIDE` when it is overridable),
    /// and those after it. None: built per request.
    pub words: Option<crate::decide::ClauseWords>,
}

impl Premade {
    fn of(policy: &ValidPolicy) -> Premade {
        let limit = policy.limit.get();
        Premade {
            policy_item: crate::headers::policy_item(policy, limit),
            limit: Some(HeaderValue::from(limit)),
            words: crate::decide::premade_words(policy),
        }
    }
}

impl ValidPolicy {
    /// None when a number is out of the module's range, the cost header
    /// is not a header name, or the key names no identity of `identities`:
    /// what the reader refuses first, so only a policy that skipped it
    /// gets None.
    /// A resolver the policy names that `resolvers` lacks is None too.
    pub(crate) fn new(
        p: &Policy,
        identities: &[(String, Vec<Source>)],
        resolvers: &Resolvers,
    ) -> Option<ValidPolicy> {
        let algorithm = match p.algorithm {
            Algorithm::Fixed { aligned } => ValidAlgorithm::Fixed { aligned },
            Algorithm::Sliding => ValidAlgorithm::Sliding,
            Algorithm::Approx => ValidAlgorithm::Approx,
            Algorithm::Token { burst: None } => ValidAlgorithm::Token { burst: None },
            Algorithm::Token { burst: Some(b) } => ValidAlgorithm::Token {
                burst: Some(Amount::new(b)?),
            },
            Algorithm::Concurrency => ValidAlgorithm::Concurrency,
        };
        let whole_ms = p.window.subsec_nanos().is_multiple_of(1_000_000);
        let window_ms = u64::try_from(p.window.as_millis()).ok()?;
        let cost = match &p.cost {
            Cost::Units(n) => ValidCost::Units(Amount::new(*n)?),
            Cost::BodyBytes => ValidCost::BodyBytes,
            Cost::Header(configured) => ValidCost::Header {
                name: HeaderName::from_bytes(configured.as_bytes()).ok()?,
                configured: configured.clone(),
            },
            Cost::Code(name) => ValidCost::Code(Resolvers::named(&resolvers.cost, name)?),
        };
        let limit_resolver = match &p.limit_resolver {
            Some(name) => Some(Resolvers::named(&resolvers.limit, name)?),
            None => None,
        };
        Some(
            ValidPolicy {
                name: p.name.clone(),
                algorithm,
                limit: Amount::new(p.limit)?,
                window: whole_ms.then(|| Window::new(window_ms)).flatten()?,
                key: p.key.keyed(identities)?,
                cost,
                count: p.count,
                overridable: p.overridable,
                shadow: p.mode == Some(Mode::Shadow),
                limit_resolver,
                block_ms: ms_of(p.block)?,
                queue_ms: ms_of(p.queue)?,
                premade: Premade::default(),
            }
            .premade(),
        )
    }

    /// This policy with its [`Premade`] made for its numbers: after
    /// [`ValidPolicy::new`], and after a resolver changed them.
    pub(crate) fn premade(mut self) -> ValidPolicy {
        self.premade = Premade::of(&self);
        self
    }

    /// The window in whole seconds, rounded up, as the headers give it;
    /// None for a concurrency policy, which has none.
    pub(crate) fn window_secs(&self) -> Option<u64> {
        match self.algorithm {
            ValidAlgorithm::Concurrency => None,
            _ => Some(self.window.ms().div_ceil(1000)),
        }
    }

    pub(crate) fn is_concurrency(&self) -> bool {
        self.algorithm == ValidAlgorithm::Concurrency
    }
}

/// A duration of whole milliseconds, as the walker reads one; Some(None)
/// when absent, None when the module could not take it.
fn ms_of(d: Option<Duration>) -> Option<Option<u64>> {
    match d {
        None => Some(None),
        Some(d) if d.subsec_nanos().is_multiple_of(1_000_000) => {
            u64::try_from(d.as_millis()).ok().map(Some)
        }
        Some(_) => None,
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
