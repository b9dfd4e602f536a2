//! The Redis side: one connection shared by every request, made on first
//! use (so the app starts while Redis is down) and remade after a loss.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::policy::{Check, Reply};

pub struct Limiter {
    client: redis::Client,
    manager: OnceCell<ConnectionManager>,
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

impl Limiter {
    /// Parses the URL; connects on the first request.
    pub fn new(url: &str, timeout: Duration) -> redis::RedisResult<Limiter> {
        Ok(Limiter {
            client: redis::Client::open(url)?,
            manager: OnceCell::new(),
            timeout,
        })
    }

    /// Runs the checks in order, one RL.* call each, and stops at the first
    /// denial: its reply is the last one returned. Policies checked before
    /// it have counted the request; with `RL.ALL` (one call whose clauses
    /// are each check's `clause()`) nothing would be, and a denial would
    /// come with every clause's reply. The whole exchange has `timeout`.
    pub async fn check(&self, checks: &[Check<'_>]) -> Result<Vec<Reply>, Unavailable> {
        let exchange = async {
            let mut con = self.connection().await?;
            let mut replies = Vec::with_capacity(checks.len());
            for check in checks {
                let reply: Reply = check.command().query_async(&mut con).await?;
                replies.push(reply);
                if !reply.allowed {
                    break;
                }
            }
            Ok(replies)
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Unavailable::Timeout(self.timeout))?
            .map_err(Unavailable::Redis)
    }

    async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        self.manager
            .get_or_try_init(|| {
                // One attempt per reconnection: a request that finds Redis
                // gone fails at once, and the next request tries again.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(0)
                    .set_connection_timeout(self.timeout)
                    .set_response_timeout(self.timeout);
                ConnectionManager::new_with_config(self.client.clone(), config)
            })
            .await
            .cloned()
    }
}
