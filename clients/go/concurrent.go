package librl

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLeaseNotHeld is Renew's error (and KeepAlive's cause) when the lease
// is not held: it ended before the renewal came (its slots may be someone
// else's by now), was released, or was never taken (the call was refused).
// The work it guarded should stop.
var ErrLeaseNotHeld = errors.New("librl: the lease is not held: it ended, was released, or was never taken")

// ReleaseTimeout is how long Release waits for the server when the context
// it is given is already done: Release then sends with a fresh context
// (keeping the given one's values), so a cancelled request still gives
// its slots back at once.
const ReleaseTimeout = time.Second

// maxLeaseID is the largest lease id the server gives: 2^53 - 1.
const maxLeaseID = 1<<53 - 1

// leaseSpec is what names a lease besides its id: the words RELEASE and
// RENEW repeat.
type leaseSpec struct {
	key      string
	limit    int64
	length   time.Duration
	override string // "" when none
}

func specOf(c Clause, o options) *leaseSpec {
	s := &leaseSpec{key: c.key, limit: c.limit, length: c.window}
	if o.has(optOverride) {
		s.override = o.override
	}
	return s
}

// Lease is slots of a concurrency limit taken by Acquire, or by a
// Concurrent clause of All (AllDecision.Lease): held until Release, or
// until its length has passed since it was taken or last renewed, so a
// holder that crashes never keeps them. Its methods are safe for
// concurrent use, and do nothing on a Lease that holds nothing.
type Lease struct {
	// Decision is the reply of the call that took the lease: Allowed and
	// LeaseID > 0 when it is held; when refused, RetryAfter is the least
	// wait after which enough leases end by themselves (a release may free
	// a slot sooner). Allowed with LeaseID 0: admitted without a lease
	// (rl.mode off, or monitor mode where on would have refused).
	Decision

	l     *Limiter
	spec  *leaseSpec
	taken time.Time // when the call that took it was sent; zero if unknown

	releasing sync.Mutex // one RELEASE at a time
	released  bool
	result    Decision    // the RELEASE's answer, once released
	ended     atomic.Bool // released: renewals stop

	mu      sync.Mutex
	renewal *renewal // the running KeepAlive, if any
}

// Acquire is RL.CONCURRENT: it takes Cost slots (default 1) of limit as
// one lease that ends by itself lease after it was taken unless Renew (or
// KeepAlive) extends it. Options: Cost, Wait (wait for a slot up to a
// duration, on a connection of its own), Override (the override's limit
// and window replace limit and lease), Peek.
//
//	lease, err := lim.Acquire(ctx, "llm:{key7}", 5, time.Minute)
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx) // also when ctx is cancelled: see Release
//	if !lease.Allowed {
//		return tooBusy(lease.RetryAfter)
//	}
//
// A refusal is not an error: the Lease then holds nothing, and Release does
// nothing. With WithDurability, a *DurabilityError comes with the Lease,
// held on the primary.
func (l *Limiter) Acquire(ctx context.Context, key string, limit int64, lease time.Duration, opts ...Option) (*Lease, error) {
	k, err := limiterCall("Acquire", Concurrent(key, limit, lease), opts)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	e, err := l.decide(ctx, k)
	var de *DurabilityError
	if err != nil && !errors.As(err, &de) {
		return nil, err
	}
	return l.newLease(k.leases[0], e.one, sent), err
}

// HeldLease is the lease id taken on key, for releasing or renewing it
// where Acquire did not run: a goroutine or process handed the id (a job
// queued with the lease it holds). key, limit, lease and the Override
// option are those of the call that took it.
func (l *Limiter) HeldLease(key string, limit int64, lease time.Duration, id int64, opts ...Option) (*Lease, error) {
	const where = "HeldLease"
	o, err := collect(where, optOverride, opts)
	if err != nil {
		return nil, err
	}
	if _, err := durationArg(where, "lease", lease, false); err != nil {
		return nil, err
	}
	if id < 1 || id > maxLeaseID {
		return nil, argErr(where, "a lease id is from 1 to 2^53 - 1 (9007199254740991), got %d", id)
	}
	spec := specOf(Concurrent(key, limit, lease), o)
	return &Lease{Decision: Decision{Allowed: true, Limit: limit, LeaseID: id}, l: l, spec: spec}, nil
}

func (l *Limiter) newLease(spec *leaseSpec, d Decision, taken time.Time) *Lease {
	return &Lease{Decision: d, l: l, spec: spec, taken: taken}
}

// Lease is the lease the Concurrent clause i took: held when the call was
// admitted, to Release, Renew or KeepAlive as Acquire's. For any other
// clause, or a denied or peeked call, a Lease that holds nothing.
func (a AllDecision) Lease(i int) *Lease {
	if i >= 0 && i < len(a.leases) && a.leases[i] != nil {
		return a.leases[i]
	}
	return &Lease{}
}

// holds: the lease has an id to release or renew.
func (x *Lease) holds() bool { return x != nil && x.l != nil && x.LeaseID != 0 }

// Release gives the lease's slots back at once (RL.CONCURRENT ... RELEASE
// id) and stops its KeepAlive. The Decision says whether the lease was
// still held (Allowed) and the slots held after it; a lease that had
// already ended is not an error. The first Release that reaches the server
// is the only one sent: later calls return its answer. A Lease that holds
// nothing (refused, Peek, nil) sends nothing.
//
// When ctx is already done (the usual case for defer lease.Release(ctx)
// in a request whose client went away), Release sends with a fresh
// context of ReleaseTimeout that keeps ctx's values: a cancelled request
// still frees its slot now rather than when the lease ends.
func (x *Lease) Release(ctx context.Context) (Decision, error) {
	if !x.holds() {
		return Decision{}, nil
	}
	x.releasing.Lock()
	defer x.releasing.Unlock()
	if x.released {
		return x.result, nil
	}
	x.stopRenewal()
	x.ended.Store(true)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer cancel()
	}
	d, err := x.send(ctx, "RELEASE")
	var de *DurabilityError
	if err != nil && !errors.As(err, &de) {
		// Not answered: a later Release may try again; the lease ends by
		// itself anyway.
		return Decision{}, err
	}
	x.released, x.result = true, d
	return d, err
}

// Renew makes the held lease last its length from now (RL.CONCURRENT ...
// RENEW id; never shorter than it already lasts): the heartbeat of work
// that may outlast it. If the lease is not held any more, Renew returns
// the server's answer with ErrLeaseNotHeld: the work should stop, as its
// slots may be someone else's. A lease admitted without one (rl.mode off
// or monitor) has nothing to renew: no call, no error.
func (x *Lease) Renew(ctx context.Context) (Decision, error) {
	switch {
	case x == nil || x.l == nil || !x.Allowed || x.ended.Load():
		return Decision{}, ErrLeaseNotHeld
	case x.LeaseID == 0:
		return Decision{}, nil
	}
	d, err := x.send(ctx, "RENEW")
	var de *DurabilityError
	if err != nil && !errors.As(err, &de) {
		return Decision{}, err
	}
	// Monitor and off mode answer every call allowed: nothing is enforced.
	if !d.Allowed {
		return d, ErrLeaseNotHeld
	}
	return d, err
}

// send sends RELEASE or RENEW for the lease.
func (x *Lease) send(ctx context.Context, verb string) (Decision, error) {
	s := x.spec
	var o options
	if s.override != "" {
		o.set, o.override = optOverride, s.override
	}
	k, err := partCall(verb, part{c: Concurrent(s.key, s.limit, s.length), o: o, verb: verb, id: x.LeaseID})
	if err != nil {
		return Decision{}, err
	}
	e, err := x.l.decide(ctx, k)
	return e.one, err
}

// renewal is a running KeepAlive.
type renewal struct {
	cancel context.CancelFunc // ends the renewals
	done   chan struct{}      // closed when they have ended
}

// KeepAlive renews the lease in the background every third of its length
// (RENEW, as Renew does) until Release, stop, or ctx is done, for work
// that may outlast the lease. It returns a child of ctx for the work,
// cancelled when the lease may be lost, context.Cause saying why:
// ErrLeaseNotHeld when the server answers that the lease has ended, or
// the error of the last renewal when renewals failed on the way (a
// timeout, a failover) until too little of the lease was left for
// another try (two failures in a row). stop ends the renewals and cancels
// the work's context; Release ends the renewals only. One KeepAlive per
// lease: a second one returns a context cancelled with an *ArgError.
//
//	work, stop := lease.KeepAlive(ctx)
//	defer stop()
//	err := export(work) // cancelled if the lease is lost: context.Cause(work)
//
// Renewals come every third of the shorter of the lease's length and the
// ResetAfter its acquire answered (an Override may make leases shorter
// than Acquire's lease). A lease that holds nothing returns a context
// cancelled with ErrLeaseNotHeld, except one admitted without a lease
// (rl.mode off or monitor), which needs no renewal.
func (x *Lease) KeepAlive(ctx context.Context) (work context.Context, stop context.CancelFunc) {
	work, cancel := context.WithCancelCause(ctx)
	stopWork := func() { cancel(context.Canceled) }
	switch {
	case x == nil || x.l == nil || !x.Allowed || x.ended.Load():
		cancel(ErrLeaseNotHeld)
		return work, stopWork
	case x.LeaseID == 0:
		return work, stopWork
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.renewal != nil {
		cancel(argErr("KeepAlive", "the lease is already kept alive: one KeepAlive per lease"))
		return work, stopWork
	}
	life, end := context.WithCancel(work)
	r := &renewal{cancel: end, done: make(chan struct{})}
	x.renewal = r
	go x.renew(life, cancel, r)
	return work, func() {
		x.stopRenewal()
		cancel(context.Canceled)
	}
}

// stopRenewal ends the running KeepAlive, if any, and waits until it has.
func (x *Lease) stopRenewal() {
	x.mu.Lock()
	r := x.renewal
	x.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// period is the time between renewals: a third of the lease's length, or
// of the acquire's ResetAfter when an override made it shorter.
func (x *Lease) period() time.Duration {
	length := x.spec.length
	if x.ResetAfter > 0 && x.ResetAfter < length {
		length = x.ResetAfter
	}
	return max(length/3, time.Millisecond)
}

// renew is KeepAlive's loop. last is when the lease was last known to
// start its length (the send time of the call that set it: never later
// than the server's moment), so the lease lasts at least until
// last + length; a renewal that fails is tried again a period later while
// that is still before then.
func (x *Lease) renew(life context.Context, lose context.CancelCauseFunc, r *renewal) {
	defer close(r.done)
	defer r.cancel()
	every := x.period()
	length := min(x.spec.length, every*3)
	last := x.taken
	next := last.Add(every)
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-life.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(life, every)
		_, err := x.Renew(rctx)
		cancel()
		if life.Err() != nil {
			return // stopped, or the work is over
		}
		switch {
		case err == nil:
			last, next = sent, sent.Add(every)
		case errors.Is(err, ErrLeaseNotHeld):
			lose(err)
			return
		case !sent.Add(every).Before(last.Add(length)):
			lose(err)
			return
		default:
			next = sent.Add(every)
		}
	}
}
