package nethttp

import (
	"net/http"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// Fail modes (docs/http.md, Fail modes): when Redis cannot answer within
// the timeout, fail: open passes the request without headers, fail:
// closed refuses it (fail_deny) and fail: local decides it in the process
// (local.go); the refunds that keep a refused request uncounted are the
// exchange's (decide.go).

// failed is the outcome the fail mode gives a request Redis did not
// answer for, logging it at most once every 10 seconds.
func (m *engine) failed(err error) Outcome {
	if m.c.failClosed {
		m.warnOnce("librl: Redis did not answer (" + err.Error() + "); refusing requests (fail: closed)")
		return FailClosed
	}
	m.warnOnce("librl: Redis did not answer (" + err.Error() + "); passing requests unlimited (fail: open)")
	return FailOpen
}

// warnOnce logs at most once every 10 seconds.
func (m *engine) warnOnce(msg string) {
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if now-last < int64(10*time.Second) || !m.lastWarn.CompareAndSwap(last, now) {
		return
	}
	m.log.Warn(msg)
}

// decideLocally is fail: local: the enforced checks in one all-or-nothing
// call of the local limiter, the shadow ones in another, then the
// outcome as Redis's decisions would give it. cause is why Redis could
// not answer; a check the local limiter cannot take (it is never given
// one) falls back to fail: open.
func (m *engine) decideLocally(r *http.Request, route string, checks []check, deny *refusal, cause error) decided {
	m.warnOnce("librl: Redis did not answer (" + cause.Error() + "); deciding in the process (fail: local)")
	v := verdict{decisions: make([]librl.Decision, len(checks))}
	for _, shadow := range []bool{false, true} {
		var at []int
		var clauses []localClause
		for i, c := range checks {
			if c.p.shadow == shadow {
				at = append(at, i)
				clauses = append(clauses, localClauseOf(c))
			}
		}
		if len(at) == 0 {
			continue
		}
		all, err := m.local.check(clauses, false)
		if err != nil {
			m.log.Warn("librl: the local limiter refused a check; passing the request", "error", err)
			d := decided{outcome: FailOpen}
			m.emit(r, route, d.outcome, checks, nil, cause, false)
			return d
		}
		for j, i := range at {
			v.decisions[i] = all.Decisions[j]
			if c := checks[i]; shadow && all.Decisions[j].LeaseID != 0 {
				c.leaseID = all.Decisions[j].LeaseID
				v.shadowLeases = append(v.shadowLeases, c)
			}
		}
	}
	return m.verdictOf(r, route, checks, deny, v, true)
}

// releaseLocally gives back the local limiter's leases the checks hold.
func (m *engine) releaseLocally(checks []check) {
	for _, c := range checks {
		if c.p.algorithm == "concurrency" && c.leaseID != 0 {
			m.local.release(localClauseOf(c), c.leaseID)
		}
	}
}
