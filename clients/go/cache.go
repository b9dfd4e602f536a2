package librl

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// DenialCache is the opt-in denial cache (Limiter.WithDenialCache): after a
// call is denied with a RetryAfter > 0, the same call (the same command and
// arguments) is answered locally until that time has passed, or MaxAge
// has, whichever comes first, so a client refused at a high rate stays off
// the server.
//
// Exactness: RetryAfter is the least wait after which the same call is
// admitted, and other callers' admitted calls can only push that moment
// later, so a cached denial is never wrong, and the call goes back to the
// server no earlier than the server itself would admit it. That holds while
// no one else refunds on, deletes or overrides that key in the meantime; a
// refund or an override change made through the same Limiter clears the
// affected entries. A change made elsewhere (another process's override,
// a DEL of a blocked key, CONFIG SET rl.mode) reaches this cache within
// MaxAge, or at once through ForgetKey or Clear. A cached reply's
// RetryAfter and ResetAfter are reduced by the time elapsed since it
// arrived (rounded up to the millisecond); its Count and Remaining are
// those of the denial. The entry expires counted from when the call was
// sent, so it never outlives the server's denial.
//
// Safe for concurrent use; one cache may serve several Limiters of the same
// server or cluster.
type DenialCache struct {
	mu       sync.Mutex
	entries  map[string]*cacheEntry
	capacity int
	maxAge   time.Duration
	// forgets counts refunds and override changes: a denial whose call was
	// sent before one of them may predate it, and is not kept.
	forgets uint64
}

type cacheEntry struct {
	received   time.Time
	validUntil time.Time
	one        Decision
	all        AllDecision // when many
	many       bool        // RL.ALL's
	keys       []string
}

// DefaultDenialMaxAge is how long a denial is kept at most unless
// NewDenialCache is told otherwise: long enough to keep a client refused
// at a high rate off the server, short enough that an operator lifting a
// block elsewhere is honoured within about a second.
const DefaultDenialMaxAge = time.Second

// NewDenialCache keeps at most capacity denials (10,000 when capacity < 1),
// each for at most maxAge (DefaultDenialMaxAge when maxAge < 1 ms), however
// long its RetryAfter: the longest an operator's change made elsewhere
// takes to reach this process. When full, expired entries are dropped, and
// if none has expired a new denial is not kept.
func NewDenialCache(capacity int, maxAge time.Duration) *DenialCache {
	if capacity < 1 {
		capacity = 10_000
	}
	if maxAge < time.Millisecond {
		maxAge = DefaultDenialMaxAge
	}
	return &DenialCache{entries: map[string]*cacheEntry{}, capacity: capacity, maxAge: maxAge}
}

// MaxAge is the longest a denial is kept.
func (c *DenialCache) MaxAge() time.Duration { return c.maxAge }

// Len is the number of denials held, expired ones included until next
// looked at.
func (c *DenialCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Clear forgets every denial: call it when an operator's change made
// elsewhere (an override, rl.mode) must apply before MaxAge has passed.
func (c *DenialCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*cacheEntry{}
	c.forgets++
}

// ForgetKey forgets the denials of calls that named key (as the limiter
// key or an override key): call it when that key was deleted or its
// override changed elsewhere and MaxAge is too long to wait.
func (c *DenialCache) ForgetKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(key)
}

func (c *DenialCache) forgetLocked(key string) {
	for id, e := range c.entries {
		for _, k := range e.keys {
			if k == key {
				delete(c.entries, id)
				break
			}
		}
	}
	c.forgets++
}

// cacheID is a call's argv, each word length-prefixed so that no two
// different argvs share an id.
func cacheID(k call) string {
	var b strings.Builder
	for _, w := range k.argv {
		s, _ := w.(string)
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

// left is what remains of d after elapsed, rounded up to the millisecond.
func left(d, elapsed time.Duration) time.Duration {
	if d == Never {
		return Never
	}
	r := d - elapsed
	if r <= 0 {
		return 0
	}
	return (r + time.Millisecond - 1).Truncate(time.Millisecond)
}

func aged(d Decision, elapsed time.Duration) Decision {
	d.RetryAfter = left(d.RetryAfter, elapsed)
	d.ResetAfter = left(d.ResetAfter, elapsed)
	return d
}

// lookup returns the entry still denying this call at now, aged.
func (c *DenialCache) lookup(id string, now time.Time) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	if !now.Before(e.validUntil) {
		delete(c.entries, id)
		return nil, false
	}
	elapsed := now.Sub(e.received)
	out := &cacheEntry{one: aged(e.one, elapsed), many: e.many}
	if e.many {
		all := AllDecision{Allowed: false, RetryAfter: left(e.all.RetryAfter, elapsed)}
		for _, d := range e.all.Decisions {
			all.Decisions = append(all.Decisions, aged(d, elapsed))
		}
		out.all = all
	}
	return out, true
}

func (c *DenialCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgets
}

// keep stores a denial (retry > 0) of a call sent at sent, received at
// received, for retry or MaxAge, whichever is shorter, unless a refund or
// override change happened since it was sent.
func (c *DenialCache) keep(id string, gen uint64, sent, received time.Time, retry time.Duration, e cacheEntry) {
	if retry <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets != gen {
		return
	}
	if len(c.entries) >= c.capacity {
		for k, old := range c.entries {
			if !received.Before(old.validUntil) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.capacity {
			return
		}
	}
	e.received = received
	e.validUntil = sent.Add(min(retry, c.maxAge))
	c.entries[id] = &e
}

// after notes what a sent call changes: a refund forgets its keys' denials,
// an override change every denial.
func (c *DenialCache) after(k call) {
	switch k.effect {
	case effectRefund:
		c.mu.Lock()
		for _, key := range k.keys {
			c.forgetLocked(key)
		}
		c.mu.Unlock()
	case effectClearAll:
		c.Clear()
	}
}
