//! Which policies apply to a request (docs/http.md, Routes): the route
//! whose canonical path is the longest whole-segment prefix of the
//! request's canonical path, among those whose methods include the
//! request's; without routes, every policy.

use std::sync::Arc;

use http::Method;

use crate::configuration::{Deny, Route};
use crate::policy::ValidPolicy;
use crate::refusals::Refusing;

/// docs/http.md, The canonical path: an absolute-form target's scheme and
/// authority dropped, the query and any fragment dropped, percent-escapes
/// decoded until none is left, `;` parameters, empty and `.` segments
/// dropped, `..` applied (never above the root), no trailing slash. Bytes
/// in, bytes out: what is not UTF-8 after decoding is compared as bytes.
pub fn canonical_path(path: &[u8]) -> Vec<u8> {
    let path = path_of_absolute_form(path);
    let path = path
        .split(|&b| b == b'?' || b == b'#')
        .next()
        .unwrap_or_default();
    let decoded = percent_decode_fully(path);
    let mut segments: Vec<&[u8]> = Vec::new();
    for segment in decoded.split(|&b| b == b'/') {
        let segment = segment.split(|&b| b == b';').next().unwrap_or_default();
        match segment {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut out = Vec::with_capacity(decoded.len() + 1);
    for segment in &segments {
        out.push(b'/');
        out.extend_from_slice(segment);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// A path [`canonical_path`] gives back unchanged, already lower case (as
/// most requests' are): `/`, or `/`-led segments, none empty, `.` or
/// `..`, of printable ASCII with no capital, `%`, `;`, `?` or `#`. Such a
/// path is matched as it is, with nothing decoded or copied.
fn canonical_lowercase(path: &[u8]) -> bool {
    let Some(rest) = path.strip_prefix(b"/") else {
        return false;
    };
    rest.is_empty()
        || rest.split(|&b| b == b'/').all(|segment| {
            !matches!(segment, b"" | b"." | b"..")
                && segment.iter().all(|&b| {
                    b.is_ascii_graphic()
                        && !b.is_ascii_uppercase()
                        && !matches!(b, b'%' | b';' | b'?' | b'#')
                })
        })
}

/// An absolute-form target's path and query (`http://host/a?b` gives
/// `/a?b`, `http://host` nothing); any other target as it is. A scheme is
/// a letter, then letters, digits, `+`, `-` or `.`, then `://`.
fn path_of_absolute_form(path: &[u8]) -> &[u8] {
    let scheme = path
        .iter()
        .enumerate()
        .take_while(|&(i, &b)| {
            b.is_ascii_alphabetic() || (i > 0 && (b.is_ascii_digit() || b"+-.".contains(&b)))
        })
        .count();
    let authority = match path.get(scheme..).and_then(|r| r.strip_prefix(b"://")) {
        Some(authority) if scheme > 0 => authority,
        _ => return path,
    };
    let end = authority
        .iter()
        .position(|b| b"/?#".contains(b))
        .unwrap_or(authority.len());
    authority.get(end..).unwrap_or_default()
}

/// Percent-decoded until no `%XX` is left, in one pass: each byte is
/// pushed, and while the output ends in an escape it is decoded in place
/// (a decoded byte may end another: `%%32F` is `/`). Escapes never
/// overlap, so this gives what decoding the whole path again and again
/// gives, in linear time whatever the nesting (`%25252...`).
fn percent_decode_fully(path: &[u8]) -> Vec<u8> {
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut out = Vec::with_capacity(path.len());
    for &b in path {
        out.push(b);
        while let [.., b'%', high, low] = out[..] {
            let (Some(high), Some(low)) = (hex(high), hex(low)) else {
                break;
            };
            out.truncate(out.len() - 3);
            out.push((high << 4) | low);
        }
    }
    out
}

/// Policies and the routes that select among them, ready for requests.
#[derive(Debug)]
pub(crate) struct PolicySet {
    policies: Vec<Arc<ValidPolicy>>,
    /// Empty: every policy applies to every request.
    routes: Vec<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    /// As configured, for the decision hook.
    path: String,
    /// Canonical, ASCII lower case: what requests are compared with.
    canonical: Vec<u8>,
    methods: Option<Vec<Method>>,
    policies: Vec<Arc<ValidPolicy>>,
    /// The route's `deny` over the top-level one.
    deny: Option<Arc<Refusing>>,
}

/// The policies a request gets, in check order, and the route (its index
/// in the configuration and its path) that chose them.
pub(crate) struct Selection<'s> {
    pub route: Option<(usize, &'s str)>,
    pub policies: &'s [Arc<ValidPolicy>],
    /// The route's own refusal; None: the top-level `deny`.
    pub deny: Option<&'s Arc<Refusing>>,
}

impl PolicySet {
    /// `routes` name policies by name; a name that is not in `policies`
    /// selects nothing (configurations are validated before this).
    pub(crate) fn new(policies: Vec<ValidPolicy>, routes: &[Route], deny: &Deny) -> PolicySet {
        let policies: Vec<Arc<ValidPolicy>> = policies.into_iter().map(Arc::new).collect();
        let routes = routes
            .iter()
            .map(|r| Compiled {
                path: r.path.clone(),
                canonical: canonical_path(r.path.as_bytes()).to_ascii_lowercase(),
                methods: r.methods.clone(),
                policies: r
                    .policies
                    .iter()
                    .filter_map(|name| policies.iter().find(|p| &p.name == name).cloned())
                    .collect(),
                deny: r
                    .deny
                    .as_ref()
                    .map(|d| Arc::new(Refusing::new(&deny.merged(d)))),
            })
            .collect();
        PolicySet { policies, routes }
    }

    /// None when routes exist and none matches: the request is not checked.
    /// `path` is the path as the framework hands it, raw or decoded.
    pub(crate) fn select(&self, method: &Method, path: &[u8]) -> Option<Selection<'_>> {
        if self.routes.is_empty() {
            return Some(Selection {
                route: None,
                policies: &self.policies,
                deny: None,
            });
        }
        let lowered;
        let path = match canonical_lowercase(path) {
            true => path,
            false => {
                lowered = canonical_path(path).to_ascii_lowercase();
                &lowered
            }
        };
        let mut best: Option<(usize, &Compiled)> = None;
        for (i, route) in self.routes.iter().enumerate() {
            let method_ok = route.methods.as_ref().is_none_or(|m| m.contains(method));
            // Strictly longer only: among equally long matches the first wins.
            if method_ok
                && under(&route.canonical, path)
                && best.is_none_or(|(_, b)| route.canonical.len() > b.canonical.len())
            {
                best = Some((i, route));
            }
        }
        best.map(|(i, route)| Selection {
            route: Some((i, &route.path)),
            policies: &route.policies,
            deny: route.deny.as_ref(),
        })
    }
}

/// `/upload` covers `/upload` and `/upload/x`, never `/uploads`; `/`
/// covers everything. Both paths are canonical.
fn under(route: &[u8], path: &[u8]) -> bool {
    route == b"/"
        || path
            .strip_prefix(route)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The rule's vectors are conformance/vectors/paths.json and routes.json
    // (vectors.rs). This one is about cost: a path escaped 200,000 times
    // over decodes in one pass, not in 200,000 (a request must not buy
    // quadratic work with a long target).
    #[test]
    fn deeply_nested_escapes_decode_in_linear_time() {
        let nested = format!("/%{}41/x", "25".repeat(200_000));
        assert_eq!(canonical_path(nested.as_bytes()), b"/A/x");
    }

    /// Every path of up to five bytes from an alphabet of the bytes that
    /// matter: one taken as it is would be matched exactly as its
    /// canonical, lower-case form.
    #[test]
    fn a_path_taken_as_it_is_is_its_canonical_form() {
        let alphabet = b"/.aA%2f;?# \x80";
        let mut paths: Vec<Vec<u8>> = vec![Vec::new()];
        let mut taken = 0;
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = paths
                .iter()
                .filter(|p| p.len() == paths.last().map_or(0, Vec::len))
                .flat_map(|p| {
                    alphabet.iter().map(move |&b| {
                        let mut q = p.clone();
                        q.push(b);
                        q
                    })
                })
                .collect();
            paths.extend(longer);
        }
        for path in &paths {
            if canonical_lowercase(path) {
                taken += 1;
                assert_eq!(canonical_path(path).to_ascii_lowercase(), *path, "{path:?}");
            }
        }
        assert!(canonical_lowercase(b"/"));
        assert!(canonical_lowercase(b"/half"));
        assert!(canonical_lowercase(b"/api/v1/items-2.json"));
        assert!(taken > 100, "{taken}");
    }
}
