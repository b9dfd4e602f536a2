//! `${VAR}` and `${VAR:-default}` in a configuration file's text, replaced
//! before it is parsed (docs/http.md, Environment variables): `$${` is a
//! literal `${`, a value is not read again, an unset variable without a
//! default (or a `${` that starts no reference) stops the start naming
//! it. A `Config` built in code is never substituted.

use crate::configuration::ConfigError;

const MALFORMED: &str = "not a ${VAR} or ${VAR:-default} reference";

/// `text` with each reference replaced from `env`; `${NAME:-default}`
/// takes the default when NAME is unset or empty.
pub(crate) fn substitute(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(body) = tail.strip_prefix("${") else {
            out.push('$');
            rest = &tail[1..];
            continue;
        };
        let Some(close) = body.find('}') else {
            let line = tail.split('\n').next().unwrap_or(tail);
            return Err(ConfigError::new(line, MALFORMED));
        };
        let inner = &body[..close];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_name(name) {
            return Err(ConfigError::new(format!("${{{inner}}}"), MALFORMED));
        }
        let value = env(name).filter(|v| default.is_none() || !v.is_empty());
        match (value, default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(ConfigError::new(format!("${{{name}}}"), "not set")),
        }
        rest = &body[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A shell variable's name: a letter or `_`, then letters, digits, `_`.
fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "APP_LIMIT" => Some("50".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn sub(text: &str) -> Result<String, String> {
        substitute(text, env).map_err(|e| e.to_string())
    }

    #[test]
    fn references_defaults_and_literals() {
        assert_eq!(sub("limit: ${APP_LIMIT}").unwrap(), "limit: 50");
        assert_eq!(sub("w: ${APP_WINDOW:-1m}").unwrap(), "w: 1m");
        assert_eq!(sub("w: ${EMPTY:-2s}").unwrap(), "w: 2s");
        assert_eq!(sub("p: ${EMPTY}").unwrap(), "p: ");
        assert_eq!(
            sub("a: $${APP_LIMIT} $5 $").unwrap(),
            "a: ${APP_LIMIT} $5 $"
        );
        // A value is not read again.
        let once = substitute("${A}", |_| Some("${B}".into())).unwrap();
        assert_eq!(once, "${B}");
    }

    #[test]
    fn an_unset_variable_or_a_bad_reference_is_named() {
        assert_eq!(
            sub("limit: ${APP_RATE}").unwrap_err(),
            "librl: configuration: ${APP_RATE}: not set"
        );
        assert_eq!(
            sub("limit: ${1X}").unwrap_err(),
            "librl: configuration: ${1X}: not a ${VAR} or ${VAR:-default} reference"
        );
        assert_eq!(
            sub("limit: ${APP\nx: 1").unwrap_err(),
            "librl: configuration: ${APP: not a ${VAR} or ${VAR:-default} reference"
        );
    }
}
