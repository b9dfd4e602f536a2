package librl_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// acq(t)(l.Acquire(...)) is the lease, the test failing on an error.
func acq(t *testing.T) func(*librl.Lease, error) *librl.Lease {
	return func(x *librl.Lease, err error) *librl.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

// held is the slots key holds now (an Acquire with Cost(0) reads them).
func held(t *testing.T, l *librl.Limiter, key string) int64 {
	t.Helper()
	return acq(t)(l.Acquire(ctx, key, 1000, time.Minute, librl.Cost(0))).Count
}

// RL.CONCURRENT's checks, run on the four servers by TestStandalone.
var concurrentChecks = []check{
	{"acquire takes leases up to the limit, release frees one at once, a refusal holds nothing", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		a := acq(t)(l.Acquire(ctx, "c", 2, 30*time.Second))
		b := acq(t)(l.Acquire(ctx, "c", 2, 30*time.Second))
		if !a.Allowed || !b.Allowed || a.LeaseID <= 0 || b.LeaseID <= a.LeaseID || b.LeaseID >= 1<<53 || b.Count != 2 || b.Remaining != 0 {
			t.Fatalf("%+v %+v", a.Decision, b.Decision)
		}
		if b.ResetAfter <= 29*time.Second || b.ResetAfter > 30*time.Second {
			t.Fatalf("reset after %v", b.ResetAfter)
		}
		refused := acq(t)(l.Acquire(ctx, "c", 2, 30*time.Second))
		if refused.Allowed || refused.LeaseID != 0 || refused.RetryAfter <= 29*time.Second || refused.Count != 2 {
			t.Fatalf("refused: %+v", refused.Decision)
		}
		sent := calls(t, rdb, "rl.concurrent")
		if d, err := refused.Release(ctx); err != nil || d != (librl.Decision{}) || calls(t, rdb, "rl.concurrent") != sent {
			t.Fatalf("a refused lease's Release sent something: %+v %v", d, err)
		}
		d, err := a.Release(ctx)
		if err != nil || !d.Allowed || d.Count != 1 || d.LeaseID != a.LeaseID {
			t.Fatalf("release: %+v %v", d, err)
		}
		sent = calls(t, rdb, "rl.concurrent")
		if again, err := a.Release(ctx); err != nil || again != d || calls(t, rdb, "rl.concurrent") != sent {
			t.Fatalf("a second Release sent again: %+v %v", again, err)
		}
		if c := acq(t)(l.Acquire(ctx, "c", 2, 30*time.Second)); !c.Allowed || c.LeaseID <= b.LeaseID {
			t.Fatalf("after the release: %+v", c.Decision)
		}
		if never := acq(t)(l.Acquire(ctx, "c", 2, 30*time.Second, librl.Cost(3))); never.Allowed || never.RetryAfter != librl.Never {
			t.Fatalf("cost above the limit: %+v", never.Decision)
		}
		var nothing *librl.Lease
		if d, err := nothing.Release(ctx); err != nil || d.Allowed {
			t.Fatalf("a nil lease: %+v %v", d, err)
		}
	}},
	{"release runs on a fresh context when the request's is done", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		gone, cancel := context.WithCancel(ctx)
		x := acq(t)(l.Acquire(gone, "c", 1, time.Minute))
		cancel() // the client went away; the deferred Release still frees the slot
		if d, err := x.Release(gone); err != nil || !d.Allowed || d.Count != 0 {
			t.Fatalf("%+v %v", d, err)
		}
		if n := held(t, l, "c"); n != 0 {
			t.Fatalf("%d slots still held", n)
		}
	}},
	{"renew extends a held lease; an ended or unknown one is not held", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		x := acq(t)(l.Acquire(ctx, "c", 3, time.Second))
		time.Sleep(100 * time.Millisecond)
		d, err := x.Renew(ctx)
		if err != nil || !d.Allowed || d.LeaseID != x.LeaseID || d.ResetAfter < 950*time.Millisecond {
			t.Fatalf("renew: %+v %v", d, err)
		}
		short := acq(t)(l.Acquire(ctx, "c", 3, 20*time.Millisecond))
		time.Sleep(40 * time.Millisecond)
		if d, err := short.Renew(ctx); !errors.Is(err, librl.ErrLeaseNotHeld) || d.Allowed || d.LeaseID != 0 {
			t.Fatalf("an ended lease renewed: %+v %v", d, err)
		}
		if d, err := short.Release(ctx); err != nil || d.Allowed {
			t.Fatalf("an ended lease released: %+v %v", d, err)
		}
		other, err := l.HeldLease("c", 3, time.Second, x.LeaseID+1000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Renew(ctx); !errors.Is(err, librl.ErrLeaseNotHeld) {
			t.Fatalf("an unknown id renewed: %v", err)
		}
		// The lease held by x, released through its id from elsewhere.
		same, err := l.HeldLease("c", 3, time.Second, x.LeaseID)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := same.Release(ctx); err != nil || !d.Allowed || d.Count != 0 {
			t.Fatalf("released by id: %+v %v", d, err)
		}
		if _, err := x.Renew(ctx); !errors.Is(err, librl.ErrLeaseNotHeld) {
			t.Fatalf("a lease released elsewhere renewed: %v", err)
		}
		if _, err := same.Renew(ctx); !errors.Is(err, librl.ErrLeaseNotHeld) {
			t.Fatalf("renewed after its own Release: %v", err)
		}
	}},
	{"keep alive holds a lease past its length until release", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		x := acq(t)(l.Acquire(ctx, "c", 2, 500*time.Millisecond))
		work, stop := x.KeepAlive(ctx)
		defer stop()
		time.Sleep(1100 * time.Millisecond) // over two lease lengths
		if work.Err() != nil || held(t, l, "c") != 1 {
			t.Fatalf("lost: %v, %d held", context.Cause(work), held(t, l, "c"))
		}
		if d, err := x.Release(ctx); err != nil || !d.Allowed || d.Count != 0 {
			t.Fatalf("%+v %v", d, err)
		}
		// Release stopped the renewals, not the work.
		sent := calls(t, rdb, "rl.concurrent")
		time.Sleep(400 * time.Millisecond) // two renewal periods
		if work.Err() != nil || calls(t, rdb, "rl.concurrent") != sent {
			t.Fatalf("renewed after the release: %v", context.Cause(work))
		}
		stop()
		if !errors.Is(context.Cause(work), context.Canceled) {
			t.Fatalf("stop: %v", context.Cause(work))
		}
	}},
	{"keep alive cancels the work when the lease is lost", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		x := acq(t)(l.Acquire(ctx, "c", 2, 300*time.Millisecond))
		work, stop := x.KeepAlive(ctx)
		defer stop()
		// An operator deletes the key: the next renewal finds no lease.
		lost := time.Now()
		rdb.Del(ctx, "c")
		select {
		case <-work.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("the work was not cancelled")
		}
		// The next renewal, a third of the lease later, finds it gone (2 s:
		// slack for a loaded machine, where a renewal can come late).
		if !errors.Is(context.Cause(work), librl.ErrLeaseNotHeld) || time.Since(lost) > 2*time.Second {
			t.Fatalf("%v after %v", context.Cause(work), time.Since(lost))
		}
		var ae *librl.ArgError
		if again, _ := x.KeepAlive(ctx); !errors.As(context.Cause(again), &ae) {
			t.Fatalf("a second KeepAlive: %v", context.Cause(again))
		}
		refused := acq(t)(l.Acquire(ctx, "full", 1, time.Minute, librl.Cost(2)))
		if w, _ := refused.KeepAlive(ctx); !errors.Is(context.Cause(w), librl.ErrLeaseNotHeld) {
			t.Fatalf("a refused lease kept alive: %v", context.Cause(w))
		}
		if _, err := refused.Renew(ctx); !errors.Is(err, librl.ErrLeaseNotHeld) {
			t.Fatalf("a refused lease renewed: %v", err)
		}
	}},
	{"keep alive stops with its context", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		x := acq(t)(l.Acquire(ctx, "c", 2, 300*time.Millisecond))
		parent, cancel := context.WithCancel(ctx)
		work, stop := x.KeepAlive(parent)
		defer stop()
		cancel()
		<-work.Done()
		sent := calls(t, rdb, "rl.concurrent")
		time.Sleep(250 * time.Millisecond) // over two renewal periods
		if calls(t, rdb, "rl.concurrent") != sent {
			t.Fatal("renewed after its context ended")
		}
		// Unrenewed, the lease may have ended by now: either way Release
		// is no error.
		if _, err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}},
	{"wait takes a slot as soon as a release frees one", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		x := acq(t)(l.Acquire(ctx, "c", 1, time.Minute))
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, _ = x.Release(ctx)
		}()
		start := time.Now()
		// Longer than the client's ReadTimeout: the wait has a connection of its own.
		w := acq(t)(l.Acquire(ctx, "c", 1, time.Minute, librl.Wait(10*time.Second)))
		if took := time.Since(start); !w.Allowed || w.LeaseID <= x.LeaseID || took < 90*time.Millisecond || took > 2*time.Second {
			t.Fatalf("%+v after %v", w.Decision, took)
		}
		start = time.Now()
		late := acq(t)(l.Acquire(ctx, "c", 1, time.Minute, librl.Wait(150*time.Millisecond)))
		if took := time.Since(start); late.Allowed || late.LeaseID != 0 || took < 140*time.Millisecond {
			t.Fatalf("past its wait: %+v after %v", late.Decision, took)
		}
	}},
	{"a waiting call leaves the client's own connections free", func(t *testing.T, _ *librl.Limiter, rdb *redis.Client) {
		one := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, PoolSize: 1, PoolTimeout: time.Second})
		defer one.Close()
		l := librl.New(one)
		defer l.Close()
		x := acq(t)(l.Acquire(ctx, "c", 1, time.Minute))
		waited := make(chan *librl.Lease)
		go func() {
			w, err := l.Acquire(ctx, "c", 1, time.Minute, librl.Wait(5*time.Second))
			if err != nil {
				t.Error(err)
			}
			waited <- w
		}()
		time.Sleep(50 * time.Millisecond)
		// The client's one connection is free for other calls meanwhile.
		if d := dec(t)(l.Fixed(ctx, "f", 10, time.Minute)); !d.Allowed {
			t.Fatalf("%+v", d)
		}
		if _, err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if w := <-waited; w == nil || !w.Allowed {
			t.Fatal("the waiter was not served")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Closed: a Wait goes through the client, within its ReadTimeout.
		var ae *librl.ArgError
		if _, err := l.Acquire(ctx, "c", 1, time.Minute, librl.Wait(time.Minute)); !errors.As(err, &ae) {
			t.Fatalf("a wait past the ReadTimeout after Close: %v", err)
		}
	}},
	{"override, peek and cost 0 on a concurrency limit", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		if err := l.OverrideSet(ctx, "c:o", 3, time.Minute); err != nil {
			t.Fatal(err)
		}
		x := acq(t)(l.Acquire(ctx, "c", 1, time.Second, librl.Override("c:o")))
		if !x.Allowed || x.Limit != 3 || x.ResetAfter <= time.Second {
			t.Fatalf("%+v", x.Decision)
		}
		if d, err := x.Renew(ctx); err != nil || d.Limit != 3 {
			t.Fatalf("renew with the override: %+v %v", d, err)
		}
		p := acq(t)(l.Acquire(ctx, "c", 1, time.Second, librl.Override("c:o"), librl.Peek()))
		if !p.Allowed || p.LeaseID != 0 || p.Count != 2 {
			t.Fatalf("peek: %+v", p.Decision)
		}
		if n := held(t, l, "c"); n != 1 {
			t.Fatalf("peek took a slot: %d held", n)
		}
		acq(t)(l.Acquire(ctx, "untouched", 1, time.Second, librl.Peek()))
		if rdb.Exists(ctx, "untouched").Val() != 0 {
			t.Fatal("peek created a key")
		}
	}},
	{"all takes a concurrent clause's lease with the other limits", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		cl := l.WithDenialCache(nil)
		clauses := []librl.Clause{
			librl.Fixed("{u}:f", 10, time.Minute),
			librl.Concurrent("{u}:c", 1, time.Minute),
		}
		a, err := cl.All(ctx, clauses...)
		if err != nil || !a.Allowed || a.Decisions[1].LeaseID <= 0 || a.Lease(1).LeaseID != a.Decisions[1].LeaseID {
			t.Fatalf("%+v %v", a, err)
		}
		if a.Lease(0).LeaseID != 0 || a.Lease(7).LeaseID != 0 || a.Decisions[0].LeaseID != 0 {
			t.Fatal("a lease for a clause that takes none")
		}
		denied, err := cl.All(ctx, clauses...)
		if err != nil || denied.Allowed || denied.Lease(1).LeaseID != 0 || denied.Decisions[1].Allowed {
			t.Fatalf("%+v %v", denied, err)
		}
		if cl.Cache().Len() != 0 {
			t.Fatal("a denial with a concurrency clause was cached")
		}
		if d := dec(t)(cl.Fixed(ctx, "{u}:f", 10, time.Minute, librl.Cost(0))); d.Count != 1 {
			t.Fatalf("the denied call counted: %+v", d)
		}
		if d, err := a.Lease(1).Release(ctx); err != nil || !d.Allowed || d.Count != 0 {
			t.Fatalf("%+v %v", d, err)
		}
		if again, err := cl.All(ctx, clauses...); err != nil || !again.Allowed {
			t.Fatalf("after the release: %+v %v", again, err)
		}
		if p, err := cl.PeekAll(ctx, librl.Concurrent("{u}:c", 2, time.Minute)); err != nil || !p.Allowed || p.Lease(0).LeaseID != 0 {
			t.Fatalf("peek: %+v %v", p, err)
		}
	}},
	{"off mode admits without a lease, and nothing needs renewing", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		if err := rdb.ConfigSet(ctx, "rl.mode", "off").Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.ConfigSet(ctx, "rl.mode", "on")
		x := acq(t)(l.Acquire(ctx, "c", 1, 100*time.Millisecond))
		if !x.Allowed || x.LeaseID != 0 {
			t.Fatalf("%+v", x.Decision)
		}
		work, stop := x.KeepAlive(ctx)
		defer stop()
		if _, err := x.Renew(ctx); err != nil || work.Err() != nil {
			t.Fatalf("%v %v", err, context.Cause(work))
		}
		if d, err := x.Release(ctx); err != nil || d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}},
	{"bad lease arguments are refused before sending", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		var ae *librl.ArgError
		for name, err := range map[string]error{
			"zero lease":         secondLease(l.Acquire(ctx, "c", 1, 0)),
			"sub-ms lease":       secondLease(l.Acquire(ctx, "c", 1, 1500*time.Microsecond)),
			"block":              secondLease(l.Acquire(ctx, "c", 1, time.Second, librl.Block(time.Second))),
			"refund":             secondLease(l.Acquire(ctx, "c", 1, time.Second, librl.Refund(1))),
			"reserve":            secondLease(l.Acquire(ctx, "c", 1, time.Second, librl.Reserve(time.Second))),
			"wait in a clause":   secondAll(l.All(ctx, librl.Concurrent("c", 1, time.Second, librl.Wait(time.Second)))),
			"peek in a clause":   secondAll(l.All(ctx, librl.Concurrent("c", 1, time.Second, librl.Peek()))),
			"id 0":               secondLease(l.HeldLease("c", 1, time.Second, 0)),
			"id 2^53":            secondLease(l.HeldLease("c", 1, time.Second, 1<<53)),
			"cost on held":       secondLease(l.HeldLease("c", 1, time.Second, 1, librl.Cost(1))),
			"zero lease on held": secondLease(l.HeldLease("c", 1, 0, 1)),
		} {
			if !errors.As(err, &ae) {
				t.Errorf("%s: %T %v", name, err, err)
			}
		}
		_, err := l.Acquire(ctx, "c", 0, time.Second)
		var le *librl.Error
		if !errors.As(err, &le) || !le.ServerError() {
			t.Fatalf("limit 0: %T %v", err, err)
		}
		rdb.Set(ctx, "str", "x", 0)
		if _, err := l.Acquire(ctx, "str", 1, time.Second); err == nil || !contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("%v", err)
		}
	}},
}

func secondLease(_ *librl.Lease, err error) error { return err }

// Goroutines acquiring with Wait and releasing through defer, at random:
// never more than the limit at once, every call served, nothing left
// held.
func TestLeasesNeverExceedTheLimit(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("valkey9"))
	l := librl.New(srv.Client())
	defer l.Close()
	const limit = 3
	var inFlight, most, served atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				func() {
					x, err := l.Acquire(ctx, "{pool}:upstream", limit, time.Minute, librl.Wait(5*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					defer x.Release(ctx)
					if !x.Allowed {
						t.Errorf("refused after waiting: %+v", x.Decision)
						return
					}
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					served.Add(1)
					time.Sleep(2 * time.Millisecond)
					inFlight.Add(-1)
				}()
			}
		}()
	}
	wg.Wait()
	if most.Load() > limit || served.Load() != 8*15 || held(t, l, "{pool}:upstream") != 0 {
		t.Fatalf("at most %d at once (limit %d), %d served, %d held", most.Load(), limit, served.Load(), held(t, l, "{pool}:upstream"))
	}
}
