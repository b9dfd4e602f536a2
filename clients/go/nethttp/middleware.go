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
//
// The package's files follow docs/http.md's sections: configuration
// (with the schema's walker), identity, keys, routes, plan, cost, decide,
// headers, refusals, fail modes, hook and counting after the response.
// This file is the net/http adapter: it moves a request through plan,
// costs, decide and respond.
package nethttp

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
)

// Option configures New.
type Option func(*Middleware)

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

// AutoPipelining sends the checks through the client's auto-pipeliner
// (librl.Limiter.WithAutoPipelining): the checks of concurrent requests
// go to Redis together, one write and one read for many, which roughly
// halves the application's CPU per checked request under load
// (docs/http/go.md, Speed). Every check still ends at the configuration's
// timeout. New fails when the client has no auto-pipeliner (a Ring).
func AutoPipelining() Option { return func(m *Middleware) { m.autoPipeline = true } }

// PipelinedConnection sends the checks over one connection of the
// package's own when the client is a *redis.Client
// (librl.Limiter.WithPipelinedConnection): the checks of concurrent
// requests go out in one write, and each reply is read straight into the
// waiting request's slot, which costs less CPU per checked request than
// the auto-pipeliner (docs/http/go.md, Speed). On a *redis.ClusterClient
// the checks ride the client's auto-pipeliner instead (AutoPipelining),
// which follows MOVED and ASK. Every check still ends at the
// configuration's timeout. New fails when the client is neither, or has
// options the connection cannot honour (an OnConnect hook).
func PipelinedConnection() Option { return func(m *Middleware) { m.ownConn = true } }

// Logger sets where warnings go (fail open, shadow would-deny, failed
// refunds); default slog.Default().
func Logger(l *slog.Logger) Option { return func(m *Middleware) { m.log = l } }

// Middleware checks requests against the configuration's policies. Its
// configuration can be replaced while it serves (Reload).
type Middleware struct {
	*shared
	cur atomic.Pointer[engine]
	// mu orders reloads; attached is the policy names Policies attached in
	// code, which a new configuration must still define.
	mu       sync.Mutex
	attached map[string]bool
}

// shared is what outlives a reload: the options and the Redis client.
type shared struct {
	lim      *librl.Limiter
	hook     func(DecisionEvent)
	user     func(*http.Request) string
	log      *slog.Logger
	lastWarn atomic.Int64
	// deadlines: the client ends a call at its context's deadline.
	deadlines bool
	// denyHeaders go on refusals by a policy.
	denyHeaders http.Header
	breaker     breaker
	resolvers   Resolvers
	// autoPipeline: the checks ride the client's auto-pipeliner.
	autoPipeline bool
	// ownConn: the checks ride a pipelined connection of the package's
	// own (the auto-pipeliner on a cluster).
	ownConn bool
}

// engine is one configuration at work: a request runs through the engine
// it started with, whatever a reload does meanwhile.
type engine struct {
	c *config
	*shared
	// shadowed: the same configuration under mode: shadow, for the
	// requests a mode resolver puts in shadow mode.
	shadowed *engine
	// local decides while Redis cannot (fail: local); nil otherwise. Its
	// counts belong to this configuration: a reload starts afresh.
	local *localLimiter
	// timed: the Limiter with the configuration's timeout, kept by the
	// pipelined connection (librl.Limiter.WithTimeout); nil without one.
	timed *librl.Limiter
}

// New validates the configuration (a *ConfigError naming the field on the
// first fault) and returns the middleware. It does not contact Redis: a
// Redis that is not there yet is the fail mode's business.
func New(client redis.UniversalClient, source Source, opts ...Option) (*Middleware, error) {
	if client == nil {
		return nil, errors.New("librl: nethttp.New needs a go-redis client")
	}
	m := &Middleware{shared: &shared{lim: librl.New(client), user: func(r *http.Request) string { return UserFromContext(r.Context()) },
		log: slog.Default(), deadlines: honoursDeadlines(client), breaker: breaker{now: time.Now}}, attached: map[string]bool{}}
	for _, o := range opts {
		o(m)
	}
	if _, standalone := client.(*redis.Client); m.ownConn && standalone {
		lim, err := m.lim.WithPipelinedConnection()
		if err != nil {
			return nil, fmt.Errorf("librl: nethttp.PipelinedConnection: %w", err)
		}
		// Its calls end at their context's deadline whatever the
		// client's options say.
		m.lim, m.deadlines = lim, true
	} else if m.autoPipeline || m.ownConn {
		lim, err := m.lim.WithAutoPipelining()
		if err != nil {
			option := "AutoPipelining"
			if m.ownConn {
				option = "PipelinedConnection"
			}
			return nil, fmt.Errorf("librl: nethttp.%s: %w", option, err)
		}
		// The pipelined calls end at their context's deadline whatever
		// the client's options say.
		m.lim, m.deadlines = lim, true
	}
	// After the options: the configuration names registered resolvers.
	c, err := configure(source, m.resolvers)
	if err != nil {
		return nil, err
	}
	m.cur.Store(newEngine(c, m.shared))
	return m, nil
}

// newEngine is a configuration at work, with its shadow twin when a mode
// resolver may put a request in shadow mode.
func newEngine(c *config, s *shared) *engine {
	e := &engine{c: c, shared: s}
	if c.failLocal {
		e.local = newLocalLimiter(c.localMaxKeys)
	}
	if s.lim.PipelinedConnection() {
		e.timed = s.lim.WithTimeout(c.timeout)
	}
	if c.modeResolver != nil {
		shadow := *c
		shadow.shadow = true
		e.shadowed = &engine{c: &shadow, shared: s, local: e.local, timed: e.timed}
	}
	return e
}

// configure reads and validates a source.
func configure(source Source, rs Resolvers) (*config, error) {
	if source == nil {
		return nil, errors.New("librl: nethttp needs a configuration: nethttp.File, nethttp.Bytes or a nethttp.Config")
	}
	doc, err := source.document()
	if err != nil {
		return nil, err
	}
	return parseConfig(doc, rs)
}

// Reload replaces the configuration (docs/http.md, Reload): requests that
// started keep the one they started with, later ones get the new one. A
// configuration that does not validate, or that no longer defines a
// policy Policies attached in code, is refused with the start-up error and
// the current one stays.
func (m *Middleware) Reload(source Source) error {
	c, err := configure(source, m.resolvers)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(m.attached)) {
		if _, ok := c.byName[n]; !ok {
			return bad("policies", "no policy is named \"%s\", which Policies attached in code", n)
		}
	}
	m.cur.Store(newEngine(c, m.shared))
	return nil
}

// Close closes the connections the middleware opened itself: the
// pipelined connection (PipelinedConnection) and those of calls the server
// holds; not the client it was given. Requests checked after Close apply
// the fail mode.
func (m *Middleware) Close() error { return m.lim.Close() }

// Handler checks every request with the configuration's routes (or, with
// none, every policy).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := m.cur.Load()
		// The path as sent (an encoded ? or # stays encoded, so it is not
		// taken for the query's or a fragment's start).
		policies, i, ok := e.c.selectPolicies(r.Method, r.URL.EscapedPath())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		route, deny := "", e.c.deny
		if i >= 0 {
			route, deny = e.c.routes[i].path, e.c.routes[i].deny
		}
		e.serve(w, r, next, policies, route, deny)
	})
}

// Policies is a middleware checking the named policies on every request it
// sees, for attaching policies to routes in code instead of `routes`. The
// names are those of the configuration each request finds (Reload).
func (m *Middleware) Policies(names ...string) (func(http.Handler) http.Handler, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cur.Load().c
	for i, n := range names {
		if _, ok := c.byName[n]; !ok {
			return nil, bad(fmt.Sprintf("Policies[%d]", i), "no policy is named \"%s\"", n)
		}
	}
	for _, n := range names {
		m.attached[n] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e := m.cur.Load()
			ps := make([]*policy, len(names))
			for i, n := range names {
				ps[i] = e.c.byName[n]
			}
			e.serve(w, r, next, ps, "", e.c.deny)
		})
	}, nil
}

// serve is one request: plan, costs, decide, respond; deny is the refusal
// of a denial on this route.
func (m *engine) serve(w http.ResponseWriter, r *http.Request, next http.Handler, policies []*policy, route string, deny *refusal) {
	if m.c.modeResolver != nil {
		switch m.c.modeResolver(r) {
		case ModeOff:
			next.ServeHTTP(w, r)
			return
		case ModeShadow:
			m = m.shadowed
		}
	}
	id := &identity{c: m.c, peer: r.RemoteAddr, header: r.Header, rawQuery: r.URL.RawQuery, user: m.user(r), ctx: r.Context()}
	checks := plan(m.c, policies, id)
	var err error
	if checks, err = resolvedLimits(checks, r); err != nil {
		m.respond(w, r, next, checks, m.failure(r, route, checks, err))
		return
	}
	if len(checks) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	if refusal := costs(m.c, r, checks); refusal != nil {
		refusal.write(w)
		return
	}
	m.respond(w, r, next, checks, m.decide(r, route, checks, deny))
}

// respond sends the decision: the rate-limit headers (when Redis
// answered), then the refusal or the handler, which a count-after-response
// policy watches for its status.
func (m *engine) respond(w http.ResponseWriter, r *http.Request, next http.Handler, checks []check, d decided) {
	setHeaders(m.c, w.Header(), d.replied, d.outcome == Denied, time.Now)
	release := m.release
	if d.local {
		release = m.releaseLocally
	}
	if len(d.shadowLeases) > 0 {
		defer release(d.shadowLeases)
	}
	if d.refusal.status != 0 {
		if d.outcome == Denied {
			h := w.Header()
			for k, v := range m.denyHeaders {
				if _, set := h[k]; !set {
					h[k] = v
				}
			}
		}
		d.refusal.write(w)
		return
	}
	// Served with its enforced groups counted: admitted, or denied only
	// by policies of their own mode: shadow.
	served := d.outcome == Allowed || (d.outcome == WouldDeny && !m.c.shadow)
	if served {
		// Released when the response is finished: the handler returned,
		// its client went away, or it panicked (docs/http.md, Concurrency
		// limits). A denied request, or one mode: shadow would deny, holds
		// none.
		if leases := held(checks, d); len(leases) > 0 {
			defer release(leases)
		}
		// A queued request is served at its turn.
		if m.c.queues {
			if wait := turn(checks, d.decisions); wait > 0 && !m.await(r, wait, checks) {
				return
			}
		}
	}
	// The local limiter refunds nothing: count: failed and succeeded
	// policies decided there count every request.
	if !served || !countsAfter(checks) || d.local {
		next.ServeHTTP(w, r)
		return
	}
	if d.outcome == WouldDeny {
		checks = counted(checks, d.decisions)
	}
	rw := &refundWriter{ResponseWriter: w, before: func(status int) { m.settle(checks, status) }}
	next.ServeHTTP(rw, r)
	rw.status(http.StatusOK)
}

// write sends a refusal; the rate-limit headers, when any, are already on
// w.
func (r reply) write(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.headers {
		h[k] = v
	}
	// One slice for both values.
	vs := []string{r.contentType, strconv.Itoa(len(r.body))}
	h["Content-Type"], h["Content-Length"] = vs[0:1:1], vs[1:2:2]
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}
