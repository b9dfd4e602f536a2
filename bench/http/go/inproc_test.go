package main

// The variants in process, without HTTP: each handler called directly by
// 20 goroutines, so that the CPU a request costs is the handler's and the
// Redis exchange's alone (make bench-http's CPU per request includes the
// HTTP server's). Against a running server with the module:
//
//	REDIS_URL=redis://127.0.0.1:6379 LIBRL_POLICIES=../policies.json \
//	  go test -run '^$' -bench . -benchtime 3s -count 3
//
// cpu-µs/op is the process's user + system time per request (all
// threads); allocs/op and B/op are Go's.

import (
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sink is a ResponseWriter that keeps nothing but the headers, cleared
// for each request as a server's would be new.
type sink struct {
	h      http.Header
	status int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }
func (s *sink) WriteHeader(status int)      { s.status = status }

// nonce keeps each run's fresh subjects fresh.
var nonce = strconv.FormatInt(time.Now().UnixNano(), 36)

func cpu() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkVariants(b *testing.B) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		b.Skip("REDIS_URL names no server with the module")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true // as main sets it
	client := redis.NewClient(opts)
	defer client.Close()
	for _, load := range []string{"open", "half"} {
		for _, variant := range []string{"floor", "librl", "peer"} {
			h, err := app(variant, client)
			if err != nil {
				b.Fatal(err)
			}
			// n numbers the fresh subjects across the benchmark's runs.
			var n atomic.Int64
			b.Run(load+"/"+variant, func(b *testing.B) {
				var refused atomic.Int64
				b.SetParallelism(10) // 20 goroutines on 2 cores
				b.ReportAllocs()
				start := cpu()
				b.RunParallel(func(pb *testing.PB) {
					s := &sink{h: http.Header{}}
					r, _ := http.NewRequest(http.MethodGet, "http://bench/"+load, nil)
					r.RemoteAddr = "127.0.0.1:40000"
					for pb.Next() {
						if load == "half" {
							i := n.Add(1)
							client := "spent"
							if i%2 == 0 {
								client = "c" + strconv.FormatInt(i, 10) + variant + nonce
							}
							r.Header = http.Header{"X-Client": {client}}
						}
						clear(s.h)
						s.status = 200
						h.ServeHTTP(s, r)
						if s.status == http.StatusTooManyRequests {
							refused.Add(1)
						}
					}
				})
				b.ReportMetric(float64(cpu()-start)/1e3/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
			})
		}
	}
}
