package librl_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/internal/testserver"
)

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
