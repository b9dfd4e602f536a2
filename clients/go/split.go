package librl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// While a slot moves key by key, the cluster answers TRYAGAIN to a call
// naming several keys unless all of them are on the side it asks, and a
// key that exists nowhere (an override never set, an RL.ALL clause whose
// key expired) is on neither: such a call cannot run until the whole
// slot has moved, however long it retries. A call naming one key always
// runs (on the source, or on the target after ASK). So a call refused
// with TRYAGAIN is sent again as one-key calls (docs/contributing.md,
// Calls while a slot moves):
//
//   - a call with OVERRIDE okey reads the override (RL.OVERRIDE GET), then
//     is sent without OVERRIDE, with the override's limit, window and
//     burst in place of its own when there is one: the override is read a
//     moment before the call rather than in its atomic step;
//   - RL.ALL runs its clauses one at a time; when one denies, the clauses
//     already admitted are given back (REFUND their cost, RELEASE their
//     lease) and the others answered with PEEK, and the reply is built as
//     RL.ALL's. All-or-nothing then holds by compensation: another client
//     may see a clause's count for a moment.

// movingFor is how long a slot that answered TRYAGAIN is taken to be
// moving: its calls naming several keys are sent split at once meanwhile,
// rather than after the TRYAGAIN that go-redis retries three times.
const movingFor = time.Second

// movingSlots are the slots that answered TRYAGAIN lately, and until when
// they are taken to be moving; shared by a Limiter and those derived from
// it.
type movingSlots struct {
	mu    sync.Mutex
	until map[int]time.Time
}

func (m *movingSlots) mark(slot int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[int]time.Time{}
	}
	m.until[slot] = time.Now().Add(movingFor)
}

func (m *movingSlots) moving(slot int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.until[slot]
	if ok && !time.Now().Before(until) {
		delete(m.until, slot)
		return false
	}
	return ok
}

// isTryAgain: the server refused the call, running nothing, because its
// keys are on both sides of a slot being moved.
func isTryAgain(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "TRYAGAIN ")
}

// splittable: k names several keys and can be sent as one-key calls.
func (k call) splittable() bool {
	return k.parts != nil || (k.name == "RL.OVERRIDE DEL" && len(k.keys) > 1)
}

// sendSplit sends k, refused with TRYAGAIN, as one-key calls, and returns
// the reply k would have had.
func (l *Limiter) sendSplit(ctx context.Context, k call) (any, error) {
	switch k.name {
	case "RL.ALL":
		return l.splitAll(ctx, k)
	case "RL.OVERRIDE DEL":
		var deleted int64
		for _, key := range k.keys {
			r, err := l.send(ctx, overrideCall("DEL", []any{"RL.OVERRIDE", "DEL", key}, []string{key}, effectClearAll, true), nil)
			n, _ := r.(int64)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		return deleted, nil
	}
	return l.oneKey(ctx, k.parts[0])
}

// oneKey sends one part naming its key only: its override, if any, read
// first and applied by the package.
func (l *Limiter) oneKey(ctx context.Context, p part) (any, error) {
	if p.o.has(optOverride) {
		ov, err := l.OverrideGet(ctx, p.o.override)
		if err != nil {
			return nil, err
		}
		p = p.overriddenBy(ov)
	}
	k, err := partCall(p.verb, p)
	if err != nil {
		return nil, err
	}
	return l.send(ctx, k, nil)
}

// overriddenBy is the part without OVERRIDE, with the override's values
// in place of its own as the server applies them (docs/overrides.md): on
// RL.TOKEN the limit is the rate and the burst the capacity (the limit when
// it has no burst); on RL.CONCURRENT the window is the lease.
func (p part) overriddenBy(ov *OverrideValues) part {
	p.o.set &^= optOverride
	p.o.override = ""
	if ov == nil {
		return p
	}
	p.c.limit, p.c.window = ov.Limit, ov.Window
	if p.c.algorithm == "TOKEN" {
		p.o.set |= optBurst
		p.o.burst = ov.Burst
		if p.o.burst == 0 {
			p.o.burst = ov.Limit
		}
	}
	return p
}

// reserving: a TOKEN clause that may be admitted against future tokens.
func (p part) reserving() bool { return p.o.has(optReserve) || p.o.has(optWait) }

// splitOrder runs the clauses that must admit now first, then the
// reserving ones (admitted only when the others are), then the refunds,
// which always admit: a denial then never has a refund to undo.
func splitOrder(parts []part) []int {
	order := make([]int, 0, len(parts))
	for _, group := range []func(part) bool{
		func(p part) bool { return !p.reserving() && !p.o.has(optRefund) },
		part.reserving,
		func(p part) bool { return p.o.has(optRefund) },
	} {
		for i, p := range parts {
			if group(p) {
				order = append(order, i)
			}
		}
	}
	return order
}

// denies: the clause's reply refuses the call, or would in monitor mode,
// which answers allowed with the refusal's retry_after (not told apart
// from an admitted reservation's wait).
func denies(d Decision, p part) bool {
	return !d.Allowed || (!p.reserving() && d.RetryAfter != 0)
}

func (l *Limiter) splitAll(ctx context.Context, k call) (any, error) {
	parts := k.parts
	replies := make([]any, len(parts))
	decisions := make([]Decision, len(parts))
	held := make([]bool, len(parts)) // WAIT clauses, sent as RESERVE
	var admitted []int
	var durable error
	denied := false
	for _, i := range splitOrder(parts) {
		p := parts[i]
		switch {
		case k.peek || denied:
			p.o.set |= optPeek
		case p.o.has(optWait):
			// The package holds the call instead of the server (below):
			// the server would hold a clause's reply before the others run.
			p.o.set = p.o.set&^optWait | optReserve
			p.o.reserve, held[i] = p.o.wait, true
		}
		r, err := l.oneKey(ctx, p)
		var de *DurabilityError
		if errors.As(err, &de) {
			durable, err = err, nil
		}
		var d Decision
		if err == nil {
			d, err = limiterDecision(r, p.c.algorithm == "CONCURRENT")
		}
		if err != nil {
			return nil, errors.Join(err, l.giveBack(ctx, parts, decisions, admitted))
		}
		replies[i], decisions[i] = r, d
		if !k.peek && !denied {
			if denies(d, p) {
				denied = true
			} else {
				admitted = append(admitted, i)
			}
		}
	}
	if denied {
		if err := l.giveBack(ctx, parts, decisions, admitted); err != nil {
			return nil, err
		}
		for _, i := range admitted {
			// A denied call holds no lease.
			if decisions[i].LeaseID != 0 {
				decisions[i].LeaseID = 0
				replies[i] = withLease(replies[i], 0)
			}
		}
	}
	return l.allReply(ctx, parts, replies, decisions, held, denied || k.peek), durable
}

// giveBack undoes the admitted clauses of a call that was denied: a
// lease is released, a cost refunded. Reads take nothing; refund clauses
// run last, so none was admitted.
func (l *Limiter) giveBack(ctx context.Context, parts []part, decisions []Decision, admitted []int) error {
	var errs []error
	for _, i := range admitted {
		p, d := parts[i], decisions[i]
		switch {
		case p.c.algorithm == "CONCURRENT":
			if d.LeaseID == 0 {
				continue
			}
			p.o.set &^= optCost
			p.verb, p.id = "RELEASE", d.LeaseID
		case reads(p.o) || p.o.has(optRefund):
			continue
		default:
			cost := int64(1)
			if p.o.has(optCost) {
				cost = p.o.cost
			}
			p.o.set = p.o.set&^(optCost|optBlock|optReserve|optWait) | optRefund
			p.o.refund = cost
		}
		if _, err := l.oneKey(ctx, p); err != nil {
			var de *DurabilityError
			if !errors.As(err, &de) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// allReply builds RL.ALL's reply from its clauses' (docs/commands.md,
// RL.ALL): allowed when every clause admitted; retry_after the largest
// among the denying clauses (-1 if one of them is -1), or when admitted
// the largest reservation's wait. WAIT clauses, sent as RESERVE, are held
// here until the latest of their turns, as the server would hold the
// reply: theirs then say 0, and a RESERVE clause's what is left of its
// own (when ctx ends first, each says what is left of its own).
func (l *Limiter) allReply(ctx context.Context, parts []part, replies []any, decisions []Decision,
	held []bool, refused bool) []any {
	allowed, denying := int64(1), false
	var retry time.Duration
	for i, d := range decisions {
		if !d.Allowed {
			allowed = 0
		}
		if denies(d, parts[i]) {
			if !denying || (retry != Never && (d.RetryAfter == Never || d.RetryAfter > retry)) {
				retry = d.RetryAfter
			}
			denying = true
		}
	}
	if !refused && !denying {
		var hold time.Duration
		for i, d := range decisions {
			if held[i] {
				hold = max(hold, d.RetryAfter)
			}
		}
		waited := hold
		if hold > 0 {
			start := time.Now()
			timer := time.NewTimer(hold)
			select {
			case <-ctx.Done():
				// The reservations stand, as when a waiting client goes
				// away: the reply says how long is left.
				waited = time.Since(start)
			case <-timer.C:
			}
			timer.Stop()
		}
		for i, d := range decisions {
			if parts[i].reserving() {
				left := left(d.RetryAfter, waited)
				replies[i] = withRetry(replies[i], left)
				retry = max(retry, left)
			}
		}
	}
	ms := retry.Milliseconds()
	if retry == Never {
		ms = -1
	}
	return append([]any{allowed, ms}, replies...)
}

// withRetry and withLease are a limiter reply with its retry_after (3rd)
// or lease (7th) field replaced, on a copy.
func withRetry(reply any, retry time.Duration) any { return withField(reply, 2, retry.Milliseconds()) }

func withLease(reply any, id int64) any { return withField(reply, 6, id) }

func withField(reply any, i int, v int64) any {
	arr, _ := reply.([]any)
	if i >= len(arr) {
		return reply
	}
	out := append([]any(nil), arr...)
	out[i] = v
	return out
}
