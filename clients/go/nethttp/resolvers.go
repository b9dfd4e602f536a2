package nethttp

import (
	"fmt"
	"net/http"
	"time"
)

// Resolvers in code (docs/http.md, Resolvers): what only the application
// knows, named in the file as code:<name> and registered here, each a
// function of the request.

// Resolvers are the functions a configuration may name with code:<name>,
// by kind and name. A configuration naming one that is not here is
// refused at start-up (and at Reload).
type Resolvers struct {
	// Cost gives a `cost: code:<name>` policy's cost: an integer from 1
	// to 2^50; anything else, or an error, is answered 400. A resolver
	// that reads r.Body must put back what it read.
	Cost map[string]func(r *http.Request) (int64, error)
	// Limit gives a `limit: code:<name>` policy's limit for the request;
	// false: the policy does not apply to it.
	Limit map[string]func(r *http.Request) (Limit, bool)
	// Mode gives the request's mode (`mode: code:<name>`); any other
	// value than ModeShadow and ModeOff is ModeEnforce.
	Mode map[string]func(r *http.Request) Mode
}

// Limit is a limit resolver's answer: the subject's limit and window, and
// for a token policy optionally its burst (0: the limit).
type Limit struct {
	Limit  int64
	Window time.Duration
	Burst  int64
}

// Mode is a request's mode, from a mode resolver.
type Mode string

const (
	ModeEnforce Mode = "enforce"
	ModeShadow  Mode = "shadow" // checked and counted, never refused
	ModeOff     Mode = "off"    // not checked: no Redis call, no headers, no hook call
)

// Register gives the middleware the resolvers its configurations may name.
func Register(rs Resolvers) Option {
	return func(m *Middleware) { m.resolvers = rs }
}

// resolverOf is the resolver code:<name> names in field, or the
// resolvers-registered refusal.
func resolverOf[F any](field, kind, code string, registered map[string]F) (F, string, error) {
	name := code[len("code:"):]
	f, ok := registered[name]
	if !ok {
		return f, name, bad(field, "no %s resolver is registered as \"%s\"", kind, name)
	}
	return f, name, nil
}

// resolvedLimits applies the checks' limit resolvers: a check whose
// resolver gives nothing is dropped, one whose resolver gives a limit
// gets a policy of its own for this request with it. An error names a
// resolver whose limit is out of the module's bounds: the request gets
// the fail mode, as a call Redis refused would.
func resolvedLimits(checks []check, r *http.Request) ([]check, error) {
	out := checks[:0]
	for _, ch := range checks {
		p := ch.p
		if p.limitResolver == nil {
			out = append(out, ch)
			continue
		}
		l, ok := p.limitResolver(r)
		if !ok {
			continue
		}
		if l.Limit < 1 || l.Limit > maxUnits || l.Window < time.Millisecond || l.Window > maxWindow ||
			l.Burst < 0 || l.Burst > maxUnits {
			return nil, fmt.Errorf("the limit resolver %q gave %+v: a limit and burst from 1 to 2^50 and a window from 1 ms to 3650 days are needed", p.limitName, l)
		}
		own := *p
		own.limit, own.window, own.burst = l.Limit, l.Window.Truncate(time.Millisecond), 0
		if p.algorithm == "token" {
			own.burst = l.Burst
		}
		setOptions(&own)
		ch.p = &own
		out = append(out, ch)
	}
	return out, nil
}

// maxWindow is the longest window the schema allows: 3650 days.
const maxWindow = 3650 * 24 * time.Hour
