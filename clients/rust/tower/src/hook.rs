//! The decision hook (docs/http.md, Decision hook): one call per checked
//! request with the subject, each policy's decision and the outcome, for
//! logs and metrics. docs/http/rust.md shows a Prometheus counter fed by it.

use std::panic::{catch_unwind, AssertUnwindSafe};

use http::Method;
use librl_client::Decision;

use crate::configuration::Mode;

/// What happened to a checked request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Allowed,
    Denied,
    /// Shadow mode: a denial that let the request pass.
    WouldDeny,
    /// Redis could not answer; the request passed unchecked.
    FailOpen,
    /// Redis could not answer; the request was refused with 503.
    FailClosed,
}

impl Outcome {
    /// The outcome of a decision (Redis's or the local fail mode's): a
    /// denial in shadow mode lets the request pass.
    pub(crate) fn of(admitted: bool, mode: Mode) -> Outcome {
        match (admitted, mode) {
            (true, _) => Outcome::Allowed,
            (false, Mode::Enforce) => Outcome::Denied,
            (false, Mode::Shadow) => Outcome::WouldDeny,
        }
    }

    /// [`Outcome::of`], with the shadow policies' part: a request served
    /// while a shadow policy denied is `WouldDeny` (docs/http.md, Shadow
    /// mode).
    pub(crate) fn decided(admitted: bool, shadow_denied: bool, mode: Mode) -> Outcome {
        match Outcome::of(admitted, mode) {
            Outcome::Allowed if shadow_denied => Outcome::WouldDeny,
            outcome => outcome,
        }
    }

    /// `allowed`, `denied`, `would_deny`, `fail_open`, `fail_closed`: the
    /// contract's names, ready for a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::WouldDeny => "would_deny",
            Outcome::FailOpen => "fail_open",
            Outcome::FailClosed => "fail_closed",
        }
    }
}

/// One policy's part in the decision.
#[derive(Clone, Debug)]
pub struct CheckReport<'a> {
    pub policy: &'a str,
    /// The key's middle part, e.g. `ip:203.0.113.7`.
    pub subject: String,
    pub key: &'a str,
    pub cost: u64,
    /// The module's reply; None when Redis could not answer.
    pub decision: Option<Decision>,
}

/// Everything the hook learns about one checked request.
#[derive(Clone, Debug)]
pub struct DecisionEvent<'a> {
    pub outcome: Outcome,
    /// Decided in this process (the `local` fail mode).
    pub local: bool,
    pub method: &'a Method,
    pub path: &'a str,
    /// The matched route's path; None without routes or for a code-built layer.
    pub route: Option<&'a str>,
    pub checks: Vec<CheckReport<'a>>,
    /// Why Redis could not answer, when it could not.
    pub error: Option<String>,
}

/// Called once per checked request, after the decision and before the
/// handler runs (or the refusal is sent). Closures are hooks too.
pub trait DecisionHook: Send + Sync + 'static {
    fn on_decision(&self, event: &DecisionEvent<'_>);
}

impl<F> DecisionHook for F
where
    F: Fn(&DecisionEvent<'_>) + Send + Sync + 'static,
{
    fn on_decision(&self, event: &DecisionEvent<'_>) {
        self(event)
    }
}

/// Runs the hook; a hook that panics is logged and the request goes on.
pub fn call(hook: &dyn DecisionHook, event: &DecisionEvent<'_>) {
    if catch_unwind(AssertUnwindSafe(|| hook.on_decision(event))).is_err() {
        tracing::error!("librl: the decision hook panicked; the request goes on");
    }
}
