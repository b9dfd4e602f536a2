//! The Redis exchange of one request (docs/http.md, One decision per
//! request): one connection shared by every request, made on first use
//! (so the app starts while Redis is down) and remade after a loss; one
//! `RL.ALL` per subject, `PEEK` after a denial, refunds across subjects
//! (a concurrency policy's lease given back by `RELEASE`); when Redis
//! fails part-way, which groups it had admitted, so the fail mode can keep
//! or give them back; and the `RELEASE` of a request's leases once its
//! response is finished.

use std::fmt;
use std::time::Duration;

use std::sync::Arc;

use librl_client::{
    All, AllDecision, AsyncLimiter, Clause, Command, Concurrent, Decision, Fixed, LeaseId, Sliding,
    Token,
};
use librl_core::units::Amount;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::connection::{array_header, bulk, Standalone};
use crate::identity::Subject;
use crate::plan::Check;
use crate::policy::{ValidAlgorithm, ValidPolicy};

/// Where librl is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    /// `redis://host:port/db`.
    Url(String),
    /// A cluster's node URLs (some of them suffice).
    Cluster(Vec<String>),
}

enum Connection {
    // Sent on directly: a standalone server never answers TRYAGAIN or
    // MOVED, and the middleware uses neither a denial cache nor WAIT, so
    // `AsyncLimiter`'s machinery would only add to every request's future.
    Standalone(Standalone),
    Cluster {
        client: Box<ClusterClient>,
        limiter: OnceCell<AsyncLimiter<ClusterConnection>>,
    },
}

pub struct Backend {
    connection: Connection,
    timeout: Duration,
}

/// Why Redis gave no answer; any of them applies the fail mode.
#[derive(Debug)]
pub enum Unavailable {
    Redis(redis::RedisError),
    Timeout(Duration),
    /// Redis failed lately: the breaker is open (docs/http.md, Fail modes).
    BreakerOpen,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Redis(e) => write!(f, "redis: {e}"),
            Unavailable::Timeout(t) => write!(f, "redis gave no answer within {t:?}"),
            Unavailable::BreakerOpen => {
                f.write_str("redis failed lately; not asked until the back-off ends")
            }
        }
    }
}

/// The checks' verdict: admitted or not, and every check's reply in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub admitted: bool,
    pub replies: Vec<Decision>,
    /// A shadow policy's check denied (it refused nothing).
    pub shadow_denied: bool,
}

/// Redis failed during the exchange: why, and the groups (indices of the
/// checks, one subject each) it had admitted before, with their replies
/// (a concurrency check's lease), which the fail mode keeps or gives back.
/// A group whose reply never came is in none: Redis may or may not have
/// recorded it (a lease taken then ends by itself).
#[derive(Debug)]
pub struct Failure {
    pub error: Unavailable,
    pub admitted: Vec<Admitted>,
}

/// One subject's checks Redis admitted, and its replies to them (same
/// order).
#[derive(Clone, Debug)]
pub struct Admitted {
    pub members: Vec<usize>,
    pub replies: Vec<Decision>,
}

impl Backend {
    /// Parses the URL or node URLs; connects on the first request.
    pub fn new(target: &RedisTarget, timeout: Duration) -> redis::RedisResult<Backend> {
        let connection = match target {
            RedisTarget::Url(url) => {
                Connection::Standalone(Standalone::new(redis::Client::open(url.as_str())?, timeout))
            }
            RedisTarget::Cluster(nodes) => Connection::Cluster {
                client: Box::new(
                    ClusterClient::builder(nodes.clone())
                        .connection_timeout(timeout)
                        .response_timeout(timeout)
                        .build()?,
                ),
                limiter: OnceCell::new(),
            },
        };
        Ok(Backend {
            connection,
            timeout,
        })
    }

    /// One `RL.ALL` per subject, in the order subjects first appear. After
    /// a denial the later subjects are peeked (every check gets a reply)
    /// and the earlier, admitted ones refunded, so a refused request is
    /// counted by no policy. The whole exchange has the timeout.
    pub async fn check(&self, checks: &[Check]) -> Result<Verdict, Failure> {
        let mut admitted = Vec::new();
        let exchange = match &self.connection {
            // Each command carries the deadline: the connection's one
            // timer fails it, with no timer of the request's own.
            Connection::Standalone(_) => {
                let deadline = Instant::now() + self.timeout;
                self.exchange(checks, &mut admitted, Some(deadline)).await
            }
            // Boxed: the cluster path's futures are kept out of the
            // standalone one's.
            Connection::Cluster { .. } => Box::pin(tokio::time::timeout(
                self.timeout,
                self.exchange(checks, &mut admitted, None),
            ))
            .await
            .unwrap_or_else(|_| Err(crate::connection::timed_out())),
        };
        exchange.map_err(|e| Failure {
            error: match e.is_timeout() {
                true => Unavailable::Timeout(self.timeout),
                false => Unavailable::Redis(e),
            },
            admitted,
        })
    }

    /// [`Backend::check`]'s exchange, each command ending by `deadline`
    /// (none: the caller bounds it); `admitted_groups` holds the groups
    /// admitted and not given back, whenever it stops.
    async fn exchange(
        &self,
        checks: &[Check],
        admitted_groups: &mut Vec<Admitted>,
        deadline: Option<Instant>,
    ) -> redis::RedisResult<Verdict> {
        let mut replies: Vec<Option<Decision>> = vec![None; checks.len()];
        let mut admitted = true;
        for members in by_subject(checks, |c| !c.policy.shadow) {
            let reply = self.all(checks, &members, !admitted, deadline).await?;
            for (&i, d) in members.iter().zip(&reply.decisions) {
                replies[i] = Some(*d);
            }
            if admitted && reply.allowed {
                admitted_groups.push(Admitted {
                    members,
                    replies: reply.decisions,
                });
            } else {
                admitted = false;
            }
        }
        if !admitted {
            // Each group leaves the list as it is given back: were the
            // timeout to stop the exchange here, the fail mode gives back
            // only the groups not yet given back (never one twice).
            while !admitted_groups.is_empty() {
                let group = admitted_groups.remove(0);
                // Boxed: rare, and kept out of every request's future.
                if let Err(e) = Box::pin(self.give_back(checks, &group, deadline)).await {
                    tracing::warn!(
                        "librl: could not refund a request another subject refused: {e}"
                    );
                }
            }
        }
        // Shadow policies (docs/http.md, Shadow mode): their own RL.ALL
        // per subject, whatever the enforced ones answered, never PEEK,
        // never given back, refusing nothing.
        let mut shadow_denied = false;
        for members in by_subject(checks, |c| c.policy.shadow) {
            let reply = self.all(checks, &members, false, deadline).await?;
            for (&i, d) in members.iter().zip(&reply.decisions) {
                replies[i] = Some(*d);
            }
            shadow_denied |= !reply.allowed;
        }
        Ok(Verdict {
            admitted,
            replies: replies.into_iter().flatten().collect(),
            shadow_denied,
        })
    }

    /// Gives back what Redis admitted for a request that is refused after
    /// all (docs/http.md, One decision per request: fail closed, or a local
    /// denial): per group, with its own timeout, as [`Backend::give_back`];
    /// a refund that fails is logged.
    pub async fn refund_groups(&self, checks: &[Check], groups: &[Admitted]) {
        if groups.is_empty() {
            return;
        }
        let refunded = self
            .within_timeout(async {
                for group in groups {
                    self.give_back(checks, group, None).await?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = refunded {
            tracing::warn!("librl: could not refund what Redis admitted before it failed: {e}");
        }
    }

    /// Gives back one admitted group: an `RL.ALL` of `REFUND` clauses for
    /// its counting checks, and a `RELEASE` of each lease it took.
    async fn give_back(
        &self,
        checks: &[Check],
        group: &Admitted,
        deadline: Option<Instant>,
    ) -> redis::RedisResult<()> {
        let mut refunds = All::new();
        let mut counting = false;
        for (&i, reply) in group.members.iter().zip(&group.replies) {
            let Some(check) = checks.get(i) else {
                continue;
            };
            if check.policy.is_concurrency() {
                if let Some(id) = reply.lease {
                    self.run(&check.release(id), deadline).await?;
                }
            } else {
                refunds = refunds.clause(refund(check));
                counting = true;
            }
        }
        if counting {
            self.run(&refunds, deadline).await?;
        }
        Ok(())
    }

    /// Gives back each check's cost (one `RL.ALL` of `REFUND` clauses per
    /// subject): `count: failed` / `succeeded` after the response. A
    /// concurrency check has none to give back (its lease is released).
    pub async fn refund(&self, checks: &[&Check]) -> Result<(), Unavailable> {
        self.within_timeout(async {
            let owned: Vec<Check> = checks
                .iter()
                .filter(|c| !c.policy.is_concurrency())
                .map(|c| (*c).clone())
                .collect();
            for members in by_subject(&owned, |_| true) {
                let all: All = members.iter().map(|&i| refund(&owned[i])).collect();
                self.run(&all, None).await?;
            }
            Ok(())
        })
        .await
    }

    /// Sends each `RL.CONCURRENT ... RELEASE`, each with the timeout.
    /// Errors are logged and otherwise ignored: a lease not released ends
    /// by itself.
    pub async fn release(&self, releases: &[Concurrent]) {
        for release in releases {
            if let Err(e) = self.within_timeout(self.run(release, None)).await {
                tracing::debug!("librl: could not release a lease (it ends by itself): {e}");
            }
        }
    }

    async fn within_timeout<T>(
        &self,
        exchange: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Unavailable> {
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Unavailable::Timeout(self.timeout))?
            .map_err(Unavailable::Redis)
    }

    /// One `RL.ALL` of these checks (with `PEEK` when `peek`): to a
    /// standalone server from the policies' premade words when they all
    /// have them, else through librl-client's builder.
    async fn all(
        &self,
        checks: &[Check],
        members: &[usize],
        peek: bool,
        deadline: Option<Instant>,
    ) -> redis::RedisResult<AllDecision> {
        if let Connection::Standalone(standalone) = &self.connection {
            if let Some(words) = premade_len(checks, members) {
                let connection = standalone.get(deadline).await?;
                return connection
                    .all_with(deadline, |out| {
                        write_premade(out, checks, members, words, peek)
                    })
                    .await;
            }
        }
        let all: All = members
            .iter()
            .filter_map(|&i| checks.get(i))
            .map(Check::clause)
            .collect();
        self.run(&if peek { all.peek() } else { all }, deadline)
            .await
    }

    /// Sends one command; on a standalone server it fails once `deadline`
    /// passes (a cluster's is bounded by the caller).
    async fn run<Q: Command>(
        &self,
        command: &Q,
        deadline: Option<Instant>,
    ) -> redis::RedisResult<Q::Output> {
        match &self.connection {
            Connection::Standalone(standalone) => {
                let connection = standalone.get(deadline).await?;
                command.query_async(&mut connection.by(deadline)).await
            }
            Connection::Cluster { client, limiter } => {
                let limiter = match limiter.get() {
                    Some(limiter) => limiter,
                    None => {
                        Box::pin(limiter.get_or_try_init(|| async {
                            redis::RedisResult::Ok(AsyncLimiter::new(
                                client.get_async_connection().await?,
                            ))
                        }))
                        .await?
                    }
                };
                // Boxed: the cluster client's future is several times the
                // size of everything else a request holds.
                Box::pin(limiter.run(command)).await
            }
        }
    }
}

/// A policy's clause words that are the same for every request
/// ([`Premade`](crate::policy::Premade)), as RESP bulk strings: its name,
/// then (after the key) the words up to the override key and those after
/// it, at cost 1; and how many words each part has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClauseWords {
    name: Vec<u8>,
    before_okey: (Vec<u8>, usize),
    after_okey: (Vec<u8>, usize),
}

/// The words [`Check::clause`] writes for `policy` around any key and
/// override key, found by building its clause once with stand-ins for
/// them; None for a concurrency policy (built per request).
pub(crate) fn premade_words(policy: &ValidPolicy) -> Option<ClauseWords> {
    const KEY: &str = "\0key";
    const OKEY: &str = "\0okey";
    if policy.is_concurrency() {
        return None;
    }
    let check = Check {
        policy: Arc::new(policy.clone()),
        subject: Subject::Global,
        key: KEY.into(),
        override_key: policy.overridable.then(|| OKEY.into()),
        cost: Amount::ONE,
    };
    let argv = All::new().clause(check.clause()).prepare().ok()?.argv();
    let (name, key, words) = match argv.as_slice() {
        [_, name, key, words @ ..] => (name, key, words),
        _ => return None,
    };
    if key != KEY.as_bytes() {
        return None;
    }
    let (before, after) = match words.iter().position(|w| w == OKEY.as_bytes()) {
        Some(i) => (words.get(..i)?, words.get(i + 1..)?),
        None => (words, &[][..]),
    };
    let encoded = |words: &[Vec<u8>]| {
        let mut out = Vec::new();
        for word in words {
            bulk(&mut out, word);
        }
        (out, words.len())
    };
    let mut encoded_name = Vec::new();
    bulk(&mut encoded_name, name);
    Some(ClauseWords {
        name: encoded_name,
        before_okey: encoded(before),
        after_okey: encoded(after),
    })
}

/// The number of words of the `RL.ALL` of these checks from their
/// policies' premade words (the command's name and `PEEK` aside); None
/// when one has none, or costs other than 1.
fn premade_len(checks: &[Check], members: &[usize]) -> Option<usize> {
    let mut len = 0;
    for &i in members {
        let check = checks.get(i)?;
        let words = check.policy.premade.words.as_ref()?;
        if check.cost != Amount::ONE || check.override_key.is_some() != check.policy.overridable {
            return None;
        }
        len += 2 + words.before_okey.1 + words.after_okey.1 + usize::from(check.policy.overridable);
    }
    Some(len)
}

/// Writes that `RL.ALL` in RESP: `words` is [`premade_len`]'s count.
fn write_premade(out: &mut Vec<u8>, checks: &[Check], members: &[usize], words: usize, peek: bool) {
    array_header(out, 1 + words + usize::from(peek));
    bulk(out, b"RL.ALL");
    for check in members.iter().filter_map(|&i| checks.get(i)) {
        let Some(premade) = check.policy.premade.words.as_ref() else {
            continue; // never: premade_len has checked
        };
        out.extend_from_slice(&premade.name);
        bulk(out, check.key.as_bytes());
        out.extend_from_slice(&premade.before_okey.0);
        if let Some(okey) = &check.override_key {
            bulk(out, okey.as_bytes());
        }
        out.extend_from_slice(&premade.after_okey.0);
    }
    if peek {
        bulk(out, b"PEEK");
    }
}

/// Indices of the checks `wanted` keeps, per subject, in the order
/// subjects first appear: one subject's keys share a hash tag, so each
/// group is one slot.
fn by_subject(checks: &[Check], wanted: impl Fn(&Check) -> bool) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, check) in checks.iter().enumerate().filter(|(_, c)| wanted(c)) {
        match groups
            .iter_mut()
            .find(|g| checks[g[0]].subject == check.subject)
        {
            Some(group) => group.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

impl Check {
    /// A concurrency policy's `RL.CONCURRENT` call: key, limit, lease and
    /// cost, without `OVERRIDE`.
    pub fn concurrent(&self) -> Concurrent {
        let lease = Duration::from_millis(self.policy.window.ms());
        Concurrent::new(self.key.as_str(), self.policy.limit.get(), lease).cost(self.cost.get())
    }

    /// `RL.CONCURRENT key limit lease RELEASE id`, without the policy's
    /// `OVERRIDE`: a release frees the same slots either way, and naming
    /// one key it never meets `TRYAGAIN` while its slot moves.
    pub fn release(&self, id: LeaseId) -> Concurrent {
        self.concurrent().release(id)
    }

    /// The policy as an `RL.ALL` clause: algorithm, key, limit, window and
    /// options.
    pub fn clause(&self) -> Clause {
        self.clause_with(true)
    }

    /// The clause, with the policy's `BLOCK` and `RESERVE` when `booking`
    /// (a refund gives units back and books nothing).
    fn clause_with(&self, booking: bool) -> Clause {
        let p = &self.policy;
        let (block_ms, queue_ms) = match booking {
            true => (p.block_ms, p.queue_ms),
            false => (None, None),
        };
        let key = self.key.as_str();
        let (limit, window, cost) = (p.limit.get(), p.window.ms(), self.cost.get());
        let window = Duration::from_millis(window);
        let ms = Duration::from_millis;
        let clause: Clause = match p.algorithm {
            ValidAlgorithm::Fixed { aligned } => {
                let mut fixed = Fixed::new(key, limit, window).cost(cost);
                if aligned {
                    fixed = fixed.aligned();
                }
                if let Some(block) = block_ms {
                    fixed = fixed.block(ms(block));
                }
                fixed.into()
            }
            ValidAlgorithm::Sliding | ValidAlgorithm::Approx => {
                let mut sliding = Sliding::new(key, limit, window).cost(cost);
                if p.algorithm == ValidAlgorithm::Approx {
                    sliding = sliding.approx();
                }
                if let Some(block) = block_ms {
                    sliding = sliding.block(ms(block));
                }
                sliding.into()
            }
            ValidAlgorithm::Token { burst } => {
                let mut token = Token::new(key, limit, window).cost(cost);
                if let Some(capacity) = burst {
                    token = token.burst(capacity.get());
                }
                if let Some(block) = block_ms {
                    token = token.block(ms(block));
                }
                // The turn is booked, never awaited in Redis (docs/http.md,
                // Lockouts and queues): the layer sleeps until it comes.
                if let Some(queue) = queue_ms {
                    token = token.reserve(ms(queue));
                }
                token.into()
            }
            ValidAlgorithm::Concurrency => self.concurrent().into(),
        };
        match &self.override_key {
            None => clause,
            Some(okey) => match clause {
                Clause::Fixed(c) => c.override_key(okey).into(),
                Clause::Sliding(c) => c.override_key(okey).into(),
                Clause::Token(c) => c.override_key(okey).into(),
                Clause::Concurrent(c) => c.override_key(okey).into(),
            },
        }
    }
}

/// The check's clause with `REFUND cost` instead of `COST cost`.
fn refund(check: &Check) -> Clause {
    match check.clause_with(false) {
        Clause::Fixed(c) => c.refund(check.cost.get()).into(),
        Clause::Sliding(c) => c.refund(check.cost.get()).into(),
        Clause::Token(c) => c.refund(check.cost.get()).into(),
        // Never sent: a lease is given back by RELEASE, not REFUND
        // (`give_back`); the nearest harmless call is a read.
        Clause::Concurrent(c) => c.cost(0).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn words(clause: Clause) -> Vec<String> {
        let all = All::new().clause(clause);
        let prepared = librl_client::Command::prepare(&all).unwrap();
        prepared.argv()[1..]
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    }

    fn check(policy: Policy, cost: u64, okey: Option<&str>) -> Check {
        Check {
            override_key: okey.map(String::from),
            ..Check::for_test(policy, cost)
        }
    }

    /// The premade path sends exactly what librl-client's builder sends.
    #[test]
    fn premade_all_is_the_builders_all() {
        let secs = Duration::from_secs;
        let policies = [
            Policy::fixed("a", 10, secs(60)).aligned(),
            Policy {
                block: Some(secs(30)),
                ..Policy::approx("b", 5, Duration::from_millis(1500))
            },
            Policy {
                queue: Some(Duration::from_millis(500)),
                ..Policy::token("c", 100, secs(1)).burst(200).overridable()
            },
            Policy::sliding("d", 7, secs(3600)).overridable(),
        ];
        for policy in policies {
            let name = policy.name.clone();
            let okey = policy.overridable.then_some("o");
            let checks = [check(policy.clone(), 1, okey), {
                let mut c = check(policy, 1, okey);
                c.key = "k2".into();
                c
            }];
            for peek in [false, true] {
                let built: All = checks.iter().map(Check::clause).collect();
                let built = if peek { built.peek() } else { built };
                let words = premade_len(&checks, &[0, 1]).expect("premade words");
                let mut premade = Vec::new();
                write_premade(&mut premade, &checks, &[0, 1], words, peek);
                assert_eq!(
                    premade,
                    built.prepare().unwrap().cmd().get_packed_command(),
                    "policy {name}, peek {peek}"
                );
            }
        }
        let costly = check(Policy::fixed("e", 10, secs(60)), 3, None);
        assert!(premade_len(&[costly], &[0]).is_none());
    }

    #[test]
    fn clauses_carry_each_option_once() {
        let secs = Duration::from_secs;
        let fixed = check(Policy::fixed("a", 10, secs(60)).aligned(), 1, None);
        assert_eq!(
            words(fixed.clause()),
            ["FIXED", "k", "10", "60000ms", "ALIGNED"]
        );
        let approx = check(Policy::approx("b", 5, Duration::from_millis(1500)), 3, None);
        assert_eq!(
            words(approx.clause()),
            ["SLIDING", "k", "5", "1500ms", "APPROX", "COST", "3"]
        );
        let token = check(Policy::token("c", 100, secs(1)).burst(200), 1, Some("o"));
        assert_eq!(
            words(token.clause()),
            ["TOKEN", "k", "100", "1000ms", "BURST", "200", "OVERRIDE", "o"]
        );
        assert_eq!(
            words(refund(&token)),
            ["TOKEN", "k", "100", "1000ms", "BURST", "200", "REFUND", "1", "OVERRIDE", "o"]
        );
    }
}
