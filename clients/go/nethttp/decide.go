package nethttp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
)

// Decide (docs/http.md, One decision per request, steps 2 and 3): the
// checks grouped by subject, one RL.ALL per group, PEEK after a denial,
// refunds so that a refused request is counted by no policy, all within
// the timeout; then the fail mode, shadow mode and the hook settle the
// outcome and the refusal, if any.

// decided is one request's decision and what to answer.
type decided struct {
	outcome   Outcome
	decisions []librl.Decision // one per check; nil when Redis did not answer
	replied   []checked        // the same, beside each check's policy
	refusal   reply            // sent instead of calling the handler, when its status is set
	// shadowLeases: the leases shadow policies took, released when the
	// response is finished whatever the outcome.
	shadowLeases []check
	// local: decided by the local limiter (fail: local), whose leases are
	// its own and which refunds nothing.
	local bool
}

// decide asks Redis, applies the fail mode and shadow mode, calls the hook
// and picks the refusal (deny's, for a denial).
func (m *engine) decide(r *http.Request, route string, checks []check, deny *refusal) decided {
	var v verdict
	err := errBreakerOpen
	if ask, probe := m.breaker.admit(); ask {
		v, err = m.exchange(checks)
		m.breaker.after(err, probe)
	}
	if err != nil {
		if m.local != nil {
			return m.decideLocally(r, route, checks, deny, err)
		}
		return m.failure(r, route, checks, err)
	}
	return m.verdictOf(r, route, checks, deny, v, false)
}

// verdictOf is the outcome, refusal and hook call of the checks' decisions
// (Redis's, or the local limiter's).
func (m *engine) verdictOf(r *http.Request, route string, checks []check, deny *refusal, v verdict, local bool) decided {
	d := decided{decisions: v.decisions, replied: pairs(checks, v.decisions), shadowLeases: v.shadowLeases, local: local}
	d.outcome = outcomeOf(m.c, d.replied)
	switch d.outcome {
	case Denied:
		worst := mostRestrictive(d.replied, true)
		d.refusal = denied(deny, d.replied[worst], checks[worst].cost)
	case WouldDeny:
		m.log.Warn("librl: shadow: the request would be refused", "method", r.Method, "path", r.URL.Path,
			"policy", checks[mostRestrictive(d.replied, false)].p.name)
	}
	m.emit(r, route, d.outcome, checks, d.decisions, nil, local)
	return d
}

// failure is the fail mode's decision for a request Redis could not
// decide, err saying why.
func (m *engine) failure(r *http.Request, route string, checks []check, err error) decided {
	d := decided{outcome: m.failed(err)}
	if d.outcome == FailClosed {
		d.refusal = unavailable(m.c.failDeny)
	}
	m.emit(r, route, d.outcome, checks, nil, err, false)
	return d
}

// outcomeOf is a request's outcome from its policies' replies
// (docs/http.md, Shadow mode): denied when an enforced policy denies,
// would_deny when mode: shadow would have refused it or only policies of
// their own mode: shadow deny, else allowed.
func outcomeOf(c *config, cs []checked) Outcome {
	enforced, shadow := false, false
	for _, x := range cs {
		if !x.d.Allowed {
			enforced = enforced || !x.p.shadow
			shadow = shadow || x.p.shadow
		}
	}
	switch {
	case enforced && !c.shadow:
		return Denied
	case enforced || shadow:
		return WouldDeny
	}
	return Allowed
}

// pairs is each check's policy with its reply.
func pairs(checks []check, decisions []librl.Decision) []checked {
	cs := make([]checked, len(checks))
	for i := range checks {
		cs[i] = checked{p: checks[i].p, d: decisions[i]}
	}
	return cs
}

// clause is a check as an RL.ALL clause, consuming or giving back its cost
// (never a concurrency check's refund: that is its lease's release).
// The options fixed by the configuration are the policy's, built at
// start-up; a request adds its cost (unless fixed) and override key.
func clause(c check, refund bool) librl.Clause {
	p := c.p
	if !refund && p.ready {
		// Prepared at start-up: only the request's own options are added.
		switch {
		case p.cost != costUnits && c.okey != "":
			return p.prepared.For(c.key, librl.Cost(c.cost), librl.Override(c.okey))
		case p.cost != costUnits:
			return p.prepared.For(c.key, librl.Cost(c.cost))
		case c.okey != "":
			return p.prepared.For(c.key, librl.Override(c.okey))
		}
		return p.prepared.For(c.key)
	}
	opts := p.opts
	if refund {
		opts = append(p.refundOpts[:len(p.refundOpts):len(p.refundOpts)], librl.Refund(c.cost))
	} else if p.cost != costUnits {
		opts = append(opts[:len(opts):len(opts)], librl.Cost(c.cost))
	}
	if c.okey != "" {
		opts = append(opts[:len(opts):len(opts)], librl.Override(c.okey))
	}
	return clauseOf(p, c.key, opts)
}

// clauseOf is the policy's clause for key with opts.
func clauseOf(p *policy, key string, opts []librl.Option) librl.Clause {
	switch p.algorithm {
	case "fixed":
		return librl.Fixed(key, p.limit, p.window, opts...)
	case "sliding", "approx":
		return librl.Sliding(key, p.limit, p.window, opts...)
	case "concurrency":
		return librl.Concurrent(key, p.limit, p.lease, opts...)
	default:
		return librl.Token(key, p.limit, p.window, opts...)
	}
}

// groups are the checks' indexes by subject, in the order subjects first
// appear: the enforced policies' groups, then the shadow policies'
// (docs/http.md, One decision per request, step 4).
// A request has a few checks: a scan beats a map.
func groups(checks []check) [][]int {
	if len(checks) == 1 {
		return oneCheck
	}
	var out [][]int
	for _, shadow := range []bool{false, true} {
		first := len(out)
	next:
		for i, c := range checks {
			if c.p.shadow != shadow {
				continue
			}
			for g := first; g < len(out); g++ {
				if checks[out[g][0]].s.tag == c.s.tag {
					out[g] = append(out[g], i)
					continue next
				}
			}
			out = append(out, []int{i})
		}
	}
	return out
}

// oneCheck is the groups of a single check (read only).
var oneCheck = [][]int{{0}}

var errTimeout = errors.New("no answer within the configured timeout")

// verdict is what Redis answered for a request's checks.
type verdict struct {
	admitted     bool // by every enforced policy
	decisions    []librl.Decision
	shadowLeases []check
}

// ledger holds the groups Redis admitted for one request while their fate
// is open: a request that is served stays counted, a request that is
// refused is counted by no policy (docs/http.md, One decision per
// request). Each group is refunded at most once, by whoever takes it.
type ledger struct {
	mu       sync.Mutex
	admitted [][]check
	// gone: the request went on without the exchange (the timeout passed).
	gone bool
	// result: every group answered; the verdict stands even if the denial's
	// refunds are still under way when the timeout passes.
	result *verdict
}

func (l *ledger) take() [][]check {
	gs := l.admitted
	l.admitted = nil
	return gs
}

// exchange runs the checks within the timeout: on the request's own
// goroutine when the client stops a call at its context's deadline and
// nothing must outlive the timeout (fail: open, no leases), else on one of
// its own.
func (m *engine) exchange(checks []check) (verdict, error) {
	if !m.deadlines || m.c.failClosed || holdsLeases(checks) {
		return m.detached(checks)
	}
	return m.inline(checks)
}

// honoursDeadlines: the go-redis client ends a call at its context's
// deadline (Options.ContextTimeoutEnabled); without it, go-redis waits for
// its own ReadTimeout.
func honoursDeadlines(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// holdsLeases: a check takes a concurrency lease, which a request served
// by fail: open must give back even when its reply comes after the
// timeout.
func holdsLeases(checks []check) bool {
	for _, c := range checks {
		if c.p.algorithm == "concurrency" {
			return true
		}
	}
	return false
}

// inline runs the exchange on the request's goroutine, its deadline the
// timeout (go-redis then bounds the connection's wait and its reads and
// writes by it). It serves fail: open without leases: a group Redis
// admits after the timeout passed stays counted, as the request was
// served, and the groups after it are not sent; so nothing needs to watch
// the exchange past the timeout.
func (m *engine) inline(checks []check) (verdict, error) {
	if m.timed != nil && len(checks) == 1 {
		// One call, whose deadline the pipelined connection keeps: no
		// context or timer of the request's own.
		v, err := m.runGroups(context.Background(), m.timed, checks, nil)
		if errors.Is(err, context.DeadlineExceeded) {
			err = errTimeout
		}
		return v, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.c.timeout)
	defer cancel()
	// One group has nothing admitted before a denial to refund: no
	// ledger to keep.
	var l *ledger
	if len(checks) > 1 {
		l = &ledger{}
	}
	v, err := m.runGroups(ctx, m.lim, checks, l)
	if err != nil {
		if ctx.Err() != nil {
			err = errTimeout
		}
		return verdict{}, err
	}
	if !v.admitted && l != nil {
		// A denial refunds the groups admitted before it (several
		// subjects only); the refunds go on past the timeout if they must.
		m.refundWithin(l.take())
	}
	return v, nil
}

// detached runs the exchange on a goroutine of its own, waiting at most
// the timeout. Past it the exchange goes on in the background; what it
// admits stays counted under fail: open (the request was served; its
// leases are released) and is refunded under fail: closed (it was
// refused). On an error or the timeout with fail: closed, the groups
// admitted so far are refunded before this returns, so before the 503.
func (m *engine) detached(checks []check) (verdict, error) {
	type result struct {
		v   verdict
		err error
	}
	l := &ledger{}
	done := make(chan result, 1)
	go func() {
		v, err := m.runGroups(context.Background(), m.lim, checks, l)
		var back [][]check
		l.mu.Lock()
		if err == nil {
			l.result = &v
		}
		// Past the timeout the fail mode decided the request; before it, a
		// denial does (an error is the caller's to settle).
		if (l.gone && m.c.failClosed) || (!l.gone && err == nil && !v.admitted) {
			back = l.take()
		}
		// Served by fail: open (past the timeout, or after an error): its
		// counts stay, but it holds no slots, so the leases it took go now.
		var leases [][]check
		if !m.c.failClosed && (l.gone || err != nil) {
			leases = l.take()
		}
		l.mu.Unlock()
		m.refundGroups(back)
		m.releaseGroups(leases)
		done <- result{v, err}
	}()
	timer := time.NewTimer(m.c.timeout)
	defer timer.Stop()
	var err error
	select {
	case r := <-done:
		if r.err == nil {
			return r.v, nil
		}
		err = r.err
	case <-timer.C:
		l.mu.Lock()
		l.gone = true
		if l.result != nil {
			v := *l.result
			l.mu.Unlock()
			return v, nil
		}
		l.mu.Unlock()
		err = errTimeout
	}
	if m.c.failClosed {
		l.mu.Lock()
		back := l.take()
		l.mu.Unlock()
		m.refundWithin(back)
	}
	return verdict{}, err
}

// runGroups sends one RL.ALL per subject; after a denial the later groups
// are peeked. Each admitted group goes to the ledger as soon as Redis
// admits it; l is nil when no one will ever refund them. lim is the
// Limiter they go through.
func (m *engine) runGroups(ctx context.Context, lim *librl.Limiter, checks []check, l *ledger) (verdict, error) {
	v := verdict{admitted: true}
	gs := groups(checks)
	if len(gs) > 1 {
		v.decisions = make([]librl.Decision, len(checks))
	}
	// A group's clauses on the stack: All keeps none of them.
	var room [4]librl.Clause
	for _, g := range gs {
		clauses := room[:0]
		for _, i := range g {
			clauses = append(clauses, clause(checks[i], false))
		}
		shadow := checks[g[0]].p.shadow
		var a librl.AllDecision
		var err error
		if v.admitted || shadow {
			a, err = lim.All(ctx, clauses...)
		} else {
			a, err = lim.PeekAll(ctx, clauses...)
		}
		if err != nil {
			return verdict{}, err
		}
		if len(gs) == 1 {
			v.decisions = a.Decisions // one group: in the checks' order
		} else {
			for j, i := range g {
				v.decisions[i] = a.Decisions[j]
			}
		}
		if shadow {
			// Counted whatever the enforced groups answered, never refunded
			// by them, refusing nothing.
			for j, i := range g {
				if id := a.Decisions[j].LeaseID; id != 0 {
					c := checks[i]
					c.leaseID = id
					v.shadowLeases = append(v.shadowLeases, c)
				}
			}
		} else if v.admitted && a.Allowed {
			if l == nil {
				continue
			}
			members := make([]check, len(g))
			for j, i := range g {
				members[j] = checks[i]
				members[j].leaseID = a.Decisions[j].LeaseID
			}
			l.mu.Lock()
			l.admitted = append(l.admitted, members)
			l.mu.Unlock()
		} else {
			v.admitted = false
		}
	}
	return v, nil
}

// refund gives the checks' costs back: one RL.ALL of REFUND clauses per
// subject, within the timeout; failures are logged.
func (m *engine) refund(checks []check) {
	var gs [][]check
	for _, g := range groups(checks) {
		members := make([]check, len(g))
		for j, i := range g {
			members[j] = checks[i]
		}
		gs = append(gs, members)
	}
	m.refundWithin(gs)
}

// refundWithin refunds the groups, waiting at most the timeout: a Redis
// that does not answer must not hold the response longer (the refunds go
// on in the background).
func (m *engine) refundWithin(gs [][]check) {
	if len(gs) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		m.refundGroups(gs)
		close(done)
	}()
	timer := time.NewTimer(m.c.timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		m.log.Warn("librl: a refund did not finish within the timeout; it goes on in the background")
	}
}

// refundGroups sends one RL.ALL of REFUND clauses per group, and releases
// its concurrency checks' leases; failures are logged.
func (m *engine) refundGroups(gs [][]check) {
	for _, g := range gs {
		var clauses []librl.Clause
		var keys []string
		for _, c := range g {
			if c.p.algorithm != "concurrency" {
				clauses = append(clauses, clause(c, true))
				keys = append(keys, c.key)
			}
		}
		if len(clauses) > 0 {
			if _, err := m.lim.All(context.Background(), clauses...); err != nil {
				m.log.Warn("librl: could not refund", "keys", strings.Join(keys, ", "), "error", err)
			}
		}
	}
	m.releaseGroups(gs)
}

// releaseGroups releases the leases the groups' concurrency checks took.
func (m *engine) releaseGroups(gs [][]check) {
	for _, g := range gs {
		m.release(g)
	}
}

// release gives back the leases of the checks that hold one, each with
// RL.CONCURRENT key limit lease RELEASE id and without OVERRIDE (docs/http.md,
// Concurrency limits), within the timeout. A failed release is logged and
// otherwise ignored: the lease ends by itself.
func (m *engine) release(checks []check) {
	for _, c := range checks {
		if c.p.algorithm != "concurrency" || c.leaseID == 0 {
			continue
		}
		lease, err := m.lim.HeldLease(c.key, c.p.limit, c.p.lease, c.leaseID)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.c.timeout)
			_, err = lease.Release(ctx)
			cancel()
		}
		if err != nil {
			m.log.Warn("librl: could not release a concurrency lease; it ends by itself", "key", c.key, "error", err)
		}
	}
}

// held is the admitted request's checks with the leases they took, for
// releasing when the response is finished.
func held(checks []check, d decided) []check {
	var out []check
	for i, c := range checks {
		if c.p.algorithm == "concurrency" && !c.p.shadow && i < len(d.decisions) && d.decisions[i].LeaseID != 0 {
			c.leaseID = d.decisions[i].LeaseID
			out = append(out, c)
		}
	}
	return out
}
