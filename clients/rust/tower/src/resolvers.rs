//! Resolvers (docs/http.md, Resolvers): what only the application's code
//! knows, registered by name on the builder and named in the file as
//! `code:<name>`: a request's cost, its subject's limit and window, the
//! request's mode. Each is a plain closure over the request's parts,
//! called on the request's task before its Redis exchange.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Extensions, HeaderMap, Method, Uri};

/// What a resolver sees of a request: its method, URI, headers and
/// extensions (where an authentication layer put the user or claims).
#[derive(Clone, Copy, Debug)]
pub struct RequestParts<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub extensions: &'a Extensions,
}

/// A limit resolver's answer: the subject's limit and window (for a
/// token policy, the rate per window), and a token policy's burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedLimit {
    pub limit: u64,
    pub window: Duration,
    pub burst: Option<u64>,
}

impl ResolvedLimit {
    pub fn new(limit: u64, window: Duration) -> ResolvedLimit {
        ResolvedLimit {
            limit,
            window,
            burst: None,
        }
    }

    pub fn burst(mut self, burst: u64) -> ResolvedLimit {
        self.burst = Some(burst);
        self
    }
}

/// A mode resolver's answer for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestMode {
    Enforce,
    /// Checked and counted, never refused.
    Shadow,
    /// Not checked: no Redis call, no headers, no hook call.
    Off,
}

/// Gives a request's cost: `Some(1..=2^50)`; anything else (None, 0, more
/// than 2^50) is answered 400 before any check.
pub type CostResolver = dyn Fn(&RequestParts<'_>) -> Option<u64> + Send + Sync;
/// Gives the subject's limit; None: the policy does not apply.
pub type LimitResolver = dyn Fn(&RequestParts<'_>) -> Option<ResolvedLimit> + Send + Sync;
/// Gives the request's mode.
pub type ModeResolver = dyn Fn(&RequestParts<'_>) -> RequestMode + Send + Sync;

/// The resolvers an application registered, by kind and name.
#[derive(Clone, Default)]
pub(crate) struct Resolvers {
    pub cost: HashMap<String, Arc<CostResolver>>,
    pub limit: HashMap<String, Arc<LimitResolver>>,
    pub mode: HashMap<String, Arc<ModeResolver>>,
}

impl fmt::Debug for Resolvers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |m: Vec<&String>| m.into_iter().cloned().collect::<Vec<_>>();
        f.debug_struct("Resolvers")
            .field("cost", &names(self.cost.keys().collect()))
            .field("limit", &names(self.limit.keys().collect()))
            .field("mode", &names(self.mode.keys().collect()))
            .finish()
    }
}

/// A registered resolver held by a validated policy: compared and shown
/// by its name.
pub(crate) struct Named<T: ?Sized> {
    pub name: Arc<str>,
    pub resolve: Arc<T>,
}

impl<T: ?Sized> Clone for Named<T> {
    fn clone(&self) -> Named<T> {
        Named {
            name: self.name.clone(),
            resolve: self.resolve.clone(),
        }
    }
}

impl<T: ?Sized> PartialEq for Named<T> {
    fn eq(&self, other: &Named<T>) -> bool {
        self.name == other.name
    }
}

impl<T: ?Sized> Eq for Named<T> {}

impl<T: ?Sized> fmt::Debug for Named<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code:{}", self.name)
    }
}

impl Resolvers {
    pub(crate) fn named<T: ?Sized>(map: &HashMap<String, Arc<T>>, name: &str) -> Option<Named<T>> {
        map.get(name).map(|resolve| Named {
            name: Arc::from(name),
            resolve: resolve.clone(),
        })
    }
}
