package nethttp

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	librl "github.com/librl/librl/clients/go"
)

// The breaker (docs/http.md, Fail modes): after Redis fails or times out,
// requests apply the fail mode at once for a back-off, without waiting on
// Redis, while one request at a time probes it; the probe's success
// restores normal checks, its failure doubles the back-off.

// The back-off: first after a failure, doubled after each failed probe,
// capped.
const (
	breakerFirst = time.Second
	breakerMax   = 30 * time.Second
)

// errBreakerOpen is the fail mode's reason while the breaker is open.
var errBreakerOpen = errors.New("Redis failed lately; the fail mode applies without waiting on it until the next probe")

// breaker is shared by every configuration a middleware has (a reload does
// not make Redis healthy). Its closed state costs a request one atomic
// load.
type breaker struct {
	until   atomic.Int64 // Unix nanoseconds until which it is open; 0: closed
	backoff atomic.Int64 // the current back-off, in nanoseconds
	probing atomic.Bool  // a probe is in flight
	now     func() time.Time
}

// admit says whether the request may ask Redis (false: apply the fail mode
// now) and whether it is the probe.
func (b *breaker) admit() (ask, probe bool) {
	until := b.until.Load()
	if until == 0 {
		return true, false
	}
	if b.now().UnixNano() < until || !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// after records how the exchange went. A failure opens the breaker (or, for
// the probe, doubles the back-off); the probe's success closes it. Other
// requests' successes change nothing: they began before it opened.
func (b *breaker) after(err error, probe bool) {
	if err == nil || !outage(err) {
		if probe {
			b.backoff.Store(0)
			b.until.Store(0)
			b.probing.Store(false)
		}
		return
	}
	var back time.Duration
	switch {
	case probe:
		back = min(2*time.Duration(b.backoff.Load()), breakerMax)
	case b.until.Load() != 0:
		return // already open
	default:
		back = breakerFirst
	}
	b.backoff.Store(int64(back))
	b.until.Store(b.now().Add(back).UnixNano())
	if probe {
		b.probing.Store(false)
	}
}

// outage: the error says Redis cannot serve (the connection, a timeout, a
// server loading or failing over), not that it answered this call with an
// error (WRONGTYPE, a bad argument), which the next call need not meet.
func outage(err error) bool {
	var arg *librl.ArgError
	if errors.As(err, &arg) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, code := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN"} {
		if strings.HasPrefix(re.Error(), code) {
			return true
		}
	}
	return false
}
