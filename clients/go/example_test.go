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
