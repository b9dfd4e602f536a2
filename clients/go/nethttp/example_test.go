package nethttp_test

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/nethttp"
)

// The policies of a file in front of a ServeMux.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	mw, err := nethttp.New(rdb, nethttp.File("policies.yaml"),
		nethttp.OnDecision(func(e nethttp.DecisionEvent) {
			if e.Outcome == nethttp.Denied {
				log.Printf("refused %s %s", e.Method, e.Path)
			}
		}))
	if err != nil {
		log.Fatal(err) // names the field at fault: policies[0].burst
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	_ = http.ListenAndServe("127.0.0.1:8080", mw.Handler(mux))
}
