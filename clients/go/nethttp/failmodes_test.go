package nethttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// stallSecondAll is a go-redis hook holding back the second RL.ALL a
// client sends, so that a request's first group is admitted and its second
// answers after the timeout.
type stallSecondAll struct {
	n     atomic.Int32
	delay time.Duration
	done  chan struct{} // closed once the stalled call has its answer
}

func (*stallSecondAll) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*stallSecondAll) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *stallSecondAll) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.EqualFold(cmd.Name(), "RL.ALL") || h.n.Add(1) != 2 {
			return next(ctx, cmd)
		}
		time.Sleep(h.delay)
		defer close(h.done)
		return next(ctx, cmd)
	}
}

// Redis failing between a request's groups (docs/http.md, Fail modes): a
// request that is served stays counted (fail: open keeps the admitted
// group), a request that is refused is counted by no policy (fail: closed
// refunds it before the 503). With a client that ends a call at its
// context's deadline, a fail: open exchange stops at the timeout: the
// stalled group is never sent.
func TestFailureInTheMiddleOfTheExchange(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("valkey9"))
	runner := srv.Client()
	const first, second = "rl:{global}:first", "rl:{header:x-tenant:acme}:second"
	count := func(t *testing.T, key string) int64 {
		t.Helper()
		got, err := runner.Do(ctx, "RL.FIXED", key, "10", "60", "COST", "0").Int64Slice()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return got[1]
	}
	for _, failure := range []string{"error", "timeout", "timeout-at-deadline"} {
		for _, mode := range []string{"open", "closed"} {
			t.Run(failure+"/"+mode, func(t *testing.T) {
				if err := runner.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				deadlines := failure == "timeout-at-deadline"
				app := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: deadlines})
				t.Cleanup(func() { _ = app.Close() })
				const timeout = 100 * time.Millisecond
				stall := &stallSecondAll{delay: 3 * timeout, done: make(chan struct{})}
				if failure == "error" {
					// A plain string where the second group's limiter lives.
					runner.Set(ctx, second, "not a limiter", 0)
				} else {
					app.AddHook(stall)
				}
				doc := fmt.Sprintf(`{"fail": %q, "timeout": "%dms", "exempt_loopback": false, "policies": [
					{"name": "first", "algorithm": "fixed", "limit": 10, "window": "60s", "key": "global"},
					{"name": "second", "algorithm": "fixed", "limit": 10, "window": "60s", "key": "header:X-Tenant"}]}`,
					mode, timeout.Milliseconds())
				outcomes := make(chan nethttp.Outcome, 1)
				mw, err := nethttp.New(app, nethttp.Bytes([]byte(doc)), nethttp.Logger(quietLogger()),
					nethttp.OnDecision(func(e nethttp.DecisionEvent) { outcomes <- e.Outcome }))
				if err != nil {
					t.Fatal(err)
				}
				s := httptest.NewServer(mw.Handler(exampleapp.OK))
				defer s.Close()
				req, _ := http.NewRequest("GET", s.URL+"/", nil)
				req.Header.Set("X-Tenant", "acme")
				resp, err := s.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want, kept, wantOutcome := 200, int64(1), nethttp.FailOpen
				if mode == "closed" {
					want, kept, wantOutcome = 503, 0, nethttp.FailClosed
				}
				if outcome := <-outcomes; resp.StatusCode != want || outcome != wantOutcome {
					t.Fatalf("status %d (%s), want %d (%s)", resp.StatusCode, outcome, want, wantOutcome)
				}
				// Read as the response went out: the refund came before it.
				if got := count(t, first); got != kept {
					t.Fatalf("%s counts %d, want %d", first, got, kept)
				}
				if failure != "error" {
					// The stalled group is admitted late: kept when the request
					// was served, refunded when it was refused; or, served at
					// the deadline, never sent.
					if deadlines && mode == "open" {
						kept = 0
					}
					select {
					case <-stall.done:
					case <-time.After(10 * time.Second):
						t.Fatal("the stalled RL.ALL never finished")
					}
					deadline := time.Now().Add(5 * time.Second)
					for count(t, second) != kept && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(timeout) // and nothing changes it after
					if got := count(t, second); got != kept {
						t.Fatalf("%s counts %d, want %d", second, got, kept)
					}
				}
			})
		}
	}
}

// fail: local (docs/http.md, Fail modes) with Redis down: the hook sees
// the local decisions, a concurrency policy's local slot is released when
// the response is finished, and the limit holds in the process.
func TestFailLocalDecidesInTheProcess(t *testing.T) {
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + fmt.Sprint(testserver.FreePort(t, false)), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	var events []nethttp.DecisionEvent
	mw, err := nethttp.New(down, nethttp.Bytes([]byte(`{"fail": "local", "timeout": "100ms", "exempt_loopback": false,
		"policies": [{"name": "p", "algorithm": "fixed", "limit": 3, "window": "60s"},
		             {"name": "c", "algorithm": "concurrency", "limit": 1, "lease": "60s"}]}`)),
		nethttp.Logger(quietLogger()), nethttp.OnDecision(func(e nethttp.DecisionEvent) { events = append(events, e) }))
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(mw.Handler(exampleapp.OK))
	defer s.Close()
	for i, want := range []int{200, 200, 200, 429} {
		resp, err := s.Client().Get(s.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The second and third get the one slot back from the one before.
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if len(events) != 4 || !events[0].Local || events[0].Outcome != nethttp.Allowed || events[3].Outcome != nethttp.Denied ||
		events[3].Checks[0].Decision == nil || events[3].Err != nil {
		t.Fatalf("%+v", events)
	}
}
