package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// The middleware keeps serving while the slot of its subject moves key by
// key (docs/operations.md, While a slot moves): its RL.ALL names an
// override that was never set, so the half-moved slot answers TRYAGAIN
// for the whole move, and the package splits the call. Requests go
// through a real listener from two clients at once; none fails (fail:
// closed would answer 503), each 429 is the 300 ms policy's with its
// Retry-After, no request outlasts the middleware's timeout, and the
// 1 h policy counts exactly the requests served.
func TestMiddlewareKeepsServingWhileItsSlotMoves(t *testing.T) {
	for _, name := range []string{"redis7", "valkey9"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testserver.StartCluster(t, testserver.ByName(name))
			const tag = "{ip:127.0.0.1}"
			slot := librl.Slot(tag)
			c.FillSlot(tag, slot, 20_000)
			cc := c.Client()
			// A second, not the default 250 ms: the split is what is tested,
			// and under the race detector on a loaded 2-core machine a
			// request's scheduling alone has taken 200 ms.
			const timeout = time.Second
			var failed atomic.Int64
			var firstErr atomic.Value
			mw, err := nethttp.New(cc, nethttp.Config{
				Fail:           "closed",
				Timeout:        timeout.String(),
				ExemptLoopback: nethttp.Ptr(false),
				Policies: []nethttp.Policy{
					{Name: "hour", Algorithm: "fixed", Limit: 1 << 40, Window: "1h", Key: "ip", Overridable: true},
					{Name: "burst", Algorithm: "fixed", Limit: 5, Window: "300ms", Key: "ip", Overridable: true},
				},
			}, nethttp.Logger(quietLogger()), nethttp.OnDecision(func(e nethttp.DecisionEvent) {
				if e.Err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, e.Err.Error())
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mw.Handler(exampleapp.OK))
			defer srv.Close()

			var served, refused, other atomic.Int64
			var slowest atomic.Int64 // ns
			request := func() {
				start := time.Now()
				resp, err := srv.Client().Get(srv.URL + "/")
				took := time.Since(start)
				for s := slowest.Load(); int64(took) > s && !slowest.CompareAndSwap(s, int64(took)); s = slowest.Load() {
				}
				switch {
				case err != nil:
					other.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					return
				case resp.StatusCode == http.StatusOK:
					served.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "1" &&
					resp.Header.Get("RateLimit-Policy") != "":
					refused.Add(1)
				default:
					other.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, headers %v", resp.StatusCode, resp.Header))
				}
				resp.Body.Close()
			}
			request() // the subject exists before the slot moves
			if served.Load() != 1 {
				t.Fatalf("the first request: %v", firstErr.Load())
			}
			served.Store(0)
			slowest.Store(0)

			c.ResetStats()
			done := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-done:
							request() // one more, on the slot's new owner
							return
						default:
						}
						request()
						time.Sleep(time.Millisecond)
					}
				}()
			}
			halfMoved := c.MigrateSlot(slot, c.Elsewhere(slot), 100, 10*time.Millisecond)
			close(done)
			wg.Wait()
			stats := c.Stats()
			total := served.Load() + refused.Load() + other.Load()
			t.Logf("slot %d half moved for %v: %d requests, %d served, %d refused (429), %d other, %d failed in the middleware, "+
				"slowest %v; TRYAGAIN %d, ASK %d, MOVED %d, RL.ALL %d, RL.OVERRIDE GET %d, RL.FIXED %d",
				slot, halfMoved.Round(time.Millisecond), total, served.Load(), refused.Load(), other.Load(), failed.Load(),
				time.Duration(slowest.Load()).Round(time.Millisecond), stats["tryagain"], stats["ask"], stats["moved"],
				stats["rl.all"], stats["rl.override|get"], stats["rl.fixed"])
			if other.Load() != 0 || failed.Load() != 0 {
				t.Errorf("%d responses neither 200 nor a 429, %d failed in the middleware, the first: %v",
					other.Load(), failed.Load(), firstErr.Load())
			}
			if refused.Load() == 0 {
				t.Error("no request met the 300 ms policy's limit: the denial path went untested")
			}
			if s := time.Duration(slowest.Load()); s >= timeout {
				t.Errorf("a request took %v, the middleware's timeout is %v", s, timeout)
			}
			if stats["tryagain"] == 0 && stats["rl.override|get"] == 0 {
				t.Error("no call met the half-moved slot")
			}
			l := librl.New(cc)
			defer l.Close()
			d, err := l.Fixed(ctx, "rl:"+tag+":hour", 1<<40, time.Hour, librl.Cost(0))
			if err != nil {
				t.Fatal(err)
			}
			// The first request and every one served during the move.
			if d.Count != served.Load()+1 {
				t.Errorf("the 1 h policy counts %d, %d requests were served", d.Count, served.Load()+1)
			}
		})
	}
}
