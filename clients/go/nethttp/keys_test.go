package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// Key and OverrideKey are the keys the middleware uses: giving a customer
// their own limit is one RL.OVERRIDE SET on the override key.
func TestKeysFromThePackage(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	mw, err := nethttp.New(rdb, nethttp.Config{ExemptLoopback: nethttp.Ptr(false), Policies: []nethttp.Policy{
		{Name: "search", Algorithm: "fixed", Limit: 1, Window: "1m", Key: "user", Overridable: true},
		{Name: "plain", Algorithm: "fixed", Limit: 1, Window: "1m", Key: "ip"},
	}, Routes: []nethttp.Route{{Path: "/search", Policies: []string{"search"}}, {Path: "/", Policies: []string{"plain"}}}})
	if err != nil {
		t.Fatal(err)
	}
	okey, err := mw.OverrideKey("search", "alice")
	if err != nil || okey != "rl:{user:alice}:override:search" {
		t.Fatalf("OverrideKey: %q, %v", okey, err)
	}
	if err := librl.New(rdb).OverrideSet(ctx, okey, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(exampleapp.Handler(mw))
	defer s.Close()
	expectStatuses(t, s, "/search", "X-Conformance-User", "alice", 200, 200, 200, 429) // the override's limit of 3
	key, err := mw.Key("search", "alice")
	if n, _ := rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("Key %q (%v): not the key the middleware wrote", key, err)
	}
	if key, err := mw.Key("plain", "::ffff:198.51.100.9"); err != nil || key != "rl:{ip:198.51.100.9}:plain" {
		t.Errorf("Key of an IPv4-mapped address: %q, %v", key, err)
	}
	if okey, err := mw.OverrideKey("plain", "198.51.100.9"); err != nil || okey != "rl:{ip:198.51.100.9}:override:plain" {
		t.Errorf("OverrideKey of a policy that is not overridable: %q, %v", okey, err)
	}
	for _, c := range []struct{ policy, value string }{{"nope", "alice"}, {"plain", "example.com"}, {"search", ""}} {
		if key, err := mw.Key(c.policy, c.value); err == nil {
			t.Errorf("Key(%q, %q): %q, no error", c.policy, c.value, key)
		}
	}
}

// An application's own middleware leaves the project on the request
// (WithAttribute); `user` redefined as that attribute keys the policy by
// it, and OverrideKey builds that project's override key. Attributes set
// one after another stack.
func TestAttributeFromTheApplicationsMiddleware(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	mw, err := nethttp.New(rdb, nethttp.Bytes([]byte(`{"exempt_loopback": false,
		"identities": {"user": ["attribute:project"]},
		"policies": [
			{"name": "search", "algorithm": "fixed", "limit": 1, "window": "1m", "key": "user", "overridable": true},
			{"name": "tenant", "algorithm": "fixed", "limit": 100, "window": "1m", "key": "attribute:tenant"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	okey, err := mw.OverrideKey("search", "1:42")
	if err != nil || okey != "rl:{user:1:42}:override:search" {
		t.Fatalf("OverrideKey: %q, %v", okey, err)
	}
	if err := librl.New(rdb).OverrideSet(ctx, okey, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api-Key") == "k1" {
				ctx := nethttp.WithAttribute(r.Context(), "project", "1:42")
				r = r.WithContext(nethttp.WithAttribute(ctx, "tenant", " acme\t"))
			}
			next.ServeHTTP(w, r)
		})
	}
	s := httptest.NewServer(auth(mw.Handler(exampleapp.OK)))
	defer s.Close()
	expectStatuses(t, s, "/", "X-Api-Key", "k1", 200, 200, 200, 429) // the project's override of 3
	if n, _ := rdb.Exists(ctx, "rl:{attribute:tenant:acme}:tenant").Result(); n != 1 {
		t.Fatal("the tenant attribute, trimmed, did not key its policy")
	}
	// Without the attribute: the ip, with a limit of 1 of its own.
	expectStatuses(t, s, "/", "X-Api-Key", "", 200)
	if n, _ := rdb.Exists(ctx, "rl:{ip:127.0.0.1}:search").Result(); n != 1 {
		t.Fatal("without the attribute, the ip did not key the policy")
	}
}

// expectStatuses sends GET path with the header (none when value is "")
// once per status wanted, expecting each in turn.
func expectStatuses(t *testing.T, s *httptest.Server, path, header, value string, want ...int) {
	t.Helper()
	for i, w := range want {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		if value != "" {
			req.Header.Set(header, value)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != w {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, w)
		}
	}
}
