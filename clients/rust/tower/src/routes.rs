//! Which policies apply to a request (docs/http.md, Routes): the route
//! whose path is the longest whole-segment prefix of the request's path,
//! among those whose methods include the request's; without routes, every
//! policy.

use std::sync::Arc;

use http::Method;

use crate::configuration::Route;
use crate::policy::Policy;

/// Policies and the routes that select among them, ready for requests.
#[derive(Debug)]
pub struct PolicySet {
    policies: Vec<Arc<Policy>>,
    /// Empty: every policy applies to every request.
    routes: Vec<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    path: String,
    methods: Option<Vec<Method>>,
    policies: Vec<Arc<Policy>>,
}

/// The policies a request gets, in check order, and the route that chose them.
pub struct Selection<'s> {
    pub route: Option<&'s str>,
    pub policies: &'s [Arc<Policy>],
}

impl PolicySet {
    /// `routes` name policies by name; a name that is not in `policies`
    /// selects nothing (configurations are validated before this).
    pub fn new(policies: Vec<Policy>, routes: &[Route]) -> PolicySet {
        let policies: Vec<Arc<Policy>> = policies.into_iter().map(Arc::new).collect();
        let routes = routes
            .iter()
            .map(|r| Compiled {
                path: r.path.clone(),
                methods: r.methods.clone(),
                policies: r
                    .policies
                    .iter()
                    .filter_map(|name| policies.iter().find(|p| &p.name == name).cloned())
                    .collect(),
            })
            .collect();
        PolicySet { policies, routes }
    }

    /// None when routes exist and none matches: the request is not checked.
    pub fn select(&self, method: &Method, path: &str) -> Option<Selection<'_>> {
        if self.routes.is_empty() {
            return Some(Selection {
                route: None,
                policies: &self.policies,
            });
        }
        let mut best: Option<&Compiled> = None;
        for route in &self.routes {
            let method_ok = route.methods.as_ref().is_none_or(|m| m.contains(method));
            // Strictly longer only: among equally long matches the first wins.
            if method_ok
                && segment_prefix(&route.path, path)
                && best.is_none_or(|b| route.path.len() > b.path.len())
            {
                best = Some(route);
            }
        }
        best.map(|route| Selection {
            route: Some(&route.path),
            policies: &route.policies,
        })
    }
}

/// `/upload` covers `/upload` and `/upload/x`, never `/uploads`; `/` and a
/// prefix ending in `/` cover everything under them.
fn segment_prefix(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A route as (path, methods, policy names).
    type RouteRow<'a> = (&'a str, Option<&'a [Method]>, &'a [&'a str]);

    fn set(routes: &[RouteRow<'_>]) -> PolicySet {
        let policies = ["a", "b", "c"]
            .iter()
            .map(|n| Policy::fixed(n, 1, Duration::from_secs(1)))
            .collect();
        let routes: Vec<Route> = routes
            .iter()
            .map(|(path, methods, names)| Route {
                path: path.to_string(),
                methods: methods.map(|m| m.to_vec()),
                policies: names.iter().map(|n| n.to_string()).collect(),
            })
            .collect();
        PolicySet::new(policies, &routes)
    }

    fn names(set: &PolicySet, method: Method, path: &str) -> Option<Vec<String>> {
        set.select(&method, path)
            .map(|s| s.policies.iter().map(|p| p.name.clone()).collect())
    }

    #[test]
    fn longest_whole_segment_prefix_wins() {
        let s = set(&[
            ("/api", None, &["a"]),
            ("/api/admin", None, &["b"]),
            ("/", None, &[]),
        ]);
        assert_eq!(names(&s, Method::GET, "/api/admin/x").unwrap(), ["b"]);
        assert_eq!(names(&s, Method::GET, "/api/adminx").unwrap(), ["a"]);
        assert_eq!(names(&s, Method::GET, "/api").unwrap(), ["a"]);
        assert_eq!(
            names(&s, Method::GET, "/apis").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn methods_filter_before_length() {
        let post: &[Method] = &[Method::POST];
        let s = set(&[("/upload", Some(post), &["a"]), ("/", None, &["b"])]);
        assert_eq!(names(&s, Method::POST, "/upload").unwrap(), ["a"]);
        assert_eq!(names(&s, Method::GET, "/upload").unwrap(), ["b"]);
        let only = set(&[("/api", None, &["a"])]);
        assert_eq!(names(&only, Method::GET, "/"), None);
    }

    #[test]
    fn no_routes_selects_every_policy() {
        assert_eq!(
            names(&set(&[]), Method::PATCH, "/x").unwrap(),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn equally_long_first_listed_wins() {
        let s = set(&[("/x", None, &["a"]), ("/x", None, &["b"])]);
        assert_eq!(names(&s, Method::GET, "/x").unwrap(), ["a"]);
    }
}
