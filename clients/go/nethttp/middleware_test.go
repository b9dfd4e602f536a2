package nethttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// What the conformance cases do not reach: the Go forms of the
// configuration, the hook, the user resolver and policies attached in code.
func TestMiddlewareInGo(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	get := func(t *testing.T, h http.Handler, path string, header ...string) *http.Response {
		t.Helper()
		s := httptest.NewServer(h)
		defer s.Close()
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	t.Run("a Config struct, the hook and a user resolver", func(t *testing.T) {
		rdb.FlushAll(ctx)
		var mu sync.Mutex
		var events []nethttp.DecisionEvent
		cfg := nethttp.Config{
			ExemptLoopback: nethttp.Ptr(false),
			Policies: []nethttp.Policy{
				{Name: "per-user", Algorithm: "token", Rate: "2/minute", Burst: 2, Key: "user"},
			},
		}
		mw, err := nethttp.New(rdb, cfg,
			nethttp.UserResolver(func(r *http.Request) string { return r.Header.Get("X-User") }),
			nethttp.OnDecision(func(e nethttp.DecisionEvent) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
				panic("a hook's panic is logged and ignored")
			}),
			nethttp.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(exampleapp.OK)
		for _, want := range []int{200, 200, 429} {
			if resp := get(t, h, "/", "X-User", "bob"); resp.StatusCode != want {
				t.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
		}
		if n, _ := rdb.Exists(ctx, "rl:{user:bob}:per-user").Result(); n != 1 {
			t.Fatal("the resolver's user is not the key")
		}
		if len(events) != 3 || events[2].Outcome != nethttp.Denied || events[0].Outcome != nethttp.Allowed {
			t.Fatalf("%+v", events)
		}
		c := events[2].Checks[0]
		if c.Policy != "per-user" || c.Subject != "user:bob" || c.Decision == nil || c.Decision.Allowed {
			t.Fatalf("%+v", c)
		}
	})

	t.Run("refusals in a Config struct", func(t *testing.T) {
		rdb.FlushAll(ctx)
		cfg := nethttp.Config{
			ExemptLoopback: nethttp.Ptr(false),
			Deny:           &nethttp.Deny{Body: "json", JSON: map[string]any{"code": "slow"}, Headers: map[string]string{"X-A": "1"}},
			FailDeny:       &nethttp.Deny{Status: 429, Body: "text"},
			Policies:       []nethttp.Policy{{Name: "p", Algorithm: "fixed", Limit: 1, Window: "1m"}},
			Routes: []nethttp.Route{{Path: "/v1", Policies: []string{"p"}, Deny: &nethttp.Deny{Body: "text", Message: "v1"}},
				{Path: "/", Policies: []string{"p"}}},
		}
		mw, err := nethttp.New(rdb, cfg, nethttp.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(exampleapp.OK)
		get(t, h, "/")
		if resp := get(t, h, "/v1"); resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.Header.Get("X-A") != "1" {
			t.Fatalf("the route's deny: %d %v", resp.StatusCode, resp.Header)
		}
		if resp := get(t, h, "/"); resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("the deny: %d %v", resp.StatusCode, resp.Header)
		}
		cfg.Deny = &nethttp.Deny{JSON: "no body: json"}
		var ce *nethttp.ConfigError
		if _, err := nethttp.New(rdb, cfg); !errors.As(err, &ce) || ce.Field != "deny.json" {
			t.Fatalf("%v, want deny.json refused", err)
		}
	})

	t.Run("identities in a Config struct", func(t *testing.T) {
		rdb.FlushAll(ctx)
		mw, err := nethttp.New(rdb, nethttp.Config{
			ExemptLoopback: nethttp.Ptr(false),
			Identities:     map[string][]string{"client": {"header:X-Client", "query:client"}},
			Policies:       []nethttp.Policy{{Name: "p", Algorithm: "fixed", Limit: 5, Window: "1m", Key: "client"}},
		}, nethttp.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		get(t, mw.Handler(exampleapp.OK), "/?client=acme")
		if n, _ := rdb.Exists(ctx, "rl:{client:acme}:p").Result(); n != 1 {
			t.Fatal("the identity's query source is not the key")
		}
	})

	t.Run("resolvers: a limit out of bounds gets the fail mode, an unregistered one is refused", func(t *testing.T) {
		rdb.FlushAll(ctx)
		doc := `{"fail": "closed", "exempt_loopback": false,
			"policies": [{"name": "plan", "algorithm": "fixed", "limit": "code:plans"}]}`
		rs := nethttp.Resolvers{Limit: map[string]func(*http.Request) (nethttp.Limit, bool){
			"plans": func(*http.Request) (nethttp.Limit, bool) { return nethttp.Limit{Limit: 0, Window: time.Minute}, true },
		}}
		mw, err := nethttp.New(rdb, nethttp.Bytes([]byte(doc)), nethttp.Register(rs), nethttp.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		if resp := get(t, mw.Handler(exampleapp.OK), "/"); resp.StatusCode != 503 {
			t.Fatalf("status %d, want fail: closed's 503 for a limit of 0", resp.StatusCode)
		}
		if n, _ := rdb.DBSize(ctx).Result(); n != 0 {
			t.Fatalf("%d keys written for a limit the resolver got wrong", n)
		}
		var ce *nethttp.ConfigError
		bad := `{"mode": "code:switch", "policies": [{"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}]}`
		if err := mw.Reload(nethttp.Bytes([]byte(bad))); !errors.As(err, &ce) || ce.Field != "mode" {
			t.Fatalf("%v, want the unregistered mode resolver refused", err)
		}
	})

	t.Run("a queued request whose client leaves gives its turn back", func(t *testing.T) {
		rdb.FlushAll(ctx)
		mw, err := nethttp.New(rdb, nethttp.Config{ExemptLoopback: nethttp.Ptr(false), Timeout: "2s",
			Policies: []nethttp.Policy{{Name: "t", Algorithm: "token", Limit: 1, Window: "1s", Queue: "3s"}}},
			nethttp.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(mw.Handler(exampleapp.OK))
		defer s.Close()
		get(t, mw.Handler(exampleapp.OK), "/") // the token
		gone, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(gone, "GET", s.URL+"/", nil)
		if resp, err := s.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("status %d before its turn (about 1 s)", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond) // the server sees the client go and refunds
		start := time.Now()
		if resp := get(t, mw.Handler(exampleapp.OK), "/"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// Its turn is the next token (about 0.7 s away), not the one after
		// the abandoned reservation (about 1.7 s).
		if took := time.Since(start); took > 1300*time.Millisecond {
			t.Fatalf("waited %v: the abandoned turn was not given back", took)
		}
	})

	t.Run("a YAML file, and policies attached in code", func(t *testing.T) {
		rdb.FlushAll(ctx)
		path := filepath.Join(t.TempDir(), "policies.yaml")
		yaml := "exempt_loopback: false\npolicies:\n  - {name: one, algorithm: fixed, limit: 1, window: 1m}\n" +
			"  - {name: two, algorithm: sliding, rate: 2/minute}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		mw, err := nethttp.New(rdb, nethttp.File(path), nethttp.DenyHeaders(http.Header{"X-Rate-Policy": {"standard-tier"}}))
		if err != nil {
			t.Fatal(err)
		}
		two, err := mw.Policies("two")
		if err != nil {
			t.Fatal(err)
		}
		h := two(exampleapp.OK)
		for _, want := range []int{200, 200, 429} {
			resp := get(t, h, "/")
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
			if (resp.Header.Get("X-Rate-Policy") == "standard-tier") != (want == 429) {
				t.Fatalf("deny headers: %v", resp.Header)
			}
		}
		if resp := get(t, h, "/"); resp.Header.Get("RateLimit-Policy") != `"two";q=2;w=60` {
			t.Fatalf("%v", resp.Header)
		}
		if _, err := mw.Policies("two", "three"); err == nil || !strings.Contains(err.Error(), "Policies[1]") {
			t.Fatalf("%v", err)
		}
	})

	t.Run("start-up errors", func(t *testing.T) {
		var ce *nethttp.ConfigError
		_, err := nethttp.New(rdb, nethttp.Config{Fail: "local", LocalMaxKeys: -1, Policies: []nethttp.Policy{{Name: "p", Algorithm: "fixed", Limit: 1, Window: "1s"}}})
		if !errors.As(err, &ce) || ce.Field != "local_max_keys" {
			t.Fatalf("%v", err)
		}
		_, err = nethttp.New(rdb, nethttp.Config{Policies: []nethttp.Policy{{Name: "p", Algorithm: "fixed", Limit: 1, Window: "1s", Cost: "lots"}}})
		if !errors.As(err, &ce) || ce.Field != "policies[0].cost" {
			t.Fatalf("%v", err)
		}
		if _, err = nethttp.New(rdb, nethttp.File("/nonexistent/policies.yaml")); err == nil {
			t.Fatal("a missing file was accepted")
		}
		if _, err = nethttp.New(rdb, nethttp.Bytes([]byte("policies: [\n"))); err == nil {
			t.Fatal("broken YAML was accepted")
		}
		if _, err = nethttp.New(nil, nethttp.Bytes([]byte("policies: []"))); err == nil {
			t.Fatal("a nil client was accepted")
		}
		if _, err = nethttp.New(rdb, nil); err == nil {
			t.Fatal("a nil source was accepted")
		}
	})
}

// count: failed refunds what the handler answered below 400, a connection
// upgrade (101) included, and the writer still flushes and hijacks.
func TestRefundWriterPassesFlushAndHijack(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("valkey9"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	mw, err := nethttp.New(rdb, nethttp.Bytes([]byte(
		"exempt_loopback: false\npolicies: [{name: f, algorithm: fixed, limit: 5, window: 1m, count: failed}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upgrade" {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n")
			_ = buf.Flush()
			_ = conn.Close()
			return
		}
		_, _ = w.Write([]byte("part"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Error(err)
		}
	}))
	s := httptest.NewServer(h)
	defer s.Close()
	for _, path := range []string{"/", "/upgrade"} {
		resp, err := s.Client().Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	got, err := rdb.Do(ctx, "RL.FIXED", "rl:{ip:127.0.0.1}:f", "5", "60", "COST", "0").Int64Slice()
	if err != nil || got[1] != 0 {
		t.Fatalf("count %v (%v): both successes should have been refunded", got, err)
	}
}

// AutoPipelining needs a client with an auto-pipeliner: a Ring is refused
// at start-up.
func TestAutoPipeliningRefusesARing(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	_, err := nethttp.New(ring, nethttp.Bytes([]byte(`{"policies": [{"name": "p", "limit": 1, "window": "1s"}]}`)),
		nethttp.AutoPipelining())
	if !errors.Is(err, redis.ErrRingAutoPipelineUnsupported) || !strings.Contains(err.Error(), "nethttp.AutoPipelining") {
		t.Fatalf("got %v, want go-redis's ErrRingAutoPipelineUnsupported, naming the option", err)
	}
}

// PipelinedConnection takes a standalone client's own connection, rides
// a cluster client's auto-pipeliner, and is refused on a Ring and on a
// client whose OnConnect hook it could not run, naming the option.
func TestPipelinedConnectionRefusesWhatItCannotServe(t *testing.T) {
	config := nethttp.Bytes([]byte(`{"policies": [{"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}]}`))
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	_, err := nethttp.New(ring, config, nethttp.PipelinedConnection())
	if !errors.Is(err, redis.ErrRingAutoPipelineUnsupported) || !strings.Contains(err.Error(), "nethttp.PipelinedConnection") {
		t.Fatalf("a Ring: %v, want go-redis's ErrRingAutoPipelineUnsupported, naming the option", err)
	}
	hooked := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", OnConnect: func(context.Context, *redis.Conn) error { return nil }})
	t.Cleanup(func() { _ = hooked.Close() })
	_, err = nethttp.New(hooked, config, nethttp.PipelinedConnection())
	if err == nil || !strings.Contains(err.Error(), "nethttp.PipelinedConnection") || !strings.Contains(err.Error(), "OnConnect") {
		t.Fatalf("an OnConnect hook: %v, want an error naming the option and the hook", err)
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	mw, err := nethttp.New(cluster, config, nethttp.PipelinedConnection())
	if err != nil {
		t.Fatalf("a cluster client: %v, want its auto-pipeliner", err)
	}
	_ = mw.Close()
}
