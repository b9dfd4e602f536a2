package librl

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTryAgainWait is how long a call keeps retrying while its slot
// migrates (WithTryAgainWait), unless its context ends sooner: a slot of
// a few thousand keys takes a second or two to move.
const DefaultTryAgainWait = 5 * time.Second

// The backoff between retries: short at first (most TRYAGAINs clear as
// soon as the next batch of keys has moved), growing so that a long
// migration is not polled hard.
const (
	firstBackoff = 5 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
)

// WithTryAgainWait returns a Limiter whose calls keep retrying for up to d
// (or until their context ends, if sooner) while their slot migrates
// between cluster nodes. The cluster then answers TRYAGAIN to a call whose
// keys are partly on each node, for instance one whose override key was
// never set, or an RL.ALL whose per-second key expired while its per-day
// key lives on, until the whole slot has moved (docs/operations.md, Redis
// Cluster); go-redis retries it only three times. A MOVED or ASK that
// go-redis returns after its own redirects ran out is retried the same
// way. New sets DefaultTryAgainWait; d <= 0 leaves go-redis's own
// retries alone. TRYAGAIN means the server ran nothing, so a retry never
// counts a call twice.
func (l *Limiter) WithTryAgainWait(d time.Duration) *Limiter {
	out := *l
	out.tryAgain = max(d, 0)
	return &out
}

// retrying runs attempt until it succeeds or fails other than by a slot
// in motion, or until the retry window (tryAgain from the call's start,
// or the context's deadline if sooner) closes. A retry's context ends
// with the window, so that go-redis's own pauses between its retries do
// not outlast it. The error is the last attempt's, or the last TRYAGAIN
// when the window closed during an attempt.
func (l *Limiter) retrying(ctx context.Context, attempt func(context.Context) error) error {
	start := time.Now()
	err := attempt(ctx)
	if err == nil || l.tryAgain <= 0 || !l.slotMoving(err) {
		return err
	}
	deadline := start.Add(l.tryAgain)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	backoff := firstBackoff
	for {
		if time.Until(deadline) < backoff {
			return err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		window, cancel := context.WithDeadline(ctx, deadline)
		next := attempt(window)
		closed := window.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case closed && errors.Is(next, context.DeadlineExceeded):
			return err // the window closed in go-redis's pause: the TRYAGAIN stands
		case next == nil || !l.slotMoving(next):
			return next
		}
		err = next
		backoff = min(2*backoff, maxBackoff)
	}
}

// slotMoving: the call was not run because its slot is being migrated.
func (l *Limiter) slotMoving(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	if strings.HasPrefix(re.Error(), "TRYAGAIN ") {
		return true
	}
	kind, _ := redirect(err)
	return kind != "" && l.cluster != nil
}
