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
	for i, want := range []int{200, 200, 200, 429} {
		req, _ := http.NewRequest("GET", s.URL+"/search", nil)
		req.Header.Set("X-Conformance-User", "alice")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d (the override's limit of 3)", i, resp.StatusCode, want)
		}
	}
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
