package librl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// While a populated slot migrates, the cluster answers TRYAGAIN to a call
// whose keys are partly on each side: an OVERRIDE key that is never set,
// an RL.ALL whose per-second key expires between calls while its
// per-hour key lives on (docs/operations.md, Redis Cluster). Such a call
// cannot run anywhere until the slot has moved. Calls of both kinds, and
// durable ones, go on through a slow migration of thousands of keys: none
// fails, none waits longer than the migration lasts (plus one backoff),
// and afterwards every key counts exactly the calls that were admitted.
// Then a migration that stalls half-way: a call gives up after its retry
// window or its context, whichever ends first, with the TRYAGAIN.
func TestCallsKeepWorkingWhileTheirSlotMigrates(t *testing.T) {
	for _, name := range []string{"redis7", "valkey9"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testserver.StartCluster(t, testserver.ByName(name))
			cc := c.Client()
			attempts := &countingHook{}
			cc.AddHook(attempts)
			// A retry window no loaded test machine reaches: the bound
			// checked is the migration's own length.
			l := librl.New(cc).WithTryAgainWait(time.Minute)
			durable, err := l.WithDurability(1, 5*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			const tag = "{migrating}"
			slot := librl.Slot(tag)
			from := c.Owner(slot)
			to := c.Nodes[0]
			if to == from {
				to = c.Nodes[1]
			}
			// Thousands of keys, so that the slot takes seconds to move.
			const fill = 3000
			pipe := cc.Pipeline()
			for i := range fill {
				pipe.Set(ctx, fmt.Sprintf("%s:fill:%d", tag, i), "x", 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}

			const workers = 2
			calls := []struct {
				name string
				call func(ctx context.Context, w int) (bool, error)
				// count reads what key w counted.
				count func(w int) int64
			}{
				{"override never set", func(ctx context.Context, w int) (bool, error) {
					d, err := l.Fixed(ctx, fmt.Sprintf("%s:o:%d", tag, w), 1<<40, time.Hour, librl.Override(tag+":no-override"))
					return d.Allowed, err
				}, func(w int) int64 {
					return dec(t)(l.Fixed(ctx, fmt.Sprintf("%s:o:%d", tag, w), 1<<40, time.Hour, librl.Cost(0))).Count
				}},
				{"all over keys of different ages", func(ctx context.Context, w int) (bool, error) {
					a, err := l.All(ctx,
						librl.Fixed(fmt.Sprintf("%s:a:%d:hour", tag, w), 1<<40, time.Hour),
						librl.Fixed(fmt.Sprintf("%s:a:%d:second", tag, w), 1<<40, 50*time.Millisecond))
					return a.Allowed, err
				}, func(w int) int64 {
					return dec(t)(l.Fixed(ctx, fmt.Sprintf("%s:a:%d:hour", tag, w), 1<<40, time.Hour, librl.Cost(0))).Count
				}},
				{"durable, override never set", func(ctx context.Context, w int) (bool, error) {
					d, err := durable.Sliding(ctx, fmt.Sprintf("%s:d:%d", tag, w), 1<<40, time.Hour, librl.Override(tag+":no-override"))
					// These primaries have no replica: every decision is NOTDURABLE.
					var de *librl.DurabilityError
					if errors.As(err, &de) {
						err = nil
					}
					return d.Allowed, err
				}, func(w int) int64 {
					return dec(t)(l.Sliding(ctx, fmt.Sprintf("%s:d:%d", tag, w), 1<<40, time.Hour, librl.Cost(0))).Count
				}},
			}
			type tally struct {
				admitted, calls, errors atomic.Int64
				maxLatency              atomic.Int64
				firstError              atomic.Value
			}
			tallies := make([][workers]tally, len(calls))
			// Every key exists before the slot starts moving.
			for i, k := range calls {
				for w := range workers {
					if ok, err := k.call(ctx, w); err != nil || !ok {
						t.Fatalf("%s: %v %v", k.name, ok, err)
					}
					tallies[i][w].admitted.Add(1)
				}
			}
			c.ResetStats()
			attempts.n.Store(0)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i, k := range calls {
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						tl := &tallies[i][w]
						for {
							select {
							case <-stop:
								return
							default:
							}
							start := time.Now()
							ok, err := k.call(ctx, w)
							took := time.Since(start)
							tl.calls.Add(1)
							if ms := took.Microseconds(); ms > tl.maxLatency.Load() {
								tl.maxLatency.Store(ms)
							}
							switch {
							case err != nil:
								tl.errors.Add(1)
								tl.firstError.CompareAndSwap(nil, err.Error())
							case ok:
								tl.admitted.Add(1)
							}
							time.Sleep(2 * time.Millisecond)
						}
					}()
				}
			}
			started := time.Now()
			c.MigrateSlot(slot, to, 50, 20*time.Millisecond)
			took := time.Since(started)
			time.Sleep(100 * time.Millisecond)
			close(stop)
			wg.Wait()

			stats := c.Stats()
			// hooked: the calls the client's hook sees once per attempt (the
			// durable ones go to the node's own client, in a pipeline).
			var total, hooked, errs int64
			var maxLatency time.Duration
			var report []string
			for i, k := range calls {
				var kc, ke int64
				var kmax time.Duration
				for w := range workers {
					tl := &tallies[i][w]
					kc += tl.calls.Load()
					ke += tl.errors.Load()
					kmax = max(kmax, time.Duration(tl.maxLatency.Load())*time.Microsecond)
					if first := tl.firstError.Load(); first != nil && w == 0 {
						report = append(report, fmt.Sprintf("%s: first error %v", k.name, first))
					}
				}
				total += kc
				if !strings.HasPrefix(k.name, "durable") {
					hooked += kc
				}
				errs += ke
				maxLatency = max(maxLatency, kmax)
				report = append(report, fmt.Sprintf("%s: %d calls, %d errors, max %v", k.name, kc, ke, kmax.Round(time.Millisecond)))
			}
			t.Logf("slot %d (%d keys) moved in %v; TRYAGAIN %d, ASK %d, MOVED %d; %d calls, %d errors, max latency %v; "+
				"the package sent %d retries for its %d non-durable calls\n%s",
				slot, fill, took.Round(time.Millisecond), stats["tryagain"], stats["ask"], stats["moved"], total, errs,
				maxLatency.Round(time.Millisecond), attempts.n.Load()-hooked, hooked, strings.Join(report, "\n"))
			if errs != 0 {
				t.Errorf("%d calls failed", errs)
			}
			// Past the migration's end a call may still sleep out one
			// backoff of the package's (100 ms at most) and go-redis's own
			// pauses between its three retries (about 110 ms at most).
			if maxLatency > took+500*time.Millisecond {
				t.Errorf("a call took %v, the migration %v", maxLatency, took)
			}
			// Exact afterwards: each key counted the calls it admitted.
			for i, k := range calls {
				for w := range workers {
					if got, want := k.count(w), tallies[i][w].admitted.Load(); got != want {
						t.Errorf("%s, worker %d: the key counts %d, %d calls were admitted", k.name, w, got, want)
					}
				}
			}

			// A migration left half-way: the call fails after its retry
			// window, with the TRYAGAIN, or when its context ends if sooner.
			abort := c.OpenMigration(slot, from)
			defer abort()
			for _, wait := range []struct {
				limiter *librl.Limiter
				context time.Duration
				fails   time.Duration
			}{
				{l.WithTryAgainWait(300 * time.Millisecond), time.Minute, 300 * time.Millisecond},
				{l, 200 * time.Millisecond, 200 * time.Millisecond},
			} {
				cctx, cancel := context.WithTimeout(ctx, wait.context)
				start := time.Now()
				_, err := wait.limiter.Fixed(cctx, tag+":o:0", 1<<40, time.Hour, librl.Override(tag+":no-override"))
				took := time.Since(start)
				cancel()
				// The context may end in go-redis's own pause between its retries.
				var le *librl.Error
				var re redis.Error
				tryAgain := errors.As(err, &re) && strings.HasPrefix(re.Error(), "TRYAGAIN")
				if !errors.As(err, &le) || !(tryAgain || (wait.context < time.Minute && errors.Is(err, context.DeadlineExceeded))) {
					t.Fatalf("a stalled migration: %T %v after %v (context %v)", err, err, took, wait.context)
				}
				t.Logf("a stalled migration: gave up after %v (window %v, context %v)", took.Round(time.Millisecond), wait.fails, wait.context)
				if took < wait.fails-maxBackoff || took > wait.fails+250*time.Millisecond {
					t.Errorf("gave up after %v, want about %v", took, wait.fails)
				}
			}
			// Off: go-redis's own three retries, then the TRYAGAIN.
			start := time.Now()
			if _, err := l.WithTryAgainWait(0).Fixed(ctx, tag+":o:0", 1<<40, time.Hour, librl.Override(tag+":no-override")); err == nil ||
				time.Since(start) > time.Second {
				t.Errorf("WithTryAgainWait(0): %v after %v", err, time.Since(start))
			}
		})
	}
}

// maxBackoff is the package's longest pause between two retries.
const maxBackoff = 100 * time.Millisecond

// countingHook counts the commands a client is asked to process.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "rl.") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
