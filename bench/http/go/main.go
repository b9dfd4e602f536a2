// make bench-http's net/http app (bench/README.md, "make bench-http"): the
// same two routes, /open and /half, served four ways, chosen by the first
// argument:
//
//	none   no limiter
//	librl  librl's middleware (clients/go/nethttp) on the policies file,
//	       its checks over the client package's pipelined connection
//	       (nethttp.PipelinedConnection)
//	peer   ulule/limiter v3 with its Redis store, the stdlib middleware
//	floor  a bare handler sending the same RL.ALL through the same client
//	       path librl takes (the client package's pipelined connection)
//
// Env: PORT, REDIS_URL, LIBRL_POLICIES (bench/http/policies.json). The
// limits are that file's: /open 1,000,000,000 a minute per client address
// (never refuses), /half 1 per 10 s per X-Client header (the load sends a
// fresh subject and a spent one in turn, so half are refused).
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	librl "github.com/librl/librl/clients/go"
	"github.com/librl/librl/clients/go/nethttp"
)

const (
	openLimit = 1_000_000_000
	openMs    = 60_000
	halfLimit = 1
	halfMs    = 10_000
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
})

func routes(open, half http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/open", open)
	mux.Handle("/half", half)
	return mux
}

func peer(client *redis.Client) http.Handler {
	store, err := sredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "ulule", MaxRetry: 3})
	if err != nil {
		log.Fatal(err)
	}
	byHeader := func(r *http.Request) string { return r.Header.Get("X-Client") }
	open := stdlib.NewMiddleware(limiter.New(store, limiter.Rate{Period: openMs * time.Millisecond, Limit: openLimit}))
	half := stdlib.NewMiddleware(limiter.New(store, limiter.Rate{Period: halfMs * time.Millisecond, Limit: halfLimit}),
		stdlib.WithKeyGetter(byHeader))
	return routes(open.Handler(ok), half.Handler(ok))
}

// floor answers after one RL.ALL with librl's own key and arguments, read
// from the request as simply as possible, sent as librl sends it (through
// the client package's pipelined connection, waiting at most the policy
// file's timeout, which the connection keeps): what the middleware adds
// on top is the difference.
func floor(client *redis.Client) (http.Handler, error) {
	lim, err := librl.New(client).WithPipelinedConnection()
	if err != nil {
		return nil, err
	}
	lim = lim.WithTimeout(5 * time.Second) // policies.json's timeout
	check := func(w http.ResponseWriter, r *http.Request, clause librl.Clause) {
		// As the middleware's check: the request's context would add a
		// Done channel per request and nothing the timeout does not.
		d, err := lim.All(context.Background(), clause)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		ok(w, r)
	}
	openClause, err := librl.Fixed("", openLimit, openMs*time.Millisecond).Prepare()
	if err != nil {
		return nil, err
	}
	halfClause, err := librl.Fixed("", halfLimit, halfMs*time.Millisecond).Prepare()
	if err != nil {
		return nil, err
	}
	open := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		check(w, r, openClause.For("rl:{ip:"+host+"}:open"))
	})
	half := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		check(w, r, halfClause.For("rl:{header:x-client:"+r.Header.Get("X-Client")+"}:half"))
	})
	return routes(open, half), nil
}

// app is one variant's handler.
func app(variant string, client *redis.Client) (http.Handler, error) {
	switch variant {
	case "none":
		return routes(ok, ok), nil
	case "librl":
		mw, err := nethttp.New(client, nethttp.File(os.Getenv("LIBRL_POLICIES")), nethttp.PipelinedConnection())
		if err != nil {
			return nil, err
		}
		return mw.Handler(routes(ok, ok)), nil
	case "peer":
		return peer(client), nil
	case "floor":
		return floor(client)
	}
	return nil, fmt.Errorf("unknown variant %q", variant)
}

// profile writes a CPU profile to path (when set) from now until SIGTERM,
// for bench/http/profile_http.py.
func profile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() {
		<-stop
		pprof.StopCPUProfile()
		_ = f.Close()
		os.Exit(0)
	}()
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: bench-http-go none|librl|peer|floor")
	}
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatalf("REDIS_URL: %v", err)
	}
	// Every variant's client ends a call at its context's deadline: the
	// librl middleware then bounds its exchange by the policy file's
	// timeout on the request's goroutine (docs/http/go.md); the others
	// pass contexts without a deadline, which it leaves alone.
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	handler, err := app(os.Args[1], client)
	if err != nil {
		log.Fatal(err)
	}
	profile(os.Getenv("BENCH_CPUPROFILE"))
	srv := &http.Server{Addr: "127.0.0.1:" + os.Getenv("PORT"), Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if err := client.Ping(context.Background()).Err(); err != nil {
		log.Fatalf("redis: %v", err)
	}
	log.Fatal(srv.ListenAndServe())
}
