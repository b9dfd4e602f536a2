package nethttp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// The `local` fail mode's limiter (docs/http.md, Fail modes), without
// Redis: librl-core's decisions (conformance/vectors/algorithms.json, run
// by TestVectors through vectorAlgorithm), all-or-nothing checks,
// concurrency slots, the key bound, and bad input refused before anything
// changes.

// vectorAlgorithm replays an algorithms.json sequence on one limiter,
// each call at its own now: the six integers of each reply.
func vectorAlgorithm(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Algorithm string     `json:"algorithm"`
		Limit     int64      `json:"limit"`
		WindowMs  int64      `json:"window_ms"`
		Aligned   bool       `json:"aligned"`
		Burst     int64      `json:"burst"`
		Calls     [][2]int64 `json:"calls"`
	}
	var want [][6]int64
	if err := json.Unmarshal(input, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(expect, &want); err != nil {
		t.Fatal(err)
	}
	local := newLocalLimiter(10)
	got := make([][6]int64, 0, len(in.Calls))
	for _, call := range in.Calls {
		c := localClause{key: "k", algorithm: in.Algorithm, limit: in.Limit, window: time.Duration(in.WindowMs) * time.Millisecond,
			aligned: in.Aligned, burst: in.Burst, cost: call[1]}
		all, err := local.checkAt([]localClause{c}, false, call[0])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sixOf(all.Decisions[0]))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// sixOf is a decision as the module's six integers.
func sixOf(d librl.Decision) [6]int64 {
	ms := func(v time.Duration) int64 {
		if v == librl.Never {
			return -1
		}
		return v.Milliseconds()
	}
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	return [6]int64{allowed, d.Count, ms(d.RetryAfter), d.Limit, d.Remaining, ms(d.ResetAfter)}
}

func fixedClause(key string, limit int64, window time.Duration) localClause {
	return localClause{key: key, algorithm: "fixed", limit: limit, window: window, cost: 1}
}

func slotsClause(key string, limit int64, lease time.Duration) localClause {
	return localClause{key: key, algorithm: "concurrency", limit: limit, window: lease, cost: 1}
}

func mustCheck(t *testing.T, l *localLimiter, nowMs int64, cs ...localClause) librl.AllDecision {
	t.Helper()
	all, err := l.checkAt(cs, false, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// peekCounts is each clause's count, recording nothing.
func peekCounts(t *testing.T, l *localLimiter, nowMs int64, cs ...localClause) []int64 {
	t.Helper()
	all, err := l.checkAt(cs, true, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(all.Decisions))
	for i, d := range all.Decisions {
		out[i] = d.Count
	}
	return out
}

func TestLocalARequestOneClauseRefusesIsCountedByNone(t *testing.T) {
	l := newLocalLimiter(100)
	minute, burst := fixedClause("m", 10, time.Minute), fixedClause("b", 1, 10*time.Second)
	if first := mustCheck(t, l, 1000, minute, burst); !first.Allowed || first.Decisions[0].Count != 1 || first.Decisions[1].Count != 1 {
		t.Fatalf("first: %+v", first)
	}
	for _, now := range []int64{1001, 2000, 3000} {
		all := mustCheck(t, l, now, minute, burst)
		if all.Allowed || !all.Decisions[0].Allowed || all.RetryAfter != all.Decisions[1].RetryAfter {
			t.Fatalf("at %d: %+v", now, all)
		}
	}
	if c := mustCheck(t, l, 3000, minute).Decisions[0].Count; c != 2 {
		t.Errorf("the minute clause counted %d, want 2", c)
	}
	if r := mustCheck(t, l, 10_999, minute, burst).RetryAfter; r != time.Millisecond {
		t.Errorf("retry after %v, want 1ms", r)
	}
	if !mustCheck(t, l, 11_000, minute, burst).Allowed {
		t.Error("refused after the burst window")
	}
}

func TestLocalTheLongestWaitAndNeverWin(t *testing.T) {
	l := newLocalLimiter(10)
	a, b := fixedClause("a", 1, time.Second), fixedClause("b", 1, 5*time.Second)
	mustCheck(t, l, 0, a, b)
	if r := mustCheck(t, l, 0, a, b).RetryAfter; r != 5*time.Second {
		t.Errorf("retry after %v, want 5s", r)
	}
	c := fixedClause("c", 1, time.Second)
	c.cost = 2
	if never := mustCheck(t, l, 0, a, c); never.RetryAfter != librl.Never || never.Decisions[1].Remaining != 1 {
		t.Errorf("%+v", never)
	}
}

func TestLocalPeekRecordsNothing(t *testing.T) {
	l := newLocalLimiter(10)
	for range 3 {
		if got := peekCounts(t, l, 0, fixedClause("k", 1, time.Second)); got[0] != 1 {
			t.Fatalf("count %d", got[0])
		}
	}
	if l.size() != 0 {
		t.Errorf("%d keys after peeks", l.size())
	}
}

func TestLocalEveryAlgorithmFillsThenRefuses(t *testing.T) {
	for _, tc := range []struct {
		c        localClause
		admitted int
	}{
		{fixedClause("f", 3, time.Minute), 3},
		{localClause{key: "s", algorithm: "sliding", limit: 3, window: time.Minute, cost: 1}, 3},
		{localClause{key: "a", algorithm: "approx", limit: 3, window: time.Minute, cost: 1}, 3},
		{localClause{key: "t", algorithm: "token", limit: 3, window: time.Minute, burst: 5, cost: 1}, 5},
		{slotsClause("c", 2, time.Minute), 2},
	} {
		l := newLocalLimiter(10)
		for i := range tc.admitted {
			if !mustCheck(t, l, 1000, tc.c).Allowed {
				t.Fatalf("%s: call %d refused", tc.c.algorithm, i)
			}
		}
		if all := mustCheck(t, l, 1000, tc.c); all.Allowed || all.Decisions[0].Remaining != 0 {
			t.Errorf("%s: %+v", tc.c.algorithm, all)
		}
	}
}

func TestLocalConcurrencySlotsAreHeldUntilReleasedOrEnded(t *testing.T) {
	l := newLocalLimiter(10)
	c := slotsClause("c", 2, 10*time.Second)
	a, b := mustCheck(t, l, 5, c).Decisions[0], mustCheck(t, l, 6, c).Decisions[0]
	if a.LeaseID != 5001 || b.LeaseID != 5002 {
		t.Fatalf("lease ids %d %d", a.LeaseID, b.LeaseID)
	}
	if full := mustCheck(t, l, 7, c).Decisions[0]; full.Allowed || full.LeaseID != 0 || full.RetryAfter != 9998*time.Millisecond {
		t.Fatalf("full: %+v", full)
	}
	if !l.releaseAt(c, a.LeaseID, 8) || l.releaseAt(c, a.LeaseID, 8) {
		t.Fatal("a lease is released once")
	}
	if d := mustCheck(t, l, 9, c).Decisions[0]; !d.Allowed || d.Count != 2 || d.LeaseID != 5003 {
		t.Fatalf("after the release: %+v", d)
	}
	if l.releaseAt(c, b.LeaseID, 10_006) {
		t.Error("a lease that ended was released")
	}
	if got := peekCounts(t, l, 10_006, c); got[0] != 2 {
		t.Errorf("count %d with one lease held, want 2 with the call's", got[0])
	}
}

func TestLocalARefusedRequestTakesNoSlot(t *testing.T) {
	l := newLocalLimiter(10)
	once := fixedClause("f", 1, 10*time.Second)
	mustCheck(t, l, 0, slotsClause("c", 1, 10*time.Second), once)
	refused := mustCheck(t, l, 1, slotsClause("d", 1, 10*time.Second), once)
	if refused.Allowed || !refused.Decisions[0].Allowed || refused.Decisions[0].LeaseID != 0 {
		t.Fatalf("%+v", refused)
	}
	if !mustCheck(t, l, 2, slotsClause("d", 1, 10*time.Second)).Allowed {
		t.Error("the slot was taken by the refused request")
	}
}

func TestLocalReleasingTheLastLeaseDropsTheKey(t *testing.T) {
	l := newLocalLimiter(10)
	c := slotsClause("c", 1, 10*time.Second)
	id := mustCheck(t, l, 100, c).Decisions[0].LeaseID
	if !l.releaseAt(c, id, 200) || l.size() != 0 {
		t.Fatalf("released: size %d", l.size())
	}
	if next := mustCheck(t, l, 200, c).Decisions[0].LeaseID; next != 200_001 {
		t.Errorf("next id %d: ids stay above the ones given before", next)
	}
}

func TestLocalAFullStoreEvictsTheKeysClosestToExpiry(t *testing.T) {
	l := newLocalLimiter(20)
	for i := range 10 {
		mustCheck(t, l, 0, fixedClause(fmt.Sprint("short", i), 5, time.Second))
		mustCheck(t, l, 0, fixedClause(fmt.Sprint("long", i), 5, time.Hour))
	}
	mustCheck(t, l, 0, fixedClause("new", 5, time.Minute))
	if l.size() != 11 {
		t.Fatalf("%d keys: the tenth closest to expiry and its equals go", l.size())
	}
	if got := peekCounts(t, l, 0, fixedClause("long0", 5, time.Hour), fixedClause("short0", 5, time.Second)); !reflect.DeepEqual(got, []int64{2, 1}) {
		t.Fatalf("counts %v", got)
	}
	for i := range 9 {
		mustCheck(t, l, 0, fixedClause(fmt.Sprint("x", i), 5, time.Minute))
	}
	mustCheck(t, l, 60_000, fixedClause("one-more", 5, time.Minute))
	if l.size() != 11 {
		t.Fatalf("%d keys: the expired ones go first, nothing live", l.size())
	}
	for i := range 10 {
		if got := peekCounts(t, l, 60_000, fixedClause(fmt.Sprint("long", i), 5, time.Hour)); got[0] != 2 {
			t.Errorf("long%d evicted", i)
		}
	}
}

func TestLocalNeverEvictsAKeyForItself(t *testing.T) {
	l := newLocalLimiter(1)
	mustCheck(t, l, 0, fixedClause("a", 2, time.Minute))
	if c := mustCheck(t, l, 0, fixedClause("a", 2, time.Minute)).Decisions[0].Count; c != 2 {
		t.Fatalf("count %d", c)
	}
	mustCheck(t, l, 0, fixedClause("b", 2, time.Minute))
	if l.size() != 1 || peekCounts(t, l, 0, fixedClause("a", 2, time.Minute))[0] != 1 {
		t.Error("a was not evicted")
	}
}

func TestLocalAChangedAlgorithmStartsAfreshAndATokenWindowRescales(t *testing.T) {
	l := newLocalLimiter(10)
	mustCheck(t, l, 0, fixedClause("k", 1, time.Minute))
	if !mustCheck(t, l, 0, localClause{key: "k", algorithm: "token", limit: 1, window: time.Minute, cost: 1}).Allowed {
		t.Error("the fixed window's count was read as a bucket")
	}
	mustCheck(t, l, 0, localClause{key: "t", algorithm: "token", limit: 4, window: time.Second, cost: 2})
	d := mustCheck(t, l, 0, localClause{key: "t", algorithm: "token", limit: 4, window: 2 * time.Second, cost: 1}).Decisions[0]
	if d.Count != 3 || d.Remaining != 1 || d.ResetAfter != 1500*time.Millisecond {
		t.Errorf("%+v", d)
	}
}

func TestLocalAClockSteppingBackStandsStillAndTheWallClock(t *testing.T) {
	l := newLocalLimiter(10)
	mustCheck(t, l, 5000, fixedClause("k", 2, time.Second))
	if d := mustCheck(t, l, 10, fixedClause("k", 2, time.Second)).Decisions[0]; !d.Allowed || d.Count != 2 || d.ResetAfter != time.Second {
		t.Errorf("%+v", d)
	}
	w := fixedClause("w", 1, time.Minute)
	if first, _ := l.check([]localClause{w}, false); !first.Allowed {
		t.Error("refused on the wall clock")
	}
	if second, _ := l.check([]localClause{w}, false); second.Allowed {
		t.Error("admitted twice on the wall clock")
	}
	s := slotsClause("c", 1, time.Minute)
	all, _ := l.check([]localClause{s}, false)
	if !l.release(s, all.Decisions[0].LeaseID) {
		t.Error("not released on the wall clock")
	}
}

func TestLocalBadInputIsRefusedAndChangesNothing(t *testing.T) {
	good := fixedClause("good", 1, time.Minute)
	for _, bad := range []localClause{
		fixedClause("k", 0, time.Minute),
		fixedClause("k", 1<<50+1, time.Minute),
		fixedClause("k", 1, 0),
		fixedClause("k", 1, 1500*time.Microsecond),
		fixedClause("k", 1, 3651*24*time.Hour),
		{key: "k", algorithm: "fixed", limit: 1, window: time.Minute, cost: 0},
		{key: "k", algorithm: "token", limit: 1, window: time.Minute, burst: -1, cost: 1},
		{key: "k", algorithm: "concurrency", limit: 1, window: time.Minute, cost: 1 << 51},
		{key: "k", algorithm: "leaky", limit: 1, window: time.Minute, cost: 1},
	} {
		l := newLocalLimiter(10)
		if _, err := l.checkAt([]localClause{good, bad}, false, 0); err == nil || l.size() != 0 {
			t.Errorf("%+v: error %v, %d keys", bad, err, l.size())
		}
	}
	l := newLocalLimiter(10)
	if _, err := l.checkAt([]localClause{good}, false, -1); err == nil {
		t.Error("a negative now was accepted")
	}
	if l.releaseAt(good, 1, 0) || l.size() != 0 {
		t.Error("a fixed clause released a lease")
	}
}

func TestLocalConcurrentChecksNeverAdmitMoreThanTheLimit(t *testing.T) {
	l := newLocalLimiter(1000)
	c := fixedClause("k", 500, time.Hour)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if all, err := l.checkAt([]localClause{c}, false, 0); err == nil && all.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 500 {
		t.Errorf("%d admitted, limit 500", admitted.Load())
	}
}

func TestLocalClauseOfACheck(t *testing.T) {
	p := &policy{name: "c", algorithm: "concurrency", limit: 3, lease: 5 * time.Second}
	got := localClauseOf(check{p: p, key: "rl:k", cost: 2})
	want := localClause{key: "rl:k", algorithm: "concurrency", limit: 3, window: 5 * time.Second, cost: 2}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	p = &policy{name: "t", algorithm: "token", limit: 3, window: time.Second, burst: 9}
	if got := localClauseOf(check{p: p, key: "rl:t", cost: 1}); got.window != time.Second || got.burst != 9 {
		t.Errorf("%+v", got)
	}
}
