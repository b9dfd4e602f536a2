package librl_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// WithDurability: a call returns once the replica holds it; asking for more
// replicas than exist returns the decision with a *DurabilityError.
func TestDurabilityWaitsForTheReplica(t *testing.T) {
	primary := testserver.Start(t, testserver.ByName("valkey9"))
	replica := testserver.StartReplica(t, primary)
	l := librl.New(primary.Client())

	durable, err := l.WithDurability(1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		dec(t)(durable.Fixed(ctx, "d", 3, time.Minute))
		// Acknowledged: the replica already holds the same value.
		want := primary.Client().Dump(ctx, "d").Val()
		if got := replica.Client().Dump(ctx, "d").Val(); got != want {
			t.Fatalf("replica %q, primary %q", got, want)
		}
	}
	a, err := durable.All(ctx, librl.Token("{x}:t", 5, time.Second))
	if err != nil || !a.Allowed {
		t.Fatalf("%+v %v", a, err)
	}
	if err := durable.OverrideSet(ctx, "o", 5, time.Second); err != nil {
		t.Fatal(err)
	}

	tooMany, err := l.WithDurability(2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tooMany.Token(ctx, "t", 5, time.Second)
	var de *librl.DurabilityError
	if !errors.As(err, &de) || de.Acked != 1 || de.Wanted != 2 || !d.Allowed ||
		!strings.Contains(err.Error(), "NOTDURABLE the call reached 1 of 2 replicas within 100 ms") {
		t.Fatalf("%+v %v", d, err)
	}
	// What would wait forever, or for nobody, is refused.
	var ae *librl.ArgError
	for _, bad := range []struct {
		n int
		d time.Duration
	}{{0, time.Second}, {1, 0}, {1, 1500 * time.Microsecond}} {
		if _, err := l.WithDurability(bad.n, bad.d); !errors.As(err, &ae) {
			t.Errorf("WithDurability(%d, %v): %v", bad.n, bad.d, err)
		}
	}
	// A read waits for nothing.
	if _, err := tooMany.Token(ctx, "t", 5, time.Second, librl.Cost(0)); err != nil {
		t.Fatal(err)
	}
	// A server error is the call's error, not WAIT's.
	if _, err := durable.Fixed(ctx, "d", 0, time.Minute); err == nil || !strings.Contains(err.Error(), "RL.FIXED") {
		t.Fatal(err)
	}
}

// In a cluster, the durable path sends the call and WAIT to the owning
// primary on one connection, following MOVED after a slot moves. These
// primaries have no replica: every call is decided, and reported
// NOTDURABLE.
func TestDurabilityInACluster(t *testing.T) {
	c := testserver.StartCluster(t, testserver.ByName("redis7"))
	l, err := librl.New(c.Client()).WithDurability(1, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	key := "{d}:k"
	var de *librl.DurabilityError
	if d, err := l.Fixed(ctx, key, 10, time.Minute); !errors.As(err, &de) || de.Acked != 0 || d.Count != 1 {
		t.Fatalf("%+v %v", d, err)
	}
	slot := librl.Slot(key)
	to := c.Nodes[0]
	if c.Owner(slot) == to {
		to = c.Nodes[1]
	}
	c.MoveSlot(slot, to)
	if d, err := l.Fixed(ctx, key, 10, time.Minute); !errors.As(err, &de) || d.Count != 2 {
		t.Fatalf("%+v %v", d, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
