package librl_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// Every call goes straight to the owning primary: over many calls of every
// command (leases, their releases and a held call included) on a real
// 3-primary cluster, INFO shows no MOVED, no ASK and no
// COMMAND GETKEYS on any node; after a slot moves, one MOVED at most, then
// none again (a few while go-redis reloads its slot map in the background).
func TestClusterRoutesStraightToTheOwner(t *testing.T) {
	for _, name := range []string{"redis7", "valkey9"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testserver.StartCluster(t, testserver.ByName(name))
			l := librl.New(c.Client())
			defer l.Close()
			release := func(x *librl.Lease) {
				t.Helper()
				if d, err := x.Release(ctx); err != nil || !d.Allowed {
					t.Fatalf("%+v %v", d, err)
				}
			}
			plain := l
			round := func(i int) {
				t.Helper()
				user := fmt.Sprintf("user%d", i)
				dec(t)(l.Fixed(ctx, user+":f", 100, time.Minute))
				dec(t)(l.Sliding(ctx, "{"+user+"}:sl", 100, time.Minute, librl.Override("{"+user+"}:so")))
				dec(t)(l.Token(ctx, user+":t", 100, time.Minute))
				a, err := l.All(ctx,
					librl.Fixed("{"+user+"}:s", 10, time.Second),
					librl.Token("{"+user+"}:m", 100, time.Minute, librl.Override("{"+user+"}:o")),
					librl.Concurrent("{"+user+"}:cc", 5, time.Minute))
				if err != nil || !a.Allowed {
					t.Fatalf("%+v %v", a, err)
				}
				release(a.Lease(2))
				release(acq(t)(l.Acquire(ctx, "{"+user+"}:c", 5, time.Minute, librl.Override("{"+user+"}:co"))))
				// A slot is free, so the server answers at once; the call
				// goes through the Limiter's client for held calls.
				release(acq(t)(l.Acquire(ctx, user+":w", 5, time.Minute, librl.Wait(time.Second))))
				if err := l.OverrideSet(ctx, "{"+user+"}:o", 50, time.Minute); err != nil {
					t.Fatal(err)
				}
				if o, err := l.OverrideGet(ctx, "{"+user+"}:o"); err != nil || o == nil {
					t.Fatalf("%v %v", o, err)
				}
			}
			round(-1) // go-redis loads the slot map and COMMAND once
			c.ResetStats()
			const n = 60
			for i := range n {
				round(i)
			}
			s := c.Stats()
			if s["moved"] != 0 || s["ask"] != 0 || s["getkeys"] != 0 {
				t.Fatalf("steady state: %v", s)
			}
			for _, cmd := range []string{"rl.fixed", "rl.sliding", "rl.token", "rl.all", "rl.override|set", "rl.override|get"} {
				if s[cmd] != n {
					t.Errorf("%s: %d calls, want %d (%v)", cmd, s[cmd], n, s)
				}
			}
			// Two acquires and three releases a round.
			if s["rl.concurrent"] != 5*n {
				t.Errorf("rl.concurrent: %d calls, want %d (%v)", s["rl.concurrent"], 5*n, s)
			}
			// The same through the auto-pipeliner: straight to the owner too.
			var err error
			if l, err = plain.WithAutoPipelining(); err != nil {
				t.Fatal(err)
			}
			c.ResetStats()
			for i := range n {
				round(n + i)
			}
			if s := c.Stats(); s["moved"] != 0 || s["ask"] != 0 || s["getkeys"] != 0 || s["rl.all"] != n {
				t.Fatalf("steady state, auto-pipelined: %v", s)
			}
			l = plain
			deleted, err := l.OverrideDel(ctx, "{user1}:o", "{user2}:o", "{user3}:o")
			if err != nil || deleted != 3 {
				t.Fatalf("%d %v", deleted, err)
			}
			entries, err := l.OverrideScan(ctx)
			if err != nil || len(entries) != 2*n+1-3 {
				t.Fatalf("scan: %d entries, %v", len(entries), err)
			}
			if _, _, err := l.OverrideList(ctx, 0); err == nil {
				t.Fatal("OverrideList on a cluster must point to OverrideScan")
			}

			// A slot moves mid-run: the next call follows one MOVED, the
			// calls after it go straight to the new owner.
			key := "{user7}:s"
			slot := librl.Slot(key)
			from := c.Owner(slot)
			to := c.Nodes[0]
			if to == from {
				to = c.Nodes[1]
			}
			c.MoveSlot(slot, to)
			// go-redis follows each MOVED at once and reloads its slot map in
			// the background: calls made before the reload lands each meet
			// one MOVED. Then none: batches of 20 until one has no MOVED.
			deadline := time.Now().Add(10 * time.Second)
			for batch := 0; ; batch++ {
				c.ResetStats()
				for range 20 {
					if a, err := l.All(ctx, librl.Fixed(key, 1000, time.Second)); err != nil || !a.Allowed {
						t.Fatalf("%+v %v", a, err)
					}
				}
				s := c.Stats()
				if s["getkeys"] != 0 || s["moved"] > 20 {
					t.Fatalf("after the move: %v", s)
				}
				if batch == 0 {
					t.Logf("MOVED right after the slot moved: %d over 20 calls", s["moved"])
				}
				if s["moved"] == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still MOVED 10 s after the slot moved: %v", s)
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.ResetStats()
			for range 20 {
				dec(t)(l.Fixed(ctx, key+"x", 1000, time.Second))
				if _, err := l.All(ctx, librl.Fixed(key, 1000, time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if s := c.Stats(); s["moved"] != 0 || s["getkeys"] != 0 || s["rl.all"] != 20 {
				t.Fatalf("after the move: %v", s)
			}
		})
	}
}

func TestClusterRefusesKeysInTwoSlotsWithAHashTagHint(t *testing.T) {
	c := testserver.StartCluster(t, testserver.ByName("valkey9"))
	l := librl.New(c.Client())
	_, err := l.All(ctx, librl.Fixed("user42:min", 1, time.Minute), librl.Fixed("user42:day", 1, 24*time.Hour))
	var ae *librl.ArgError
	if !errors.As(err, &ae) || !contains(err.Error(), "hash tag") {
		t.Fatalf("%v", err)
	}
	_, err = l.Fixed(ctx, "a", 1, time.Minute, librl.Override("b"))
	if !errors.As(err, &ae) {
		t.Fatalf("%v", err)
	}
	if s := c.Stats(); s["rl.all"] != 0 || s["rl.fixed"] != 0 {
		t.Fatalf("sent anyway: %v", s)
	}
}
