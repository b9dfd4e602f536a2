//! The Redis side: one connection shared by every request, made on first
//! use (so the app starts while Redis is down) and remade after a loss. A
//! route's checks are one `RL.ALL`: all-or-nothing, one round trip.

use std::fmt;
use std::time::Duration;

use librl_client::{slot, All, AllDecision, AsyncLimiter, Clause, Fixed, Sliding, Token};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use tokio::sync::OnceCell;

use crate::policy::{Check, Decision};

/// A standalone server (through a `ConnectionManager`) or a cluster.
enum Backend {
    Standalone {
        client: redis::Client,
        limiter: OnceCell<AsyncLimiter<ConnectionManager>>,
    },
    Cluster {
        client: Box<ClusterClient>,
        limiter: OnceCell<AsyncLimiter<ClusterConnection>>,
    },
}

pub struct Limiter {
    backend: Backend,
    timeout: Duration,
}

/// Why Redis gave no answer; any of them applies the fail mode.
#[derive(Debug)]
pub enum Unavailable {
    Redis(redis::RedisError),
    Timeout(Duration),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Redis(e) => write!(f, "redis: {e}"),
            Unavailable::Timeout(t) => write!(f, "redis gave no answer within {t:?}"),
        }
    }
}

/// The checks' verdict: admitted or not, and every check's reply in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub admitted: bool,
    pub replies: Vec<Decision>,
}

impl Limiter {
    /// Parses the URL (or, for a cluster, the node URLs); connects on the
    /// first request.
    pub fn new(
        url: &str,
        cluster_nodes: &[String],
        timeout: Duration,
    ) -> redis::RedisResult<Limiter> {
        let backend = if cluster_nodes.is_empty() {
            Backend::Standalone {
                client: redis::Client::open(url)?,
                limiter: OnceCell::new(),
            }
        } else {
            Backend::Cluster {
                client: Box::new(
                    ClusterClient::builder(cluster_nodes.to_vec())
                        .connection_timeout(timeout)
                        .response_timeout(timeout)
                        .build()?,
                ),
                limiter: OnceCell::new(),
            }
        };
        Ok(Limiter { backend, timeout })
    }

    /// Checks every policy in one `RL.ALL`: the request is admitted and
    /// recorded by all, or refused and recorded by none. The whole exchange
    /// has `timeout`.
    ///
    /// In a cluster, one call's keys must share a slot. They do when they
    /// share the subject's hash tag; when a route mixes subjects (an IP
    /// policy and a per-API-key one), the checks go as one `RL.ALL` per
    /// slot, in order, and a refusal by a later one refunds what the earlier
    /// ones recorded (`REFUND`), so the outcome is still all-or-nothing,
    /// though not in one atomic step.
    pub async fn check(&self, checks: &[Check<'_>]) -> Result<Verdict, Unavailable> {
        let exchange = async {
            match &self.backend {
                Backend::Standalone { client, limiter } => {
                    let limiter = limiter
                        .get_or_try_init(|| async {
                            // One attempt per reconnection: a request that
                            // finds Redis gone fails at once, and the next
                            // request tries again.
                            let config = ConnectionManagerConfig::new()
                                .set_number_of_retries(0)
                                .set_connection_timeout(Some(self.timeout))
                                .set_response_timeout(Some(self.timeout));
                            let manager =
                                ConnectionManager::new_with_config(client.clone(), config).await?;
                            redis::RedisResult::Ok(AsyncLimiter::new(manager))
                        })
                        .await?;
                    let all = limiter.run(&all_of(checks.iter())).await?;
                    Ok(verdict(all))
                }
                Backend::Cluster { client, limiter } => {
                    let limiter = limiter
                        .get_or_try_init(|| async {
                            redis::RedisResult::Ok(AsyncLimiter::new(
                                client.get_async_connection().await?,
                            ))
                        })
                        .await?;
                    check_by_slot(limiter, checks).await
                }
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Unavailable::Timeout(self.timeout))?
            .map_err(Unavailable::Redis)
    }
}

fn all_of<'a>(checks: impl Iterator<Item = &'a Check<'a>>) -> All {
    checks.map(Check::clause).collect()
}

fn verdict(all: AllDecision) -> Verdict {
    Verdict {
        admitted: all.allowed,
        replies: all.decisions,
    }
}

/// One `RL.ALL` per slot, in the order the slots first appear; after a
/// refusal, the groups already admitted are refunded and the rest are
/// peeked, so every check has its reply.
async fn check_by_slot(
    limiter: &AsyncLimiter<ClusterConnection>,
    checks: &[Check<'_>],
) -> redis::RedisResult<Verdict> {
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        let s = slot(check.key.as_bytes());
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, members)) => members.push(i),
            None => groups.push((s, vec![i])),
        }
    }
    let mut replies: Vec<Option<Decision>> = vec![None; checks.len()];
    let mut admitted_groups = Vec::new();
    let mut admitted = true;
    for (_, members) in &groups {
        let all = all_of(members.iter().map(|&i| &checks[i]));
        let all = if admitted { all } else { all.peek() };
        let reply = limiter.run(&all).await?;
        for (&i, d) in members.iter().zip(reply.decisions) {
            replies[i] = Some(d);
        }
        if admitted && reply.allowed {
            admitted_groups.push(members);
        } else {
            admitted = false;
        }
    }
    if !admitted {
        for members in admitted_groups {
            let refund: All = members.iter().map(|&i| refund(&checks[i])).collect();
            if let Err(e) = limiter.run(&refund).await {
                tracing::warn!("could not refund a request refused by a later policy: {e}");
            }
        }
    }
    Ok(Verdict {
        admitted,
        replies: replies.into_iter().flatten().collect(),
    })
}

/// The check's clause with `REFUND cost` instead of `COST cost`.
fn refund(check: &Check<'_>) -> Clause {
    match check.clause() {
        Clause::Fixed(c) => Clause::from(Fixed::refund(c, check.cost)),
        Clause::Sliding(c) => Clause::from(Sliding::refund(c, check.cost)),
        Clause::Token(c) => Clause::from(Token::refund(c, check.cost)),
    }
}
