package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// Reload (docs/http/go.md, Reload): a new configuration applies to the
// requests that start after it, a request in flight finishes on the one
// it started with, and a configuration that does not validate, or drops a
// policy attached in code, is refused with the old one kept.
func TestReload(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	policy := func(limit int) nethttp.Config {
		return nethttp.Config{ExemptLoopback: nethttp.Ptr(false),
			Policies: []nethttp.Policy{{Name: "p", Algorithm: "fixed", Limit: int64(limit), Window: "1m"}}}
	}
	mw, err := nethttp.New(rdb, policy(1))
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(exampleapp.Handler(mw))
	defer s.Close()
	get := func(delay string) *http.Response {
		req, _ := http.NewRequest("GET", s.URL+"/", nil)
		if delay != "" {
			req.Header.Set("X-Conformance-Delay-Ms", delay)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		resp.Body.Close()
		return resp
	}
	if r := get(""); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Limit") != "1" {
		t.Fatalf("first request: %d, limit %q", r.StatusCode, r.Header.Get("X-RateLimit-Limit"))
	}
	if r := get(""); r.StatusCode != 429 {
		t.Fatalf("second request under limit 1: %d", r.StatusCode)
	}

	// A slow request decided under limit 5 answers with it, after the
	// reload to limit 9 that happens while its handler runs.
	rdb.FlushAll(ctx)
	if err := mw.Reload(policy(5)); err != nil {
		t.Fatal(err)
	}
	slow := make(chan *http.Response)
	go func() { slow <- get("300") }()
	time.Sleep(100 * time.Millisecond)
	if err := mw.Reload(policy(9)); err != nil {
		t.Fatal(err)
	}
	if r := <-slow; r == nil || r.Header.Get("X-RateLimit-Limit") != "5" {
		t.Fatalf("the request in flight: %v", r)
	}
	if r := get(""); r.Header.Get("X-RateLimit-Limit") != "9" {
		t.Fatalf("after the reload: limit %q", r.Header.Get("X-RateLimit-Limit"))
	}

	// Refused: the start-up error, the old configuration kept.
	err = mw.Reload(nethttp.Bytes([]byte(`{"policies": [{"name": "p", "algorithm": "fixed", "limit": 0, "window": "1m"}]}`)))
	if err == nil || !strings.Contains(err.Error(), "librl: configuration: policies[0].limit") {
		t.Fatalf("a bad configuration: %v", err)
	}
	if _, err := mw.Policies("p"); err != nil {
		t.Fatal(err)
	}
	err = mw.Reload(nethttp.Config{Policies: []nethttp.Policy{{Name: "q", Algorithm: "fixed", Limit: 1, Window: "1m"}}})
	if err == nil || !strings.Contains(err.Error(), `no policy is named "p"`) {
		t.Fatalf("dropping a policy attached in code: %v", err)
	}
	if r := get(""); r.Header.Get("X-RateLimit-Limit") != "9" {
		t.Fatalf("after the refused reloads: limit %q", r.Header.Get("X-RateLimit-Limit"))
	}
}
