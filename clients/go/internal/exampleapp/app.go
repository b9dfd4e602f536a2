// Package exampleapp is the app behind the middleware in the conformance
// runner and in scripts/serve-example go (conformance/README.md, What the
// app behind the middleware does): every path and method answers "ok",
// with the status of the X-Conformance-Status header when present, after
// the delay of X-Conformance-Delay-Ms, or panicking with
// X-Conformance-Fail: 1; a request with X-Conformance-User is
// authenticated as that user, and one with X-Conformance-Attribute:
// NAME=VALUE has the request attribute NAME, the net/http way: in the
// request's context.
// It registers the conformance test resolvers (Resolvers).
package exampleapp

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/librl/librl/clients/go/nethttp"
)

// errFail is the panic of a handler asked to fail: net/http recovers it
// and closes the connection unanswered.
var errFail = errors.New("exampleapp: X-Conformance-Fail asked this handler to fail")

// OK answers every request "ok" (status from X-Conformance-Status).
var OK = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if ms, err := strconv.Atoi(r.Header.Get("X-Conformance-Delay-Ms")); err == nil && ms > 0 {
		// A slow handler, which stops waiting when its client goes away.
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	if r.Header.Get("X-Conformance-Fail") == "1" {
		panic(errFail)
	}
	status := http.StatusOK
	if s, err := strconv.Atoi(r.Header.Get("X-Conformance-Status")); err == nil && s >= 200 && s <= 599 {
		status = s
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("ok"))
})

// Authenticate stands for an application's authentication middleware: it
// puts the X-Conformance-User header's user in the request's context,
// where nethttp's default user resolver finds it, and the attribute
// X-Conformance-Attribute names (NAME=VALUE, split at the first "="),
// where the attribute:<name> source finds it.
func Authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user := r.Header.Get("X-Conformance-User"); user != "" {
			r = r.WithContext(nethttp.WithUser(r.Context(), user))
		}
		if name, value, ok := strings.Cut(r.Header.Get("X-Conformance-Attribute"), "="); ok {
			r = r.WithContext(nethttp.WithAttribute(r.Context(), name, value))
		}
		next.ServeHTTP(w, r)
	})
}

// Handler is the whole app: authentication, then the middleware, then OK.
func Handler(mw *nethttp.Middleware) http.Handler {
	return Authenticate(mw.Handler(OK))
}

// Resolvers are the test resolvers every example app registers
// (conformance/README.md): conformance-cost reads X-Conformance-Cost (absent:
// 1; any other text: an error, which the middleware answers 400),
// conformance-limit reads X-Conformance-Limit, <limit>/<window ms> or
// <limit>/<window ms>/<burst> (absent or not that: nothing), and
// conformance-mode reads X-Conformance-Mode (absent: enforce).
var Resolvers = nethttp.Resolvers{
	Cost: map[string]func(*http.Request) (int64, error){"conformance-cost": func(r *http.Request) (int64, error) {
		v, ok := r.Header["X-Conformance-Cost"]
		if !ok {
			return 1, nil
		}
		return strconv.ParseInt(strings.Join(v, ", "), 10, 64)
	}},
	Limit: map[string]func(*http.Request) (nethttp.Limit, bool){"conformance-limit": func(r *http.Request) (nethttp.Limit, bool) {
		parts := strings.Split(r.Header.Get("X-Conformance-Limit"), "/")
		if len(parts) < 2 || len(parts) > 3 {
			return nethttp.Limit{}, false
		}
		var n [3]int64
		for i, part := range parts {
			v, err := strconv.ParseInt(part, 10, 64)
			if err != nil {
				return nethttp.Limit{}, false
			}
			n[i] = v
		}
		return nethttp.Limit{Limit: n[0], Window: time.Duration(n[1]) * time.Millisecond, Burst: n[2]}, true
	}},
	Mode: map[string]func(*http.Request) nethttp.Mode{"conformance-mode": func(r *http.Request) nethttp.Mode {
		if v := r.Header.Get("X-Conformance-Mode"); v != "" {
			return nethttp.Mode(v)
		}
		return nethttp.ModeEnforce
	}},
}
