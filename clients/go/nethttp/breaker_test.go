package nethttp

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The breaker's states on a clock of the test's: open after a failure for
// the first back-off, one probe at a time after it, doubling to the cap on
// failed probes, closed by a probe that succeeds; a reply that is an error
// (WRONGTYPE) is not an outage.
func TestBreakerBackOff(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &breaker{now: func() time.Time { return now }}
	down := errors.New("dial tcp: connection refused")
	if ask, probe := b.admit(); !ask || probe {
		t.Fatalf("closed: ask %v probe %v", ask, probe)
	}
	b.after(redis.Error(wrongType("WRONGTYPE Operation against a key holding the wrong kind of value")), false)
	if ask, _ := b.admit(); !ask {
		t.Fatal("a WRONGTYPE reply opened the breaker")
	}
	b.after(down, false)
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		now = now.Add(want - time.Millisecond)
		if ask, _ := b.admit(); ask {
			t.Fatalf("asked Redis %v before the back-off of %v ended", want-time.Millisecond, want)
		}
		now = now.Add(time.Millisecond)
		ask, probe := b.admit()
		if !ask || !probe {
			t.Fatalf("after %v: ask %v probe %v, want the probe", want, ask, probe)
		}
		if ask, _ := b.admit(); ask {
			t.Fatal("a second request asked Redis while the probe is in flight")
		}
		b.after(down, true)
	}
	now = now.Add(30 * time.Second)
	_, probe := b.admit()
	b.after(nil, probe)
	if ask, probe := b.admit(); !ask || probe {
		t.Fatalf("after a probe that succeeded: ask %v probe %v", ask, probe)
	}
	b.after(down, false)
	now = now.Add(time.Second)
	if ask, probe := b.admit(); !ask || !probe {
		t.Fatal("the back-off did not start again at 1 s after recovery")
	}
}

type wrongType string

func (e wrongType) Error() string { return string(e) }
func (wrongType) RedisError()     {}
