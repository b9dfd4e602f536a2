package librl

import (
	"context"
	"testing"
	"time"

	"github.com/librl/librl/clients/go/internal/testserver"
)

// The one-key calls a TRYAGAIN falls back to (split.go) answer as the
// atomic call would: sent here directly (sendSplit), beside the atomic
// call on twin keys, on one server.
func TestSplitCallsAnswerAsTheAtomicCall(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.ByName("valkey9"))
	rdb := srv.Client()
	l := New(rdb)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	split := func(k call, err error) Decision {
		t.Helper()
		must(err)
		r, err := l.sendSplit(ctx, k)
		must(err)
		d, err := limiterDecision(r, len(k.leases) == 1)
		must(err)
		return d
	}
	splitAll := func(clauses ...Clause) AllDecision {
		t.Helper()
		k, err := allCall(clauses, false)
		must(err)
		if !k.splittable() {
			t.Fatalf("%v names one key", k.argv)
		}
		r, err := l.sendSplit(ctx, k)
		must(err)
		a, err := allDecisionFrom(r, k.leases)
		must(err)
		return a
	}
	count := func(c Clause) int64 {
		t.Helper()
		c.opts = nil
		k, err := limiterCall("", c, []Option{Cost(0)})
		must(err)
		e, err := l.decide(ctx, k)
		must(err)
		return e.one.Count
	}
	same := func(what string, atomic, split Decision) {
		t.Helper()
		if atomic.Allowed != split.Allowed || atomic.Count != split.Count || atomic.Limit != split.Limit ||
			atomic.Remaining != split.Remaining || (atomic.RetryAfter == Never) != (split.RetryAfter == Never) ||
			(atomic.LeaseID == 0) != (split.LeaseID == 0) {
			t.Errorf("%s: atomic %+v, split %+v", what, atomic, split)
		}
	}

	// An override is read and applied as the server applies it.
	must(l.OverrideSet(ctx, "{o}:plan", 5, time.Minute, Burst(7)))
	for _, c := range []Clause{
		Token("{o}:t", 1, time.Second, Override("{o}:plan")),
		Fixed("{o}:f", 1, time.Second, Override("{o}:plan")),
		Concurrent("{o}:c", 1, time.Second, Override("{o}:plan")),
		Fixed("{o}:none", 2, time.Second, Override("{o}:unset")),
	} {
		atomic, err := l.single(ctx, "", c, nil)
		must(err)
		twin := c
		twin.key += ":split"
		d := split(limiterCall("", twin, nil))
		same(c.algorithm+" "+c.key, atomic, d)
		if c.algorithm == "CONCURRENT" && d.ResetAfter <= time.Second {
			t.Errorf("the override's window is not the lease: %+v", d)
		}
	}

	// Admitted: every clause records, a lease is taken.
	clauses := func(p string) []Clause {
		return []Clause{
			Fixed(p+":f", 10, time.Minute),
			Concurrent(p+":c", 1, time.Minute),
			Token(p+":t", 10, time.Minute, Cost(4), Override(p+":unset")),
			Sliding(p+":s", 2, time.Minute),
		}
	}
	for round := range 3 {
		atomic, err := l.All(ctx, clauses("{a}")...)
		must(err)
		s := splitAll(clauses("{b}")...)
		if atomic.Allowed != s.Allowed || (atomic.RetryAfter > 0) != (s.RetryAfter > 0) {
			t.Fatalf("round %d: atomic %+v, split %+v", round, atomic, s)
		}
		for i := range atomic.Decisions {
			same("round "+string(rune('0'+round)), atomic.Decisions[i], s.Decisions[i])
		}
	}
	// The third round was denied (the lease is held): nothing stayed
	// counted by the split call's admitted clauses, no lease was left.
	for _, c := range clauses("{b}") {
		twin := c
		twin.key = "{a}" + c.key[3:]
		if got, want := count(c), count(twin); got != want {
			t.Errorf("%s: %d counted after the split calls, %d after the atomic ones", c.key, got, want)
		}
	}

	// Refund clauses run last, so a denial leaves nothing to undo.
	must(rdb.Do(ctx, "RL.FIXED", "{r}:full", 1, "1m").Err())
	must(rdb.Do(ctx, "RL.FIXED", "{r}:k", 5, "1m", "COST", 3).Err())
	if a := splitAll(Fixed("{r}:k", 5, time.Minute, Refund(2)), Fixed("{r}:full", 1, time.Minute)); a.Allowed || count(Fixed("{r}:k", 5, time.Minute)) != 3 {
		t.Fatalf("a denied call refunded: %+v", a)
	}
	if a := splitAll(Fixed("{r}:k", 5, time.Minute, Refund(2)), Fixed("{r}:other", 5, time.Minute)); !a.Allowed || count(Fixed("{r}:k", 5, time.Minute)) != 1 {
		t.Fatalf("%+v", a)
	}

	// A WAIT clause is held by the package until its turn.
	must(rdb.Do(ctx, "RL.TOKEN", "{w}:t", 10, "1s", "BURST", 1).Err())
	start := time.Now()
	a := splitAll(Token("{w}:t", 10, time.Second, Burst(1), Wait(time.Second)), Fixed("{w}:f", 10, time.Minute))
	if took := time.Since(start); !a.Allowed || a.RetryAfter != 0 || a.Decisions[0].RetryAfter != 0 || took < 90*time.Millisecond {
		t.Fatalf("%+v after %v", a, took)
	}
	// RESERVE is answered with the wait left.
	a = splitAll(Token("{w}:t", 10, time.Second, Burst(1), Reserve(time.Second)), Fixed("{w}:f", 10, time.Minute))
	if !a.Allowed || a.RetryAfter <= 0 || a.RetryAfter != a.Decisions[0].RetryAfter {
		t.Fatalf("%+v", a)
	}

	// A peek changes nothing.
	k, err := allCall([]Clause{Fixed("{p}:f", 1, time.Minute), Concurrent("{p}:c", 1, time.Minute)}, true)
	must(err)
	if _, err := l.sendSplit(ctx, k); err != nil || rdb.Exists(ctx, "{p}:f", "{p}:c").Val() != 0 {
		t.Fatalf("peek wrote: %v", err)
	}

	// Monitor mode: a clause that would deny answers allowed with its
	// retry_after; the others are given back, as on would have them.
	must(rdb.ConfigSet(ctx, "rl.mode", "monitor").Err())
	a = splitAll(Fixed("{m}:f", 10, time.Minute), Fixed("{r}:full", 1, time.Minute))
	must(rdb.ConfigSet(ctx, "rl.mode", "on").Err())
	if !a.Allowed || a.RetryAfter <= 0 || count(Fixed("{m}:f", 10, time.Minute)) != 0 {
		t.Fatalf("monitor: %+v", a)
	}

	// A clause that fails (WRONGTYPE) fails the call, and the clauses
	// admitted before it are given back.
	must(rdb.Set(ctx, "{e}:str", "x", 0).Err())
	k, err = allCall([]Clause{Fixed("{e}:f", 10, time.Minute), Concurrent("{e}:c", 1, time.Minute), Fixed("{e}:str", 1, time.Minute)}, false)
	must(err)
	if _, err := l.sendSplit(ctx, k); err == nil || count(Fixed("{e}:f", 10, time.Minute)) != 0 || count(Concurrent("{e}:c", 1, time.Minute)) != 0 {
		t.Fatalf("a failed clause left the others counted: %v", err)
	}

	// RL.OVERRIDE DEL, one key at a time.
	must(l.OverrideSet(ctx, "{d}:1", 1, time.Second))
	must(l.OverrideSet(ctx, "{d}:2", 1, time.Second))
	r, err := l.sendSplit(ctx, overrideCall("DEL", []any{"RL.OVERRIDE", "DEL", "{d}:1", "{d}:2", "{d}:3"}, []string{"{d}:1", "{d}:2", "{d}:3"}, effectClearAll, true))
	if n, _ := r.(int64); err != nil || n != 2 {
		t.Fatalf("%v %v", r, err)
	}
}
