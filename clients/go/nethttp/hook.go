package nethttp

import (
	"net/http"

	librl "github.com/librl/librl/clients/go"
)

// The decision hook (docs/http.md, Decision hook): one call per checked
// request with each policy's decision and the outcome, for logs and
// metrics.

// Outcome is what happened to a checked request.
type Outcome string

const (
	Allowed    Outcome = "allowed"     // every policy admitted it
	Denied     Outcome = "denied"      // a policy refused it
	WouldDeny  Outcome = "would_deny"  // a policy would have refused it; shadow mode let it pass
	FailOpen   Outcome = "fail_open"   // Redis did not answer in time; passed
	FailClosed Outcome = "fail_closed" // Redis did not answer in time; 503
)

// DecisionEvent is the decision hook's argument, once per checked request.
type DecisionEvent struct {
	Outcome Outcome
	Local   bool // decided in the process (fail: local, while Redis cannot answer)
	Method  string
	Path    string
	Route   string // the matched route's path as configured, "" when none
	Checks  []CheckReport
	Err     error // why Redis could not answer (FailOpen, FailClosed)
}

// CheckReport is one checked policy as the hook sees it.
type CheckReport struct {
	Policy   string
	Subject  string // the key's middle part: ip:203.0.113.9, user:alice, api-key:<32 hex>, global
	Key      string
	Cost     int64
	Decision *librl.Decision // nil when Redis could not answer
}

// Event is DecisionEvent's earlier name.
//
// Deprecated: use DecisionEvent, the name every librl integration uses.
type Event = DecisionEvent

// Check is CheckReport's earlier name.
//
// Deprecated: use CheckReport, the name every librl integration uses.
type Check = CheckReport

// OnDecision sets the decision hook: called once per checked request,
// after the decision and before the handler runs or the refusal is sent. A
// panic in it is logged and ignored.
func OnDecision(hook func(DecisionEvent)) Option { return func(m *Middleware) { m.hook = hook } }

// emit calls the hook, if any; a hook that panics is logged and the
// request goes on.
func (m *engine) emit(r *http.Request, route string, outcome Outcome, checks []check, decisions []librl.Decision, err error, local bool) {
	if m.hook == nil {
		return
	}
	ev := DecisionEvent{Outcome: outcome, Local: local, Method: r.Method, Path: r.URL.Path, Route: route, Err: err,
		Checks: make([]CheckReport, len(checks))}
	for i, c := range checks {
		ev.Checks[i] = CheckReport{Policy: c.p.name, Subject: c.s.tag, Key: c.key, Cost: c.cost}
		if decisions != nil {
			d := decisions[i]
			ev.Checks[i].Decision = &d
		}
	}
	defer func() {
		if p := recover(); p != nil {
			m.log.Warn("librl: the decision hook panicked; the request goes on", "panic", p)
		}
	}()
	m.hook(ev)
}
