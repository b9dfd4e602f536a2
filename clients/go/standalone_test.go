package librl_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

var ctx = context.Background()

// Every flavor runs every standalone check, against one server each.
func TestStandalone(t *testing.T) {
	for _, f := range testserver.Flavors {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.Start(t, f)
			rdb := srv.Client()
			for _, c := range append(standaloneChecks, concurrentChecks...) {
				t.Run(c.name, func(t *testing.T) {
					if err := rdb.FlushAll(ctx).Err(); err != nil {
						t.Fatal(err)
					}
					c.run(t, librl.New(rdb), rdb)
				})
			}
			// The calls through the auto-pipeliner and over the pipelined
			// connection behave the same; their batching is the client's,
			// not the server's: one flavor.
			if f.Name != "redis7" {
				return
			}
			for _, c := range append(standaloneChecks, concurrentChecks...) {
				t.Run(c.name+"/auto-pipelined", func(t *testing.T) {
					if err := rdb.FlushAll(ctx).Err(); err != nil {
						t.Fatal(err)
					}
					l, err := librl.New(rdb).WithAutoPipelining()
					if err != nil {
						t.Fatal(err)
					}
					c.run(t, l, rdb)
				})
				t.Run(c.name+"/pipelined-connection", func(t *testing.T) {
					if err := rdb.FlushAll(ctx).Err(); err != nil {
						t.Fatal(err)
					}
					l, err := librl.New(rdb).WithPipelinedConnection()
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = l.Close() })
					c.run(t, l, rdb)
				})
			}
		})
	}
}

type check struct {
	name string
	run  func(t *testing.T, l *librl.Limiter, rdb *redis.Client)
}

// dec(t)(l.Fixed(...)) is the decision, the test failing on an error.
func dec(t *testing.T) func(librl.Decision, error) librl.Decision {
	return func(d librl.Decision, err error) librl.Decision {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

var standaloneChecks = []check{
	{"fixed admits up to the limit then denies with the window's end", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		for i := int64(1); i <= 3; i++ {
			d := dec(t)(l.Fixed(ctx, "f", 3, time.Minute))
			if !d.Allowed || d.Count != i || d.Remaining != 3-i || d.Limit != 3 || d.RetryAfter != 0 {
				t.Fatalf("call %d: %+v", i, d)
			}
		}
		d := dec(t)(l.Fixed(ctx, "f", 3, time.Minute))
		if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute || d.ResetAfter <= 0 {
			t.Fatalf("4th call: %+v", d)
		}
	}},
	{"a cost above the limit never fits", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		d := dec(t)(l.Fixed(ctx, "f", 3, time.Minute, librl.Cost(4)))
		if d.Allowed || d.RetryAfter != librl.Never {
			t.Fatalf("%+v", d)
		}
	}},
	{"cost 0 reads and peek changes nothing", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		dec(t)(l.Sliding(ctx, "s", 5, time.Minute, librl.Cost(2)))
		read := dec(t)(l.Sliding(ctx, "s", 5, time.Minute, librl.Cost(0)))
		if !read.Allowed || read.Count != 2 || read.Remaining != 3 {
			t.Fatalf("read: %+v", read)
		}
		peek := dec(t)(l.Sliding(ctx, "s", 5, time.Minute, librl.Peek()))
		if peek.Count != 3 {
			t.Fatalf("peek: %+v", peek)
		}
		if after := dec(t)(l.Sliding(ctx, "s", 5, time.Minute, librl.Cost(0))); after.Count != 2 {
			t.Fatalf("peek wrote: %+v", after)
		}
		if n := rdb.Exists(ctx, "nothing").Val(); n != 0 {
			t.Fatal("?")
		}
		dec(t)(l.Fixed(ctx, "never-written", 5, time.Minute, librl.Peek()))
		if n := rdb.Exists(ctx, "never-written").Val(); n != 0 {
			t.Fatal("PEEK created a key")
		}
	}},
	{"approx and aligned and refund", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		d := dec(t)(l.Sliding(ctx, "a", 10, time.Second, librl.Approx(), librl.Cost(4)))
		if !d.Allowed || d.Count != 4 {
			t.Fatalf("approx: %+v", d)
		}
		d = dec(t)(l.Fixed(ctx, "al", 10, time.Hour, librl.Aligned(), librl.Cost(6)))
		if !d.Allowed || d.ResetAfter > time.Hour {
			t.Fatalf("aligned: %+v", d)
		}
		d = dec(t)(l.Fixed(ctx, "al", 10, time.Hour, librl.Aligned(), librl.Refund(4)))
		if !d.Allowed || d.Count != 2 {
			t.Fatalf("refund: %+v", d)
		}
	}},
	{"token burst, reserve and wait", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		start := time.Now()
		d := dec(t)(l.Token(ctx, "t", 10, time.Second, librl.Burst(2), librl.Cost(2)))
		if !d.Allowed || d.Limit != 2 || d.Remaining != 0 {
			t.Fatalf("burst: %+v", d)
		}
		// 10 per second: one token every 100 ms, reserved ahead.
		d = dec(t)(l.Token(ctx, "t", 10, time.Second, librl.Burst(2), librl.Reserve(time.Second)))
		if !d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
			t.Fatalf("reserve: %+v", d)
		}
		// The bucket emptied at or after start: the second token after that
		// exists 200 ms later, and WAIT returns no earlier.
		d = dec(t)(l.Token(ctx, "t", 10, time.Second, librl.Burst(2), librl.Wait(time.Second)))
		if held := time.Since(start); !d.Allowed || d.RetryAfter != 0 || held < 199*time.Millisecond {
			t.Fatalf("wait: %+v after %v", d, held)
		}
	}},
	{"a block outlasts the window", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		dec(t)(l.Fixed(ctx, "b", 1, 100*time.Millisecond, librl.Block(time.Minute)))
		d := dec(t)(l.Fixed(ctx, "b", 1, 100*time.Millisecond, librl.Block(time.Minute)))
		if d.Allowed || d.RetryAfter < 59*time.Second {
			t.Fatalf("%+v", d)
		}
	}},
	{"all is all-or-nothing", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		clauses := []librl.Clause{
			librl.Fixed("{u}:s", 2, time.Second, librl.Aligned()),
			librl.Sliding("{u}:m", 10, time.Minute),
			librl.Token("{u}:t", 5, time.Second, librl.Burst(5)),
		}
		for i := 0; i < 2; i++ {
			a, err := l.All(ctx, clauses...)
			if err != nil || !a.Allowed || len(a.Decisions) != 3 {
				t.Fatalf("%+v %v", a, err)
			}
		}
		a, err := l.All(ctx, clauses...)
		if err != nil || a.Allowed || a.RetryAfter <= 0 || a.Decisions[0].Allowed || !a.Decisions[1].Allowed {
			t.Fatalf("third: %+v %v", a, err)
		}
		// A denied call's clauses answer as their PEEK would: 2 recorded + this one.
		if a.Decisions[1].Count != 3 {
			t.Fatalf("denied clause: %+v", a.Decisions[1])
		}
		if d := dec(t)(l.Sliding(ctx, "{u}:m", 10, time.Minute, librl.Cost(0))); d.Count != 2 {
			t.Fatalf("a denied RL.ALL recorded: %+v", d)
		}
		p, err := l.PeekAll(ctx, librl.Sliding("{u}:m", 10, time.Minute))
		if err != nil || p.Decisions[0].Count != 3 {
			t.Fatalf("peek all: %+v %v", p, err)
		}
	}},
	{"overrides set, apply, list and delete", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		if err := l.OverrideSet(ctx, "o:gold", 100, time.Minute, librl.Burst(7), librl.TTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
		o, err := l.OverrideGet(ctx, "o:gold")
		if err != nil || o == nil || o.Limit != 100 || o.Window != time.Minute || o.Burst != 7 || o.TTL <= 0 {
			t.Fatalf("%+v %v", o, err)
		}
		if err := l.OverrideSet(ctx, "o:plain", 5, time.Second); err != nil {
			t.Fatal(err)
		}
		if o, _ := l.OverrideGet(ctx, "o:plain"); o == nil || o.TTL != librl.Never || o.Burst != 0 {
			t.Fatalf("%+v", o)
		}
		d := dec(t)(l.Fixed(ctx, "k", 1, time.Minute, librl.Override("o:gold")))
		if d.Limit != 100 {
			t.Fatalf("%+v", d)
		}
		_, page, err := l.OverrideList(ctx, 0, librl.Match("o:*"), librl.Count(100))
		if err != nil || len(page) != 2 {
			t.Fatalf("%+v %v", page, err)
		}
		all, err := l.OverrideScan(ctx)
		if err != nil || len(all) != 2 {
			t.Fatalf("%+v %v", all, err)
		}
		if n, err := l.OverrideDel(ctx, "o:gold", "o:plain", "o:none"); err != nil || n != 2 {
			t.Fatalf("%d %v", n, err)
		}
		if o, err := l.OverrideGet(ctx, "o:gold"); o != nil || err != nil {
			t.Fatalf("%+v %v", o, err)
		}
	}},
	{"server errors carry librl's message and wrap go-redis's", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		_, err := l.Fixed(ctx, "e", 0, time.Minute)
		var le *librl.Error
		var re redis.Error
		if !errors.As(err, &le) || !errors.As(err, &re) || !le.ServerError() {
			t.Fatalf("%T %v", err, err)
		}
		if !strings.Contains(err.Error(), "RL.FIXED") || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("message: %v", err)
		}
		rdb.Set(ctx, "str", "x", 0)
		if _, err := l.Token(ctx, "str", 1, time.Second); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("%v", err)
		}
		if _, err := l.All(ctx, librl.Fixed("x", 1, time.Second), librl.Fixed("x", 1, time.Second)); err == nil {
			t.Fatal("the same key twice was admitted")
		}
	}},
	{"bad arguments are refused before sending", func(t *testing.T, l *librl.Limiter, _ *redis.Client) {
		for name, err := range map[string]error{
			"sub-ms window":              second(l.Fixed(ctx, "k", 1, 1500*time.Microsecond)),
			"zero window":                second(l.Fixed(ctx, "k", 1, 0)),
			"aligned on sliding":         second(l.Sliding(ctx, "k", 1, time.Second, librl.Aligned())),
			"burst on fixed":             second(l.Fixed(ctx, "k", 1, time.Second, librl.Burst(2))),
			"cost and refund":            second(l.Fixed(ctx, "k", 1, time.Second, librl.Cost(1), librl.Refund(1))),
			"reserve and wait":           second(l.Token(ctx, "k", 1, time.Second, librl.Reserve(0), librl.Wait(0))),
			"cost twice":                 second(l.Fixed(ctx, "k", 1, time.Second, librl.Cost(1), librl.Cost(2))),
			"peek in a clause":           secondAll(l.All(ctx, librl.Fixed("k", 1, time.Second, librl.Peek()))),
			"no clause":                  secondAll(l.All(ctx)),
			"wait past the read timeout": second(durable(t, l).Token(ctx, "k", 1, time.Second, librl.Wait(time.Minute))),
		} {
			var ae *librl.ArgError
			if !errors.As(err, &ae) {
				t.Errorf("%s: %T %v", name, err, err)
			}
		}
	}},
	{"the denial cache answers until retry_after, and a refund clears it", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		cl := l.WithDenialCache(nil)
		dec(t)(cl.Fixed(ctx, "c", 1, time.Second))
		first := dec(t)(cl.Fixed(ctx, "c", 1, time.Second))
		if first.Allowed || cl.Cache().Len() != 1 {
			t.Fatalf("%+v", first)
		}
		before := calls(t, rdb, "rl.fixed")
		again := dec(t)(cl.Fixed(ctx, "c", 1, time.Second))
		if again.Allowed || again.RetryAfter > first.RetryAfter || calls(t, rdb, "rl.fixed") != before {
			t.Fatalf("not from the cache: %+v", again)
		}
		dec(t)(cl.Fixed(ctx, "c", 1, time.Second, librl.Refund(1)))
		if cl.Cache().Len() != 0 {
			t.Fatal("a refund left the denial cached")
		}
		if d := dec(t)(cl.Fixed(ctx, "c", 1, time.Second)); !d.Allowed {
			t.Fatalf("after the refund: %+v", d)
		}
		denied := dec(t)(cl.Fixed(ctx, "c", 1, time.Second))
		time.Sleep(denied.RetryAfter)
		if d := dec(t)(cl.Fixed(ctx, "c", 1, time.Second)); !d.Allowed {
			t.Fatalf("the cache outlived the denial: %+v", d)
		}
	}},

	{"a block deleted elsewhere is honoured within the denial cache's max age", func(t *testing.T, l *librl.Limiter, rdb *redis.Client) {
		const maxAge = 200 * time.Millisecond
		cl := l.WithDenialCache(librl.NewDenialCache(0, maxAge))
		block := func() librl.Decision {
			return dec(t)(cl.Fixed(ctx, "login", 1, time.Minute, librl.Block(time.Hour)))
		}
		block()
		sent := time.Now()
		if d := block(); d.Allowed || d.RetryAfter < 59*time.Minute {
			t.Fatalf("not blocked: %+v", d)
		}
		// The operator lifts the block from elsewhere (redis-cli DEL).
		if err := rdb.Del(ctx, "login").Err(); err != nil {
			t.Fatal(err)
		}
		cached := 0
		var asked time.Time // when the call that was admitted started
		for {
			asked = time.Now()
			d := block()
			if d.Allowed {
				break
			}
			cached++
			if time.Since(sent) > maxAge+2*time.Second {
				t.Fatalf("still denied %v after the block was lifted: %+v", time.Since(sent), d)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The first call asked after the max age goes to the server and is
		// admitted: asked at most one pause (10 ms, longer on a loaded
		// machine) after it.
		if took := asked.Sub(sent); took > maxAge+250*time.Millisecond || cached == 0 {
			t.Fatalf("admitted when asked %v after the denial (max age %v), %d cached answers", took, maxAge, cached)
		}
		// Sooner: ForgetKey after a DEL, Clear after an override set elsewhere.
		cl = l.WithDenialCache(nil)
		dec(t)(cl.Fixed(ctx, "login", 1, time.Minute, librl.Block(time.Hour)))
		if d := dec(t)(cl.Fixed(ctx, "login", 1, time.Minute, librl.Block(time.Hour))); d.Allowed {
			t.Fatalf("not blocked: %+v", d)
		}
		rdb.Del(ctx, "login")
		cl.Cache().ForgetKey("login")
		if d := dec(t)(cl.Fixed(ctx, "login", 1, time.Minute, librl.Block(time.Hour))); !d.Allowed {
			t.Fatalf("ForgetKey left the denial: %+v", d)
		}
		dec(t)(cl.Fixed(ctx, "plan", 1, time.Minute, librl.Override("plan:o")))
		if d := dec(t)(cl.Fixed(ctx, "plan", 1, time.Minute, librl.Override("plan:o"))); d.Allowed || cl.Cache().Len() != 1 {
			t.Fatalf("not denied: %+v", d)
		}
		if err := rdb.Do(ctx, "RL.OVERRIDE", "SET", "plan:o", 10, "1m").Err(); err != nil {
			t.Fatal(err)
		}
		cl.Cache().Clear()
		if d := dec(t)(cl.Fixed(ctx, "plan", 1, time.Minute, librl.Override("plan:o"))); !d.Allowed || d.Limit != 10 {
			t.Fatalf("Clear left the denial: %+v", d)
		}
	}}}

// durable is l with WithDurability, whose calls go on the client's own
// connections, within its ReadTimeout.
func durable(t *testing.T, l *librl.Limiter) *librl.Limiter {
	d, err := l.WithDurability(1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func second(_ librl.Decision, err error) error       { return err }
func secondAll(_ librl.AllDecision, err error) error { return err }

// calls is INFO commandstats' call count of a command.
func calls(t *testing.T, rdb *redis.Client, name string) int64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			var v int64
			for _, ch := range n {
				v = v*10 + int64(ch-'0')
			}
			return v
		}
	}
	return 0
}

// One Limiter (with its denial cache) shared by many goroutines, over RESP2
// and RESP3 clients and a UniversalClient: exactly the limit is admitted.
func TestConcurrentCallsAdmitExactlyTheLimit(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("valkey9"))
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"resp2", redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})},
		{"resp3", redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 3})},
		{"universal", redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.client.Close()
			lim := librl.New(c.client).WithDenialCache(nil)
			key := "{conc}:" + c.name
			var admitted, denied atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 40 {
						a, err := lim.All(ctx, librl.Fixed(key, 100, time.Minute), librl.Token(key+":t", 1000, time.Minute))
						if err != nil {
							t.Error(err)
							return
						}
						if a.Allowed {
							admitted.Add(1)
						} else {
							denied.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if admitted.Load() != 100 || denied.Load() != 220 {
				t.Fatalf("admitted %d, denied %d", admitted.Load(), denied.Load())
			}
			if lim.Cache().Len() != 1 {
				t.Fatalf("the denial cache holds %d entries", lim.Cache().Len())
			}
		})
	}
}
