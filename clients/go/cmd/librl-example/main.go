// Command librl-example is the net/http example app of
// scripts/serve-example go (docs/http.md, Conformance and examples): every
// path and method answers "ok" behind librl's middleware, with the
// policies of the file named by LIBRL_POLICIES (read again on SIGHUP),
// against REDIS_URL or the cluster REDIS_CLUSTER_NODES (comma-separated
// host:port), on PORT (and HOST, default 127.0.0.1).
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/nethttp"
)

// quiet drops go-redis's own log lines (one per failed dial while Redis
// is away): the middleware logs the fail mode's warning once per interval.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// reloadOnHangup re-reads the policy file on each SIGHUP (docs/http/go.md,
// Reload), saying on stderr whether the new configuration took.
func reloadOnHangup(mw *nethttp.Middleware, policies string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for range hup {
		if err := mw.Reload(nethttp.File(policies)); err != nil {
			fmt.Fprintln(os.Stderr, err)
		} else {
			fmt.Fprintln(os.Stderr, "librl: configuration reloaded")
		}
	}
}

func main() {
	redis.SetLogger(quiet{})
	policies := os.Getenv("LIBRL_POLICIES")
	if policies == "" {
		log.Fatal("librl-example: set LIBRL_POLICIES to a policy file (YAML or JSON)")
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	var client redis.UniversalClient
	if nodes := os.Getenv("REDIS_CLUSTER_NODES"); nodes != "" {
		// ContextTimeoutEnabled: go-redis ends a call at the middleware's
		// deadline (docs/http/go.md, Redis clients).
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ","), ContextTimeoutEnabled: true})
	} else {
		url := os.Getenv("REDIS_URL")
		if url == "" {
			url = "redis://127.0.0.1:6379"
		}
		opts, err := redis.ParseURL(url)
		if err != nil {
			log.Fatalf("librl-example: REDIS_URL: %v", err)
		}
		opts.ContextTimeoutEnabled = true
		client = redis.NewClient(opts)
	}
	mw, err := nethttp.New(client, nethttp.File(policies), nethttp.Register(exampleapp.Resolvers))
	if err != nil {
		log.Fatal(err)
	}
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	srv := &http.Server{Addr: host + ":" + port, Handler: exampleapp.Handler(mw), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go reloadOnHangup(mw, policies)
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("librl-example: serving on %s with %s", srv.Addr, policies)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
