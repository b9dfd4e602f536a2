package librl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
)

// A limit per user, and two limits of one subject in one atomic call.
func ExampleLimiter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	lim := librl.New(rdb)

	d, err := lim.Fixed(ctx, "user:42", 10, time.Minute)
	if err != nil {
		panic(err)
	}
	if !d.Allowed {
		fmt.Println("retry in", d.RetryAfter)
	}

	// In a cluster, one call's keys share a hash tag: {ip:203.0.113.7}.
	all, err := lim.All(ctx,
		librl.Fixed("{ip:203.0.113.7}:second", 5, time.Second, librl.Aligned()),
		librl.Sliding("{ip:203.0.113.7}:minute", 100, time.Minute))
	if err == nil && !all.Allowed {
		fmt.Println("retry in", all.RetryAfter)
	}
}

// The leaky bucket as a queue: callers paced at 10 per second, first come
// first served, each told when to act.
func ExampleReserve() {
	ctx := context.Background()
	lim := librl.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	d, err := lim.Token(ctx, "jobs", 10, time.Second, librl.Burst(1), librl.Reserve(5*time.Second))
	if err == nil && d.Allowed {
		time.Sleep(d.RetryAfter)
		// act now
	}
}

// At most 5 generations in flight per API key: a lease taken before the
// work and given back after it, also when the request is cancelled.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	lim := librl.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	defer lim.Close() // the connections it opened for Wait
	lease, err := lim.Acquire(ctx, "llm:{key7f3a}", 5, time.Minute, librl.Wait(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	if !lease.Allowed {
		fmt.Println("busy; a slot frees in at most", lease.RetryAfter)
		return
	}
	// Work that may outlast the lease: renewed every 20 s, cancelled if lost.
	work, stop := lease.KeepAlive(ctx)
	defer stop()
	if err := generate(work); err != nil {
		fmt.Println(err, context.Cause(work)) // librl.ErrLeaseNotHeld if the lease was lost
	}
}

func generate(ctx context.Context) error { return ctx.Err() }
