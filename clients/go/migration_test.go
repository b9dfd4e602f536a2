package librl_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// A slot of 20,000 limiter keys moves while one caller per kind of call
// calls in it through the package (docs/contributing.md, Calls while a
// slot moves): key by key on Redis 7.0 and Valkey 9, then back atomically
// on Valkey 9. A half-moved slot answers TRYAGAIN to a call naming a key
// that exists nowhere (an override never set, an RL.ALL clause whose key
// expired) for as long as it is half moved; the package sends such a call
// again as one-key calls. No call fails, none comes near the package's
// retry window, and every subject counts exactly the calls admitted.
func TestCallsKeepWorkingWhileTheirSlotMoves(t *testing.T) {
	for _, name := range []string{"redis7", "valkey9"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testserver.StartCluster(t, testserver.ByName(name))
			const tag = "{hot}"
			slot := librl.Slot(tag)
			home := c.Owner(slot)
			away := c.Elsewhere(slot)
			c.FillSlot(tag, slot, 20_000)
			cc := c.Client()
			l := librl.New(cc)
			defer l.Close()
			if err := l.OverrideSet(ctx, tag+":plan", 1<<40, time.Hour); err != nil {
				t.Fatal(err)
			}
			callers := movingCallers(t, l, tag)
			for _, k := range callers {
				k.once(ctx) // each subject exists before the slot moves
				if k.errs.Load() != 0 || k.admitted.Load() != 1 {
					t.Fatalf("%s: %v", k.name, k.firstErr.Load())
				}
			}
			moves := []struct {
				name string
				to   *testserver.Server
				move func() string
			}{{"key by key", away, func() string {
				return fmt.Sprintf("half moved for %v", c.MigrateSlot(slot, away, 100, 10*time.Millisecond).Round(time.Millisecond))
			}}}
			if name == "valkey9" {
				moves = append(moves, struct {
					name string
					to   *testserver.Server
					move func() string
				}{"atomically (CLUSTER MIGRATESLOTS)", home, func() string {
					start := time.Now()
					c.MigrateSlotAtomically(slot, home)
					return fmt.Sprintf("moved in %v", time.Since(start).Round(time.Millisecond))
				}})
			}
			for _, m := range moves {
				from := c.Owner(slot)
				c.ResetStats()
				for _, k := range callers {
					k.reset()
				}
				done := make(chan struct{})
				var wg sync.WaitGroup
				for _, k := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k.loop(done)
					}()
				}
				how := m.move()
				close(done) // each caller makes one more call, then stops
				wg.Wait()
				stats := c.Stats()
				report := []string{fmt.Sprintf("%s, slot %d %s: TRYAGAIN %d, ASK %d, MOVED %d",
					m.name, slot, how, stats["tryagain"], stats["ask"], stats["moved"])}
				for _, k := range callers {
					report = append(report, k.String())
					if n := k.errs.Load(); n != 0 {
						t.Errorf("%s, %s: %d errors, the first %v", m.name, k.name, n, k.firstErr.Load())
					}
					if slowest := time.Duration(k.slowest.Load()); slowest >= librl.DefaultTryAgainWait {
						t.Errorf("%s, %s: a call took %v", m.name, k.name, slowest)
					}
					if err := k.exact(k.admitted.Load()); err != nil {
						t.Errorf("%s, %s: %v", m.name, k.name, err)
					}
				}
				t.Log(strings.Join(report, "\n    "))
				if n := from.Client().ClusterCountKeysInSlot(ctx, slot).Val(); n != 0 {
					t.Errorf("%s: %d keys left on the source", m.name, n)
				}
				if n := m.to.Client().ClusterCountKeysInSlot(ctx, slot).Val(); n < 20_000 {
					t.Errorf("%s: %d keys on the target", m.name, n)
				}
			}

			// A move left half-way (a resharding that stopped): every kind
			// of call runs, split where it names several keys.
			stuck := c.Nodes[0]
			if stuck == c.Owner(slot) {
				stuck = c.Nodes[1]
			}
			abort := c.OpenMigration(slot, stuck)
			defer abort()
			for _, k := range callers {
				k.reset()
				k.once(ctx)
				if k.errs.Load() != 0 {
					t.Errorf("a stalled move, %s: %v", k.name, k.firstErr.Load())
				}
			}
			if n, err := l.OverrideDel(ctx, tag+":plan", tag+":none"); err != nil || n != 1 {
				t.Errorf("a stalled move, OverrideDel of two keys: %d %v", n, err)
			}
		})
	}
}

// caller calls one kind of call in a loop and keeps its figures.
type caller struct {
	name string
	call func(ctx context.Context) (bool, error)
	// exact checks the subject against the calls admitted.
	exact func(admitted int64) error

	calls, admitted, errs atomic.Int64
	slowest, longestGap   atomic.Int64 // ns
	firstErr              atomic.Value
	errKinds              sync.Map // first word of the error -> *atomic.Int64
}

func (k *caller) reset() {
	k.calls.Store(0)
	k.errs.Store(0)
	k.slowest.Store(0)
	k.longestGap.Store(0)
	k.firstErr = atomic.Value{}
	k.errKinds = sync.Map{}
}

func (k *caller) once(ctx context.Context) bool {
	start := time.Now()
	ok, err := k.call(ctx)
	took := time.Since(start)
	k.calls.Add(1)
	for s := k.slowest.Load(); int64(took) > s && !k.slowest.CompareAndSwap(s, int64(took)); s = k.slowest.Load() {
	}
	if err != nil {
		k.errs.Add(1)
		k.firstErr.CompareAndSwap(nil, err.Error())
		word := strings.Fields(strings.TrimPrefix(err.Error(), "librl: "))
		n, _ := k.errKinds.LoadOrStore(strings.Join(word[:min(2, len(word))], " "), &atomic.Int64{})
		n.(*atomic.Int64).Add(1)
		return false
	}
	if ok {
		k.admitted.Add(1)
	}
	return true
}

// loop calls until done is closed, then once more.
func (k *caller) loop(done <-chan struct{}) {
	lastOK := time.Now()
	for {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		if k.once(ctx) {
			if gap := time.Since(lastOK); int64(gap) > k.longestGap.Load() {
				k.longestGap.Store(int64(gap))
			}
			lastOK = time.Now()
		}
		if finished {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (k *caller) String() string {
	var kinds []string
	k.errKinds.Range(func(key, n any) bool {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", key, n.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(kinds)
	return fmt.Sprintf("%s: %d calls, %d errors %v, slowest %v, longest without success %v", k.name, k.calls.Load(),
		k.errs.Load(), kinds, time.Duration(k.slowest.Load()).Round(time.Millisecond),
		time.Duration(k.longestGap.Load()).Round(time.Millisecond))
}

// movingCallers are the kinds of call of docs/contributing.md's recipe
// (no override, an override never set, one that exists, an RL.ALL over a
// 1 h and a 300 ms key) and the package's own: a lease taken and released
// with an override never set, and a durable call (these primaries have no
// replica, so every durable decision comes NOTDURABLE, which is not an
// error here).
func movingCallers(t *testing.T, l *librl.Limiter, tag string) []*caller {
	const big = 1 << 40
	durable, err := l.WithDurability(1, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	counts := func(count func() int64) func(int64) error {
		return func(admitted int64) error {
			if n := count(); n != admitted {
				return fmt.Errorf("the subject counts %d, %d calls were admitted", n, admitted)
			}
			return nil
		}
	}
	read := func(key string) func(int64) error {
		return counts(func() int64 { return dec(t)(l.Fixed(ctx, key, big, time.Hour, librl.Cost(0))).Count })
	}
	fixed := func(key string, opts ...librl.Option) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			d, err := l.Fixed(ctx, key, big, time.Hour, opts...)
			return d.Allowed, err
		}
	}
	notDurable := func(err error) error {
		var de *librl.DurabilityError
		if errors.As(err, &de) {
			return nil
		}
		return err
	}
	return []*caller{
		{name: "no override", call: fixed(tag + ":plain"), exact: read(tag + ":plain")},
		{name: "override never set", call: fixed(tag+":unset", librl.Override(tag+":never")), exact: read(tag + ":unset")},
		{name: "override set", call: fixed(tag+":set", librl.Override(tag+":plan")), exact: read(tag + ":set")},
		{name: "all over a 1 h and a 300 ms key", call: func(ctx context.Context) (bool, error) {
			a, err := l.All(ctx, librl.Fixed(tag+":hour", big, time.Hour), librl.Fixed(tag+":300ms", big, 300*time.Millisecond))
			return a.Allowed, err
		}, exact: read(tag + ":hour")},
		{name: "lease, override never set", call: func(ctx context.Context) (bool, error) {
			x, err := l.Acquire(ctx, tag+":lease", 1000, time.Minute, librl.Override(tag+":never"))
			if err != nil || !x.Allowed {
				return false, err
			}
			if d, err := x.Release(ctx); err != nil || !d.Allowed {
				return false, fmt.Errorf("release: %+v %w", d, err)
			}
			return true, nil
		}, exact: func(int64) error {
			// Every lease taken was released.
			if n := acq(t)(l.Acquire(ctx, tag+":lease", 1000, time.Minute, librl.Cost(0))).Count; n != 0 {
				return fmt.Errorf("%d slots still held", n)
			}
			return nil
		}},
		{name: "durable, override never set", call: func(ctx context.Context) (bool, error) {
			d, err := durable.Sliding(ctx, tag+":durable", big, time.Hour, librl.Override(tag+":never"))
			return d.Allowed, notDurable(err)
		}, exact: counts(func() int64 {
			return dec(t)(l.Sliding(ctx, tag+":durable", big, time.Hour, librl.Cost(0))).Count
		})},
	}
}
