package nethttp

import (
	"net/http"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// Queues (docs/http.md, Lockouts and queues): a `queue` policy's clause
// books the request's turn with RESERVE, and the request waits here, on
// its own goroutine's timer, never on a Redis connection (no WAIT).

// turn is how long an admitted request waits for its turn: the latest of
// its enforced queue policies' reserved waits (0: none).
func turn(checks []check, decisions []librl.Decision) time.Duration {
	var wait time.Duration
	for i, c := range checks {
		if c.p.queue > 0 && !c.p.shadow && i < len(decisions) && decisions[i].Allowed {
			wait = max(wait, decisions[i].RetryAfter)
		}
	}
	return wait
}

// await waits for the request's turn; false when its client went away
// first: the request is not served, and what it booked is given back.
func (m *engine) await(r *http.Request, wait time.Duration, checks []check) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		var back []check
		for _, c := range checks {
			if !c.p.shadow {
				back = append(back, c)
			}
		}
		m.refund(back)
		return false
	}
}
