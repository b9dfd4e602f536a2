package librl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

// A pipelined call ends at its context's deadline while the server holds
// its reply (CLIENT PAUSE), as a plain call with ContextTimeoutEnabled
// does, and the calls after the pause are answered.
func TestAutoPipelinedCallEndsAtItsDeadline(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := librl.New(rdb).WithAutoPipelining()
	if err != nil {
		t.Fatal(err)
	}
	if !l.AutoPipelined() || librl.New(rdb).AutoPipelined() {
		t.Fatal("AutoPipelined does not say which Limiter pipelines")
	}
	if err := srv.Client().Do(ctx, "CLIENT", "PAUSE", "1000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.All(short, librl.Fixed("{p}:a", 5, time.Minute))
	if took := time.Since(start); err == nil || !errors.Is(err, context.DeadlineExceeded) || took > 600*time.Millisecond {
		t.Fatalf("during the pause: %v after %v, want the deadline's error after about 100 ms", err, took)
	}
	// After the pause the paused call runs too (a call given up on may
	// still run), then this one.
	a, err := l.All(ctx, librl.Fixed("{p}:a", 5, time.Minute))
	if err != nil || !a.Allowed || a.Decisions[0].Count != 2 {
		t.Fatalf("after the pause: %+v, %v; want admitted as the second call", a, err)
	}
}

// A Ring has no auto-pipeliner: refused with go-redis's error.
func TestAutoPipeliningRefusesARing(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	if _, err := librl.New(ring).WithAutoPipelining(); !errors.Is(err, redis.ErrRingAutoPipelineUnsupported) {
		t.Fatalf("got %v, want go-redis's ErrRingAutoPipelineUnsupported", err)
	}
}
