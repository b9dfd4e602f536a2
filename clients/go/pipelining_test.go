package librl_test

import (
	"context"
	"errors"
	"net"
	"strings"
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
	callEndsAtItsDeadline(t, func(l *librl.Limiter) (*librl.Limiter, error) {
		p, err := l.WithAutoPipelining()
		if err == nil && (!p.AutoPipelined() || l.AutoPipelined()) {
			t.Fatal("AutoPipelined does not say which Limiter pipelines")
		}
		return p, err
	})
}

// The same over the pipelined connection: the reply read after the pause
// is dropped and the connection stays in use.
func TestPipelinedConnectionCallEndsAtItsDeadline(t *testing.T) {
	callEndsAtItsDeadline(t, func(l *librl.Limiter) (*librl.Limiter, error) {
		p, err := l.WithPipelinedConnection()
		if err == nil && (!p.PipelinedConnection() || l.PipelinedConnection()) {
			t.Fatal("PipelinedConnection does not say which Limiter has one")
		}
		return p, err
	})
}

func callEndsAtItsDeadline(t *testing.T, pipelined func(*librl.Limiter) (*librl.Limiter, error)) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := pipelined(librl.New(rdb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
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

// A Limiter's own timeout (WithTimeout) ends a call as its context's
// deadline would: over the pipelined connection, where the connection
// keeps it, and over the client's own connections, where a context does.
// The calls queued at different moments each end at their own deadline,
// which the connection's one timer is armed for in turn.
func TestLimiterTimeoutEndsEachCallAtItsDeadline(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	conn, err := librl.New(rdb).WithPipelinedConnection()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	for _, c := range []struct {
		name string
		lim  *librl.Limiter
	}{{"pipelined connection", conn}, {"client's connections", librl.New(rdb)}} {
		t.Run(c.name, func(t *testing.T) {
			l := c.lim.WithTimeout(150 * time.Millisecond)
			// The connection is up before the pause.
			if _, err := l.All(ctx, librl.Fixed("{t}:warm", 5, time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := srv.Client().Do(ctx, "CLIENT", "PAUSE", "1200", "WRITE").Err(); err != nil {
				t.Fatal(err)
			}
			type ended struct {
				took time.Duration
				err  error
			}
			results := make(chan ended, 3)
			for i := range 3 {
				time.Sleep(time.Duration(i) * 60 * time.Millisecond)
				go func() {
					start := time.Now()
					_, err := l.All(ctx, librl.Fixed("{t}:a", 5, time.Minute))
					results <- ended{time.Since(start), err}
				}()
			}
			for range 3 {
				r := <-results
				if !errors.Is(r.err, context.DeadlineExceeded) || r.took < 140*time.Millisecond || r.took > 700*time.Millisecond {
					t.Fatalf("during the pause: %v after %v, want the deadline's error after about 150 ms", r.err, r.took)
				}
			}
			// A context's deadline still ends a call sooner.
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := l.All(short, librl.Fixed("{t}:a", 5, time.Minute)); !errors.Is(err, context.DeadlineExceeded) ||
				time.Since(start) > 120*time.Millisecond {
				t.Fatalf("with a 30 ms context: %v after %v", err, time.Since(start))
			}
			_ = srv.Client().Do(ctx, "CLIENT", "UNPAUSE").Err()
			// After the pause the calls given up on the pipelined
			// connection ran too (four), then this one; go-redis closes a
			// connection whose call it gave up on, and the server drops
			// what such a connection still held.
			a, err := l.All(ctx, librl.Fixed("{t}:a", 50, time.Minute))
			if err != nil || !a.Allowed || (c.lim == conn && a.Decisions[0].Count != 5) {
				t.Fatalf("after the pause: %+v, %v; want admitted (on the pipelined connection as the fifth call)", a, err)
			}
			if _, err := srv.Client().Del(ctx, "{t}:a").Result(); err != nil {
				t.Fatal(err)
			}
			// A call the server holds (Wait) ends at the timeout too, on
			// go-redis's connections: with go-redis's error for a
			// context's deadline, the read's timeout.
			if _, err := l.Token(ctx, "{t}:w", 1, time.Second); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			_, err = l.Token(ctx, "{t}:w", 1, time.Second, librl.Wait(1500*time.Millisecond))
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 700*time.Millisecond {
				t.Fatalf("a held call: %v after %v, want a timeout after about 150 ms", err, time.Since(start))
			}
		})
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

// A connection whose replies stop for longer than the client's
// ReadTimeout is taken for dead: the calls on it fail, and the next call
// dials again.
func TestPipelinedConnectionRedialsAfterAFailure(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := librl.New(rdb).WithPipelinedConnection()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := l.Fixed(ctx, "{p}:a", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().Do(ctx, "CLIENT", "PAUSE", "800", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = l.Fixed(ctx, "{p}:a", 5, time.Minute)
	var le *librl.Error
	if took := time.Since(start); !errors.As(err, &le) || le.ServerError() || !strings.Contains(err.Error(), "ReadTimeout") ||
		took > 700*time.Millisecond {
		t.Fatalf("during the pause: %v after %v, want the connection given up after about 200 ms", err, took)
	}
	// Once the pause is over, the next call dials a new connection.
	time.Sleep(time.Until(start.Add(900 * time.Millisecond)))
	d, err := l.Fixed(ctx, "{p}:a", 5, time.Minute)
	if err != nil || !d.Allowed {
		t.Fatalf("after the pause: %+v, %v", d, err)
	}
	// A killed connection fails its calls the same way; the next dials.
	if err := srv.Client().Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := l.Fixed(ctx, "{p}:a", 5, time.Minute)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded after the kill: %v", err)
		}
	}
	// A server's error reply is the call's error; the connection stays.
	if err := srv.Client().Set(ctx, "{p}:s", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = l.Fixed(ctx, "{p}:s", 5, time.Minute)
	if !errors.As(err, &le) || !le.ServerError() || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("got %v, want the server's WRONGTYPE", err)
	}
	if _, err := l.Fixed(ctx, "{p}:a", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Fixed(ctx, "{p}:a", 5, time.Minute); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("after Close: %v, want the connection's closed error", err)
	}
}

// The connection is dialled with the client's database and credentials.
func TestPipelinedConnectionSelectsAndAuthenticates(t *testing.T) {
	srv := testserver.Start(t, testserver.ByName("redis7"))
	admin := srv.Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "limiter", "on", ">secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3, Username: "limiter", Password: "secret"})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := librl.New(rdb).WithPipelinedConnection()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := l.Fixed(ctx, "{p}:db", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	db3 := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3})
	t.Cleanup(func() { _ = db3.Close() })
	if n, err := db3.Exists(ctx, "{p}:db").Result(); err != nil || n != 1 {
		t.Fatalf("the key in database 3: %d, %v", n, err)
	}
	wrong := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "limiter", Password: "wrong"})
	t.Cleanup(func() { _ = wrong.Close() })
	lw, err := librl.New(wrong).WithPipelinedConnection()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lw.Close() })
	// The connection failed, which is not the server answering the call.
	_, err = lw.Fixed(ctx, "{p}:db", 5, time.Minute)
	var le *librl.Error
	if !errors.As(err, &le) || le.ServerError() || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("with a wrong password: %v, want the AUTH error, not as a server's reply", err)
	}
}

// Only a standalone client without options the connection cannot honour.
func TestPipelinedConnectionRefusesWhatItCannotServe(t *testing.T) {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	if _, err := librl.New(cluster).WithPipelinedConnection(); err == nil || !strings.Contains(err.Error(), "WithAutoPipelining") {
		t.Fatalf("a cluster client: %v, want an error pointing to WithAutoPipelining", err)
	}
	hooked := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1",
		OnConnect: func(context.Context, *redis.Conn) error { return nil }})
	t.Cleanup(func() { _ = hooked.Close() })
	if _, err := librl.New(hooked).WithPipelinedConnection(); err == nil || !strings.Contains(err.Error(), "OnConnect") {
		t.Fatalf("an OnConnect hook: %v, want an error naming it", err)
	}
}
