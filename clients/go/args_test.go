package librl

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSlotMatchesTheCluster(t *testing.T) {
	for key, want := range map[string]int{
		"123456789": 0x31C3, "foo": 12182, "{user1000}.following": 3443,
		"{user1000}.followers": 3443,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	// An empty tag does not count: the whole key is hashed.
	if Slot("{}x") != int(crc16("{}x")%16384) {
		t.Error("an empty hash tag must hash the whole key")
	}
}

func TestArgvFollowsTheGrammar(t *testing.T) {
	k, err := limiterCall("Token", Token("k", 5, 1500*time.Millisecond), []Option{
		Burst(10), Cost(2), Wait(0), Block(time.Minute), Override("o"), Peek(),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"RL.TOKEN", "k", "5", "1500ms", "BURST", "10", "COST", "2", "WAIT", "0ms",
		"BLOCK", "60000ms", "OVERRIDE", "o", "PEEK"}
	if !reflect.DeepEqual(k.argv, want) || k.keyPos != 1 || !reflect.DeepEqual(k.keys, []string{"k", "o"}) {
		t.Fatalf("%v", k)
	}
	a, err := allCall([]Clause{Fixed("{a}:1", 1, time.Second, Aligned()), Sliding("{a}:2", 2, time.Minute, Approx(), Refund(1))}, false)
	if err != nil {
		t.Fatal(err)
	}
	want = []any{"RL.ALL", "FIXED", "{a}:1", "1", "1000ms", "ALIGNED", "SLIDING", "{a}:2", "2", "60000ms", "APPROX", "REFUND", "1"}
	if !reflect.DeepEqual(a.argv, want) || a.keyPos != 2 || a.effect != effectRefund {
		t.Fatalf("%v", a)
	}
}

// A prepared clause sends what the clause would, its limit, window and
// options rendered once; For adds a call's own options after them, and an
// option given in both is refused before sending.
func TestPreparedClauseSendsTheSameWords(t *testing.T) {
	tpl, err := Token("", 5, 1500*time.Millisecond, Burst(10), Block(time.Minute)).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	a, err := allCall([]Clause{tpl.For("{a}:t", Cost(2), Override("{a}:o")), tpl.For("{a}:u")}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"RL.ALL", "TOKEN", "{a}:t", "5", "1500ms", "BURST", "10", "BLOCK", "60000ms", "COST", "2", "OVERRIDE", "{a}:o",
		"TOKEN", "{a}:u", "5", "1500ms", "BURST", "10", "BLOCK", "60000ms"}
	if !reflect.DeepEqual(a.argv, want) || !reflect.DeepEqual(a.keys, []string{"{a}:t", "{a}:o", "{a}:u"}) || len(a.parts) != 2 {
		t.Fatalf("%v", a)
	}
	// Prepared clauses' arguments are allocated at their size (and
	// PEEK's room), not grown.
	if spare := cap(a.argv) - len(a.argv); spare != 1 {
		t.Fatalf("%d words with room for %d", len(a.argv), cap(a.argv))
	}
	var arg *ArgError
	if _, err := allCall([]Clause{tpl.For("k", Burst(3))}, false); !errors.As(err, &arg) || arg.Where != "All clause 0 (TOKEN k)" {
		t.Fatalf("Burst in both: %v", err)
	}
	if _, err := Fixed("", 0, time.Second).Prepare(); err != nil {
		t.Fatalf("a limit of 0 is the server's to refuse: %v", err)
	}
	if _, err := Fixed("", 1, time.Microsecond).Prepare(); !errors.As(err, &arg) {
		t.Fatalf("a sub-millisecond window: %v", err)
	}
	if _, err := (Clause{}).Prepare(); !errors.As(err, &arg) {
		t.Fatalf("the zero Clause: %v", err)
	}
}

func TestDenialCacheAgesAndNeverOutlivesTheDenial(t *testing.T) {
	c := NewDenialCache(2, time.Hour)
	t0 := time.Now()
	d := Decision{RetryAfter: 500 * time.Millisecond, ResetAfter: 800 * time.Millisecond, Limit: 3, Count: 3}
	c.keep("a", c.generation(), t0, t0, d.RetryAfter, cacheEntry{one: d})
	e, ok := c.lookup("a", t0.Add(200*time.Millisecond+100*time.Microsecond))
	if !ok || e.one.RetryAfter != 300*time.Millisecond || e.one.ResetAfter != 600*time.Millisecond {
		t.Fatalf("%+v", e)
	}
	if _, ok := c.lookup("a", t0.Add(500*time.Millisecond)); ok {
		t.Fatal("answered at retry_after")
	}
	// A denial sent before a forget is not kept.
	gen := c.generation()
	c.ForgetKey("x")
	c.keep("b", gen, t0, t0, time.Second, cacheEntry{one: d})
	if c.Len() != 0 {
		t.Fatal("kept a denial older than a refund")
	}
	// Full of live entries: a new one is not kept.
	c.keep("1", c.generation(), t0, t0, time.Hour, cacheEntry{one: d})
	c.keep("2", c.generation(), t0, t0, time.Hour, cacheEntry{one: d})
	c.keep("3", c.generation(), t0, t0, time.Hour, cacheEntry{one: d})
	if _, ok := c.lookup("3", t0); ok || c.Len() != 2 {
		t.Fatal("went over capacity")
	}
}

func TestUnexpectedRepliesAreErrorsNotPanics(t *testing.T) {
	for _, r := range []any{nil, "x", []any{int64(1)}, []any{int64(1), "2", int64(3), int64(4), int64(5), int64(6)}} {
		if _, err := decisionFrom(r); err == nil {
			t.Errorf("decisionFrom(%#v) passed", r)
		}
	}
	six := []any{int64(0), int64(3), int64(-1), int64(3), int64(0), int64(900)}
	if d, err := decisionFrom(six); err != nil || d.RetryAfter != Never || d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	for _, r := range []any{nil, []any{int64(1), int64(0)}, []any{int64(1), int64(0), "x"}, []any{"1", int64(0), six}} {
		if _, err := allDecisionFrom(r, nil); err == nil {
			t.Errorf("allDecisionFrom(%#v) passed", r)
		}
	}
	for _, r := range []any{nil, []any{"x", []any{}}, []any{int64(0), "x"}, []any{int64(0), []any{[]any{"k", int64(1)}}},
		[]any{int64(0), []any{[]any{int64(7), int64(1), int64(2), int64(3), int64(4)}}}} {
		if _, _, err := parseList(r); err == nil {
			t.Errorf("parseList(%#v) passed", r)
		}
	}
	next, page, err := parseList([]any{"17", []any{[]any{"o", int64(5), int64(1000), int64(0), int64(-1)}}})
	if err != nil || next != 17 || len(page) != 1 || page[0].Key != "o" || page[0].TTL != Never || page[0].Window != time.Second {
		t.Fatalf("%d %+v %v", next, page, err)
	}
}

func TestDenialCacheKeepsAllDecisions(t *testing.T) {
	c := NewDenialCache(0, 0)
	t0 := time.Now()
	a := AllDecision{RetryAfter: time.Second, Decisions: []Decision{{RetryAfter: time.Second, ResetAfter: 2 * time.Second}}}
	c.keep("all", c.generation(), t0, t0, a.RetryAfter, cacheEntry{all: a, many: true, keys: []string{"k"}})
	e, ok := c.lookup("all", t0.Add(400*time.Millisecond))
	if !ok || !e.many || e.all.RetryAfter != 600*time.Millisecond || e.all.Decisions[0].ResetAfter != 1600*time.Millisecond {
		t.Fatalf("%+v", e)
	}
	c.after(call{effect: effectRefund, keys: []string{"k"}})
	if c.Len() != 0 {
		t.Fatal("a refund on k kept the denial naming k")
	}
	c.keep("all", c.generation(), t0, t0, a.RetryAfter, cacheEntry{all: a, many: true})
	c.after(call{effect: effectClearAll})
	if c.Len() != 0 {
		t.Fatal("an override change kept a denial")
	}
}

// A newer module may add fields at the end of a reply (docs/commands.md,
// The limiter reply): the parsers read what they know and ignore the rest,
// whatever it holds.
func TestLongerRepliesAreReadAndTheRestIgnored(t *testing.T) {
	seven := []any{int64(1), int64(2), int64(0), int64(5), int64(3), int64(30000), int64(1754500000123001)}
	d, err := decisionFrom(seven)
	if err != nil || !d.Allowed || d.Count != 2 || d.Limit != 5 || d.Remaining != 3 || d.ResetAfter != 30*time.Second {
		t.Fatalf("RL.CONCURRENT's seven integers as a limiter reply: %+v %v", d, err)
	}
	future := append(append([]any{}, seven...), "a field from the future", []any{int64(9)})
	if _, err := decisionFrom(future); err != nil {
		t.Fatalf("a reply with unknown trailing fields: %v", err)
	}
	a, err := allDecisionFrom([]any{int64(1), int64(0), future, seven}, nil)
	if err != nil || !a.Allowed || len(a.Decisions) != 2 || a.Decisions[1].Count != 2 {
		t.Fatalf("RL.ALL of longer clause replies: %+v %v", a, err)
	}
	o, err := ints("RL.OVERRIDE GET", []any{int64(5), int64(1000), int64(0), int64(-1), "x"}, 4)
	if err != nil || len(o) != 4 {
		t.Fatalf("RL.OVERRIDE GET: %v %v", o, err)
	}
	next, page, err := parseList([]any{int64(0), []any{[]any{"o", int64(5), int64(1000), int64(0), int64(-1), int64(7)}}, "x"})
	if err != nil || next != 0 || len(page) != 1 || page[0].Limit != 5 {
		t.Fatalf("RL.OVERRIDE LIST: %v %+v %v", next, page, err)
	}
}

// However long the server's RetryAfter (a BLOCK of an hour), a denial is
// kept at most MaxAge from when its call was sent: a second by default.
func TestDenialCacheKeepsADenialAtMostMaxAge(t *testing.T) {
	t0 := time.Now()
	d := Decision{RetryAfter: time.Hour, ResetAfter: time.Hour, Limit: 1, Count: 1}
	for _, c := range []struct {
		cache *DenialCache
		age   time.Duration
	}{{NewDenialCache(0, 0), time.Second}, {NewDenialCache(0, -5), time.Second}, {NewDenialCache(0, 250*time.Millisecond), 250 * time.Millisecond}} {
		if c.cache.MaxAge() != c.age {
			t.Fatalf("MaxAge %v, want %v", c.cache.MaxAge(), c.age)
		}
		c.cache.keep("k", c.cache.generation(), t0, t0.Add(time.Millisecond), d.RetryAfter, cacheEntry{one: d})
		if e, ok := c.cache.lookup("k", t0.Add(c.age-time.Millisecond)); !ok || e.one.RetryAfter != time.Hour-c.age+2*time.Millisecond {
			t.Fatalf("%v: gone before MaxAge: %+v", c.age, e)
		}
		if _, ok := c.cache.lookup("k", t0.Add(c.age)); ok {
			t.Fatalf("%v: kept past MaxAge", c.age)
		}
	}
}

func TestConcurrentArgvAndLeaseReplies(t *testing.T) {
	k, err := limiterCall("Acquire", Concurrent("{j}:c", 5, time.Minute), []Option{Cost(2), Wait(10 * time.Second), Override("{j}:o"), Peek()})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"RL.CONCURRENT", "{j}:c", "5", "60000ms", "COST", "2", "WAIT", "10000ms", "OVERRIDE", "{j}:o", "PEEK"}
	if !reflect.DeepEqual(k.argv, want) || k.effect != effectNone || k.wait != 10*time.Second || len(k.leases) != 1 ||
		*k.leases[0] != (leaseSpec{key: "{j}:c", limit: 5, length: time.Minute, override: "{j}:o"}) {
		t.Fatalf("%+v", k)
	}
	a, err := allCall([]Clause{Fixed("{j}:f", 1, time.Second), Concurrent("{j}:c", 5, 30*time.Second)}, false)
	if err != nil {
		t.Fatal(err)
	}
	want = []any{"RL.ALL", "FIXED", "{j}:f", "1", "1000ms", "CONCURRENT", "{j}:c", "5", "30000ms"}
	if !reflect.DeepEqual(a.argv, want) || a.effect != effectNone || len(a.leases) != 2 || a.leases[0] != nil || a.leases[1] == nil {
		t.Fatalf("%+v", a)
	}
	if plain, _ := allCall([]Clause{Fixed("{j}:f", 1, time.Second)}, false); plain.leases != nil || plain.effect != effectCacheable {
		t.Fatalf("%+v", plain)
	}
	// A lease id is read from a CONCURRENT clause's reply only.
	six := []any{int64(1), int64(1), int64(0), int64(1), int64(0), int64(1000)}
	seven := []any{int64(1), int64(1), int64(0), int64(5), int64(4), int64(30000), int64(1754500000123001)}
	d, err := allDecisionFrom([]any{int64(1), int64(0), append(six, int64(99)), seven}, a.leases)
	if err != nil || d.Decisions[0].LeaseID != 0 || d.Decisions[1].LeaseID != 1754500000123001 {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := allDecisionFrom([]any{int64(1), int64(0), six, six}, a.leases); err == nil {
		t.Fatal("a CONCURRENT clause's reply without its lease id passed")
	}
	if _, err := limiterDecision(six, true); err == nil {
		t.Fatal("an RL.CONCURRENT reply of six integers passed")
	}
	// The zero Lease, and AllDecision's lease of a clause that takes none, hold nothing.
	var zero AllDecision
	if x := zero.Lease(0); x.holds() {
		t.Fatal("the zero AllDecision's lease holds")
	}
}

// redisErr is an error reply as go-redis gives one.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// A call the server refused because its slot moves is tried again with a
// growing pause until its window closes; a TRYAGAIN the caller can split
// comes back at once, and a MOVED is retried only in a cluster (where
// go-redis gave up following it).
func TestRetryingWithinTheWindow(t *testing.T) {
	ctx := context.Background()
	tryAgain := redisErr("TRYAGAIN Multiple keys request during rehashing of slot 7")
	moved := redisErr("MOVED 7 127.0.0.1:7001")
	l := &Limiter{tryAgain: 300 * time.Millisecond}
	calls := 0
	failing := func(err error, until int) func(context.Context) error {
		calls = 0
		return func(context.Context) error {
			if calls++; calls <= until {
				return err
			}
			return nil
		}
	}
	if err := l.retrying(ctx, false, failing(tryAgain, 3)); err != nil || calls != 4 {
		t.Fatalf("%v after %d calls", err, calls)
	}
	start := time.Now()
	err := l.retrying(ctx, false, failing(tryAgain, 1000))
	if took := time.Since(start); !errors.Is(err, tryAgain) || took < 200*time.Millisecond || took > 400*time.Millisecond {
		t.Fatalf("%v after %v", err, took)
	}
	if err := l.retrying(ctx, true, failing(tryAgain, 1000)); !errors.Is(err, tryAgain) || calls != 1 {
		t.Fatalf("a TRYAGAIN to split was retried: %v, %d calls", err, calls)
	}
	if err := l.retrying(ctx, false, failing(moved, 2)); !errors.Is(err, moved) || calls != 1 {
		t.Fatalf("a MOVED outside a cluster was retried: %v, %d calls", err, calls)
	}
	l.cluster = &redis.ClusterClient{}
	if err := l.retrying(ctx, false, failing(moved, 2)); err != nil || calls != 3 {
		t.Fatalf("%v after %d calls", err, calls)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := l.retrying(short, false, failing(tryAgain, 1000)); !errors.Is(err, tryAgain) || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("past the context: %v after %v", err, time.Since(start))
	}
	if err := (&Limiter{}).retrying(ctx, false, failing(tryAgain, 1)); !errors.Is(err, tryAgain) || calls != 1 {
		t.Fatalf("WithTryAgainWait(0) retried: %v", err)
	}
}
