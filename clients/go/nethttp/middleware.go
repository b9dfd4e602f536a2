// Package nethttp is librl's net/http middleware (docs/http.md): the
// shared configuration's policies, checked with one RL.ALL per subject
// before the handler runs, with the rate-limit headers, the refusals, the
// fail modes, shadow mode and a decision hook.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	mw, err := nethttp.New(rdb, nethttp.File("policies.yaml"))
//	if err != nil {
//		log.Fatal(err) // names the configuration field at fault
//	}
//	http.ListenAndServe(":8080", mw.Handler(mux))
package nethttp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
)

// Outcome is what happened to a checked request.
type Outcome string

const (
	Allowed    Outcome = "allowed"     // every policy admitted it
	Denied     Outcome = "denied"      // a policy refused it
	WouldDeny  Outcome = "would_deny"  // a policy would have refused it; shadow mode let it pass
	FailOpen   Outcome = "fail_open"   // Redis did not answer in time; passed
	FailClosed Outcome = "fail_closed" // Redis did not answer in time; 503
)

// DecisionEvent is the decision hook's argument, once per checked request
// (docs/http.md, Decision hook).
type DecisionEvent struct {
	Outcome Outcome
	Local   bool // decided in the process: never, in Go (no local fail mode)
	Method  string
	Path    string
	Route   string // the matched route's path, "" when none
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

// Option configures New.
type Option func(*Middleware)

// OnDecision sets the decision hook: called once per checked request,
// after the decision and before the handler runs or the refusal is sent. A
// panic in it is logged and ignored.
func OnDecision(hook func(DecisionEvent)) Option { return func(m *Middleware) { m.hook = hook } }

// UserResolver sets how the authenticated user of a request is found, for
// `key: user` policies (default: UserFromContext). "" means no user: the
// api-key subject, else the ip.
func UserResolver(resolve func(*http.Request) string) Option {
	return func(m *Middleware) { m.user = resolve }
}

// DenyHeaders adds headers to every response a policy refuses (go-zoox
// api-gateway's `headers`): a policy label for monitoring, say. They are
// set after the rate-limit headers and may not replace them.
func DenyHeaders(h http.Header) Option {
	canonical := http.Header{}
	for k, v := range h {
		canonical[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	return func(m *Middleware) { m.denyHeaders = canonical }
}

// Logger sets where warnings go (fail open, shadow would-deny, failed
// refunds); default slog.Default().
func Logger(l *slog.Logger) Option { return func(m *Middleware) { m.log = l } }

// Middleware checks requests against the configuration's policies.
type Middleware struct {
	c        *config
	lim      *librl.Limiter
	hook     func(DecisionEvent)
	user     func(*http.Request) string
	log      *slog.Logger
	lastWarn atomic.Int64
	// denyHeaders go on refusals by a policy.
	denyHeaders http.Header
}

// New validates the configuration (a *ConfigError naming the field on the
// first fault) and returns the middleware. It does not contact Redis: a
// Redis that is not there yet is the fail mode's business.
func New(client redis.UniversalClient, source Source, opts ...Option) (*Middleware, error) {
	if client == nil {
		return nil, errors.New("librl: nethttp.New needs a go-redis client")
	}
	if source == nil {
		return nil, errors.New("librl: nethttp.New needs a configuration: nethttp.File, nethttp.Bytes or a nethttp.Config")
	}
	doc, err := source.document()
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(doc)
	if err != nil {
		return nil, err
	}
	m := &Middleware{c: c, lim: librl.New(client), user: func(r *http.Request) string { return UserFromContext(r.Context()) },
		log: slog.Default()}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// Handler checks every request with the configuration's routes (or, with
// none, every policy).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		policies, route := m.c.policies, ""
		if m.c.hasRoutes {
			i := selectRoute(m.c.routes, r.Method, r.URL.Path)
			if i < 0 {
				next.ServeHTTP(w, r)
				return
			}
			policies, route = m.c.routes[i].policies, m.c.routes[i].path
		}
		m.serve(w, r, next, policies, route)
	})
}

// Policies is a middleware checking the named policies on every request it
// sees, for attaching policies to routes in code instead of `routes`.
func (m *Middleware) Policies(names ...string) (func(http.Handler) http.Handler, error) {
	var ps []*policy
	for i, n := range names {
		p, ok := m.c.byName[n]
		if !ok {
			return nil, bad(fmt.Sprintf("Policies[%d]", i), "no policy is named %q", n)
		}
		ps = append(ps, p)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next, ps, "") })
	}, nil
}

// check is one policy applied to one request.
type check struct {
	p    *policy
	s    subject
	key  string
	okey string
	cost int64
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, policies []*policy, route string) {
	if len(policies) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	id := identity{r: r, c: m.c, user: m.user(r)}
	var checks []check
	var body int64 = -1
	for _, p := range policies {
		s := id.subject(p)
		if m.c.exemptLoopback && s.loopback {
			continue
		}
		c := check{p: p, s: s, cost: p.costUnits}
		switch p.cost {
		case costHeader:
			n, ok := headerCost(r.Header.Values(p.costHeader))
			if !ok {
				problem(w, 400, titles[400], p.costHeader+" must be an integer from 1 to 2^50.", map[string]any{"policy": p.name})
				return
			}
			c.cost = n
		case costBodyBytes:
			if body < 0 {
				var ok bool
				if body, ok = m.measure(r); !ok {
					problem(w, 413, titles[413], fmt.Sprintf("The body may be at most %d bytes.", m.c.maxBody), nil)
					return
				}
			}
			c.cost = min(max(body, 1), maxUnits)
		}
		// The subject is the hash tag: one subject's keys share a cluster slot.
		base := m.c.prefix + "{" + s.tag + "}"
		c.key = base + ":" + p.name
		if p.overridable {
			c.okey = base + ":override:" + p.name
		}
		checks = append(checks, c)
	}
	if len(checks) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	v, err := m.exchange(checks)
	admitted, decisions := v.admitted, v.decisions
	if err != nil {
		m.warnOnce(fmt.Sprintf("librl: Redis did not answer (%v); %s", err, map[bool]string{
			true: "refusing requests (fail: closed)", false: "passing requests unlimited (fail: open)"}[m.c.failClosed]))
		if m.c.failClosed {
			m.emit(r, route, FailClosed, checks, nil, err)
			problem(w, 503, titles[503], "The rate limiter is unavailable, and this service does not admit unlimited requests.", nil)
			return
		}
		m.emit(r, route, FailOpen, checks, nil, err)
		next.ServeHTTP(w, r)
		return
	}
	cs := make([]checked, len(checks))
	for i := range checks {
		cs[i] = checked{p: checks[i].p, d: decisions[i]}
	}
	if !admitted {
		worst := mostRestrictive(cs)
		if !m.c.shadow {
			m.emit(r, route, Denied, checks, decisions, nil)
			m.setHeaders(w.Header(), cs, true)
			for k, v := range m.denyHeaders {
				if w.Header().Get(k) == "" {
					w.Header()[k] = v
				}
			}
			m.deny(w, cs[worst], checks[worst].cost)
			return
		}
		m.log.Warn("librl: shadow mode: the request would be refused", "method", r.Method, "path", r.URL.Path,
			"policy", cs[worst].p.name)
		m.emit(r, route, WouldDeny, checks, decisions, nil)
		m.setHeaders(w.Header(), cs, false)
		next.ServeHTTP(w, r)
		return
	}
	m.emit(r, route, Allowed, checks, decisions, nil)
	m.setHeaders(w.Header(), cs, false)
	var later []check
	for _, c := range checks {
		if c.p.count != "all" {
			later = append(later, c)
		}
	}
	if len(later) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	rw := &refundWriter{ResponseWriter: w, before: func(status int) {
		var back []check
		for _, c := range later {
			if (c.p.count == "failed") == (status < 400) {
				back = append(back, c)
			}
		}
		m.refund(back)
	}}
	next.ServeHTTP(rw, r)
	rw.status(http.StatusOK)
}

// measure is the body's size: its Content-Length, or a chunked body read
// into memory (and given back to the handler) up to max_body_bytes; false
// when it is larger.
func (m *Middleware) measure(r *http.Request) (int64, bool) {
	if r.ContentLength >= 0 {
		return r.ContentLength, r.ContentLength <= m.c.maxBody
	}
	if r.Body == nil {
		return 0, true
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, m.c.maxBody+1))
	if err != nil || int64(len(data)) > m.c.maxBody {
		return 0, false
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return int64(len(data)), true
}

// refundWriter refunds `count: failed|succeeded` costs when the status is
// known, before the response goes out (a client's next request sees them).
type refundWriter struct {
	http.ResponseWriter
	before func(status int)
	done   bool
}

func (w *refundWriter) status(code int) {
	if !w.done {
		w.done = true
		w.before(code)
	}
}

func (w *refundWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.status(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refundWriter) Write(b []byte) (int, error) {
	w.status(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *refundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack passes a connection upgrade (WebSocket) through; the request
// counts as a 101 response.
func (w *refundWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	w.status(http.StatusSwitchingProtocols)
	return h.Hijack()
}

func (w *refundWriter) Flush() {
	w.status(http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// clause is a check as an RL.ALL clause, consuming or giving back its cost.
func clause(c check, refund bool) librl.Clause {
	opts := []librl.Option{librl.Cost(c.cost)}
	if refund {
		opts[0] = librl.Refund(c.cost)
	}
	if c.okey != "" {
		opts = append(opts, librl.Override(c.okey))
	}
	p := c.p
	switch p.algorithm {
	case "fixed":
		if p.aligned {
			opts = append(opts, librl.Aligned())
		}
		return librl.Fixed(c.key, p.limit, p.window, opts...)
	case "sliding":
		return librl.Sliding(c.key, p.limit, p.window, opts...)
	case "approx":
		return librl.Sliding(c.key, p.limit, p.window, append(opts, librl.Approx())...)
	default:
		if p.burst != 0 {
			opts = append(opts, librl.Burst(p.burst))
		}
		return librl.Token(c.key, p.limit, p.window, opts...)
	}
}

// groups are the checks' indexes by subject, in the order subjects first
// appear.
func groups(checks []check) [][]int {
	var out [][]int
	at := map[string]int{}
	for i, c := range checks {
		g, ok := at[c.s.tag]
		if !ok {
			g = len(out)
			at[c.s.tag] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

var errTimeout = errors.New("no answer within the configured timeout")

// verdict is what Redis answered for a request's checks.
type verdict struct {
	admitted  bool
	decisions []librl.Decision
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

// exchange runs the checks within the timeout. Past it the exchange goes
// on in the background; what it admits stays counted under fail: open
// (the request was served) and is refunded under fail: closed (it was
// refused). On an error or the timeout with fail: closed, the groups
// admitted so far are refunded before this returns, so before the 503.
func (m *Middleware) exchange(checks []check) (verdict, error) {
	type result struct {
		v   verdict
		err error
	}
	l := &ledger{}
	done := make(chan result, 1)
	go func() {
		v, err := m.decide(checks, l)
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
		l.mu.Unlock()
		m.refundGroups(back)
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

// decide sends one RL.ALL per subject; after a denial the later groups are
// peeked. Each admitted group goes to the ledger as soon as Redis admits it.
func (m *Middleware) decide(checks []check, l *ledger) (verdict, error) {
	ctx := context.Background()
	v := verdict{admitted: true, decisions: make([]librl.Decision, len(checks))}
	for _, g := range groups(checks) {
		clauses := make([]librl.Clause, len(g))
		members := make([]check, len(g))
		for j, i := range g {
			clauses[j] = clause(checks[i], false)
			members[j] = checks[i]
		}
		var a librl.AllDecision
		var err error
		if v.admitted {
			a, err = m.lim.All(ctx, clauses...)
		} else {
			a, err = m.lim.PeekAll(ctx, clauses...)
		}
		if err != nil {
			return verdict{}, err
		}
		for j, i := range g {
			v.decisions[i] = a.Decisions[j]
		}
		if v.admitted && a.Allowed {
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
func (m *Middleware) refund(checks []check) {
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
func (m *Middleware) refundWithin(gs [][]check) {
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

// refundGroups sends one RL.ALL of REFUND clauses per group; failures are
// logged.
func (m *Middleware) refundGroups(gs [][]check) {
	for _, g := range gs {
		clauses := make([]librl.Clause, len(g))
		keys := make([]string, len(g))
		for j, c := range g {
			clauses[j] = clause(c, true)
			keys[j] = c.key
		}
		if _, err := m.lim.All(context.Background(), clauses...); err != nil {
			m.log.Warn("librl: could not refund", "keys", strings.Join(keys, ", "), "error", err)
		}
	}
}

// warnOnce logs at most once every 10 seconds.
func (m *Middleware) warnOnce(msg string) {
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if now-last < int64(10*time.Second) || !m.lastWarn.CompareAndSwap(last, now) {
		return
	}
	m.log.Warn(msg)
}

func (m *Middleware) emit(r *http.Request, route string, outcome Outcome, checks []check, decisions []librl.Decision, err error) {
	if m.hook == nil {
		return
	}
	ev := DecisionEvent{Outcome: outcome, Method: r.Method, Path: r.URL.Path, Route: route, Err: err}
	for i, c := range checks {
		ch := CheckReport{Policy: c.p.name, Subject: c.s.tag, Key: c.key, Cost: c.cost}
		if decisions != nil {
			d := decisions[i]
			ch.Decision = &d
		}
		ev.Checks = append(ev.Checks, ch)
	}
	defer func() {
		if p := recover(); p != nil {
			m.log.Warn("librl: the decision hook panicked", "panic", p)
		}
	}()
	m.hook(ev)
}
