package librl

import (
	"context"
	"errors"
	"time"
)

// DefaultTryAgainWait is how long a call caught by a slot move keeps
// being retried (WithTryAgainWait), unless its context ends sooner.
const DefaultTryAgainWait = 5 * time.Second

// The backoff between retries: short at first (a node catching up with a
// move's end does so in milliseconds), growing so that a longer wait is
// not polled hard.
const (
	firstBackoff = 5 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
)

// WithTryAgainWait returns a Limiter whose calls, caught by a slot moving
// between cluster nodes, are retried for up to d from their start (or
// until their context ends, if sooner): a MOVED or ASK that go-redis
// returns after its own redirects ran out (nodes disagreeing on the owner
// while a move ends), and a TRYAGAIN to a call the package cannot send as
// one-key calls (every call it builds can be: split.go). New sets
// DefaultTryAgainWait; d <= 0 leaves go-redis's own retries alone. Those
// replies mean the server ran nothing, so a retry never counts a call
// twice.
func (l *Limiter) WithTryAgainWait(d time.Duration) *Limiter {
	out := *l
	out.tryAgain = max(d, 0)
	return &out
}

// retrying runs attempt until it succeeds or fails other than by a slot
// in motion (with split, a TRYAGAIN is returned at once: the caller sends
// the call as one-key calls instead), or until the retry window (tryAgain from the call's start,
// or the context's deadline if sooner) closes. A retry's context ends
// with the window, so that go-redis's own pauses between its retries do
// not outlast it. The error is the last attempt's, or the last TRYAGAIN
// when the window closed during an attempt.
func (l *Limiter) retrying(ctx context.Context, split bool, attempt func(context.Context) error) error {
	start := time.Now()
	err := attempt(ctx)
	if err == nil || l.tryAgain <= 0 || !l.slotMoving(err) || (split && isTryAgain(err)) {
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
		case next == nil || !l.slotMoving(next) || (split && isTryAgain(next)):
			return next
		}
		err = next
		backoff = min(2*backoff, maxBackoff)
	}
}

// slotMoving: the call was not run because its slot is being migrated.
func (l *Limiter) slotMoving(err error) bool {
	if isTryAgain(err) {
		return true
	}
	kind, _ := redirect(err)
	return kind != "" && l.cluster != nil
}
