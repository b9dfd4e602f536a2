package librl

import (
	"reflect"
	"testing"
	"time"
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

func TestDenialCacheAgesAndNeverOutlivesTheDenial(t *testing.T) {
	c := NewDenialCache(2)
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
