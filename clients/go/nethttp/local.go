package nethttp

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sort"
	"sync"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// The `local` fail mode's limiter (docs/http.md, Fail modes): while Redis
// cannot answer, the process decides the checks itself with librl-core's
// algorithms, integer for integer (held to them by
// conformance/vectors/algorithms.json), all-or-nothing as RL.ALL is.
// Limits then hold per process; overrides are not read (they live in
// Redis); counts made here stay here when Redis is back.
//
// It takes each check as plain values (localClauseOf(check) makes one) and
// answers what RL.ALL would, a librl.AllDecision, so a request decided
// here goes through the same headers, refusals and hook:
//
//	local := newLocalLimiter(maxKeys)             // local_max_keys
//	all, err := local.check(clauses, false)       // wall clock; err: a bad clause, nothing decided
//	all.Allowed, all.Decisions                    // one librl.Decision per clause
//	local.check(clauses, true)                    // PEEK: decide, record nothing
//	local.release(clause, decision.LeaseID)       // a concurrency clause's slots
//	local.checkAt(clauses, false, nowMs)          // tests: an explicit now (Unix ms)
//
// A refused request is recorded by no clause, and its concurrency clauses
// report lease 0 (nothing taken). Policies' block and queue are not
// applied (a token clause is decided as a plain call: a turn is never
// booked locally), as in the Rust integration's local limiter.
//
// Memory is bounded: a key goes when its limiter would be empty again (as
// Redis expires it), and at maxKeys keys the tenth closest to expiry is
// evicted at once (an evicted limiter starts afresh, admitting more).
// Safe for concurrent use: one mutex around each call.

const (
	// localMaxAmount is the largest limit, rate, burst or cost (librl-core's MAX_AMOUNT).
	localMaxAmount = 1 << 50
	// localMaxWindow is the longest window or lease (librl-core's MAX_WINDOW_MS).
	localMaxWindow = 3650 * 24 * time.Hour
	// localMaxLeaseID: lease ids stay below 2^53 (librl-core's MAX_LEASE_ID).
	localMaxLeaseID = 1<<53 - 1
	// localIDsPerMs: lease ids a key gives per millisecond before they run
	// ahead of the clock.
	localIDsPerMs = 1000
)

// localClause is one policy's check as the local limiter reads it.
type localClause struct {
	key       string
	algorithm string // fixed sliding approx token concurrency
	limit     int64  // token: the rate per window
	window    time.Duration
	aligned   bool
	burst     int64 // token: the capacity; 0: the rate
	cost      int64
}

// localClauseOf is a check's clause: its policy's algorithm and numbers
// (a concurrency policy's lease as the window), its key and cost.
func localClauseOf(c check) localClause {
	window := c.p.window
	if c.p.algorithm == "concurrency" {
		window = c.p.lease
	}
	return localClause{key: c.key, algorithm: c.p.algorithm, limit: c.p.limit, window: window,
		aligned: c.p.aligned, burst: c.p.burst, cost: c.cost}
}

// localLimit is a clause validated, in the core's units (ms).
type localLimit struct {
	key       string
	algorithm string
	limit     uint64
	windowMs  uint64
	aligned   bool
	capacity  uint64
	cost      uint64
}

func (c localClause) limits() (localLimit, error) {
	amount := func(name string, n int64) (uint64, error) {
		if n < 1 || n > localMaxAmount {
			return 0, fmt.Errorf("librl: local limiter: %s %s must be from 1 to 2^50, not %d", c.key, name, n)
		}
		return uint64(n), nil
	}
	switch c.algorithm {
	case "fixed", "sliding", "approx", "token", "concurrency":
	default:
		return localLimit{}, fmt.Errorf("librl: local limiter: %s: no algorithm %q", c.key, c.algorithm)
	}
	if c.window < time.Millisecond || c.window > localMaxWindow || c.window%time.Millisecond != 0 {
		return localLimit{}, fmt.Errorf("librl: local limiter: %s window must be whole ms from 1 ms to 3650 days, not %v", c.key, c.window)
	}
	limit, err := amount("limit", c.limit)
	if err != nil {
		return localLimit{}, err
	}
	capacity := limit
	if c.burst != 0 {
		if capacity, err = amount("burst", c.burst); err != nil {
			return localLimit{}, err
		}
	}
	cost, err := amount("cost", c.cost)
	if err != nil {
		return localLimit{}, err
	}
	return localLimit{key: c.key, algorithm: c.algorithm, limit: limit, windowMs: uint64(c.window / time.Millisecond),
		aligned: c.aligned, capacity: capacity, cost: cost}, nil
}

// localState is one key's limiter as the module would store it: one of
// the algorithms' states.
type localState interface{ algorithm() string }

type localFixed struct{ startMs, endMs, count uint64 }
type localApprox struct{ startMs, current, previous uint64 }

// localLog is the exact log, oldest first, times strictly increasing.
type localLog struct{ entries []localLogged }
type localLogged struct{ t, cost uint64 }

// localBucket is missing units (1/windowMs of a token each) short of full, as of atMs.
type localBucket struct {
	atMs, windowMs uint64
	missing        u128
}

type localLeases struct {
	nextID uint64
	leases []localLease
}
type localLease struct{ id, endMs, slots uint64 }

func (localFixed) algorithm() string  { return "fixed" }
func (localApprox) algorithm() string { return "approx" }
func (localLog) algorithm() string    { return "sliding" }
func (localBucket) algorithm() string { return "token" }
func (localLeases) algorithm() string { return "concurrency" }

// localOutcome is one clause decided: its reply, and for an admitted one
// the state to store and until when it matters (Unix ms).
type localOutcome struct {
	six       [6]int64
	commit    localState
	expiresAt uint64
	leaseID   uint64
}

type localEntry struct {
	state     localState
	expiresAt uint64
}

type localLimiter struct {
	mu       sync.Mutex
	keys     map[string]localEntry
	capacity int
}

// newLocalLimiter holds at most maxKeys keys (at least 1).
func newLocalLimiter(maxKeys int) *localLimiter {
	return &localLimiter{keys: map[string]localEntry{}, capacity: max(1, maxKeys)}
}

// check decides now (the wall clock); see checkAt.
func (l *localLimiter) check(clauses []localClause, peek bool) (librl.AllDecision, error) {
	return l.checkAt(clauses, peek, time.Now().UnixMilli())
}

// checkAt is RL.ALL at nowMs (Unix ms): admitted only if every clause
// admits, then recorded by each (unless peek); a refused request is
// recorded by none. Each decision is the one the clause alone gives. A bad
// clause or time is an error, and nothing is decided.
func (l *localLimiter) checkAt(clauses []localClause, peek bool, nowMs int64) (librl.AllDecision, error) {
	if nowMs < 0 {
		return librl.AllDecision{}, fmt.Errorf("librl: local limiter: now must be >= 0 ms, not %d", nowMs)
	}
	now := uint64(nowMs)
	limits := make([]localLimit, len(clauses))
	for i, c := range clauses {
		lim, err := c.limits()
		if err != nil {
			return librl.AllDecision{}, err
		}
		limits[i] = lim
	}
	l.mu.Lock()
	outcomes := make([]localOutcome, len(limits))
	allowed := true
	for i, lim := range limits {
		outcomes[i] = localDecide(lim, l.live(lim.key, now), now)
		allowed = allowed && outcomes[i].six[0] == 1
	}
	taken := allowed && !peek
	if taken {
		for i, lim := range limits {
			if o := outcomes[i]; o.commit != nil {
				l.insert(lim.key, localEntry{state: o.commit, expiresAt: o.expiresAt}, now)
			}
		}
	}
	l.mu.Unlock()
	all := librl.AllDecision{Allowed: allowed, Decisions: make([]librl.Decision, len(outcomes))}
	for i, o := range outcomes {
		d := localDecision(o.six)
		if taken {
			d.LeaseID = int64(o.leaseID)
		}
		all.Decisions[i] = d
		if !d.Allowed && all.RetryAfter != librl.Never && (d.RetryAfter == librl.Never || d.RetryAfter > all.RetryAfter) {
			all.RetryAfter = d.RetryAfter
		}
	}
	return all, nil
}

// release frees lease id of a concurrency clause's key now; see releaseAt.
func (l *localLimiter) release(c localClause, id int64) bool {
	return l.releaseAt(c, id, time.Now().UnixMilli())
}

// releaseAt frees lease id of a concurrency clause's key at nowMs; false
// when it is not held (released, ended, or its key evicted).
func (l *localLimiter) releaseAt(c localClause, id int64, nowMs int64) bool {
	if c.algorithm != "concurrency" || nowMs < 0 || id <= 0 {
		return false
	}
	now := uint64(nowMs)
	l.mu.Lock()
	defer l.mu.Unlock()
	entry, ok := l.keys[c.key]
	leases, isLeases := entry.state.(localLeases)
	if !ok || !isLeases {
		return false
	}
	found := false
	kept := make([]localLease, 0, len(leases.leases))
	expiresAt := localIDsCaughtUp(leases.nextID)
	for _, x := range leases.leases {
		switch {
		case x.endMs <= now:
		case x.id == uint64(id):
			found = true
		default:
			kept = append(kept, x)
			expiresAt = max(expiresAt, x.endMs)
		}
	}
	if !found {
		return false
	}
	if expiresAt <= now {
		delete(l.keys, c.key)
	} else {
		l.keys[c.key] = localEntry{state: localLeases{nextID: leases.nextID, leases: kept}, expiresAt: expiresAt}
	}
	return true
}

// size is the keys held, expired ones included until they are next looked at.
func (l *localLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// live is the key's state unless it has expired (an expired one is dropped).
func (l *localLimiter) live(key string, now uint64) localState {
	entry, ok := l.keys[key]
	if !ok {
		return nil
	}
	if entry.expiresAt <= now {
		delete(l.keys, key)
		return nil
	}
	return entry.state
}

func (l *localLimiter) insert(key string, entry localEntry, now uint64) {
	if _, ok := l.keys[key]; !ok && len(l.keys) >= l.capacity {
		for k, e := range l.keys {
			if e.expiresAt <= now {
				delete(l.keys, k)
			}
		}
	}
	if _, ok := l.keys[key]; !ok && len(l.keys) >= l.capacity {
		// Evict the tenth closest to expiry at once, so that a full store
		// sorts once per many inserts, not on each.
		expiries := make([]uint64, 0, len(l.keys))
		for _, e := range l.keys {
			expiries = append(expiries, e.expiresAt)
		}
		sort.Slice(expiries, func(i, j int) bool { return expiries[i] < expiries[j] })
		threshold := expiries[min(max(1, l.capacity/10), len(expiries)-1)]
		for k, e := range l.keys {
			if e.expiresAt <= threshold {
				delete(l.keys, k)
			}
		}
		// Many keys with the same expiry: drop arbitrary ones.
		for k := range l.keys {
			if len(l.keys) < l.capacity {
				break
			}
			delete(l.keys, k)
		}
	}
	l.keys[key] = entry
}

// localDecision is the six integers as the client's typed reply.
func localDecision(six [6]int64) librl.Decision {
	ms := func(v int64) time.Duration {
		if v < 0 {
			return librl.Never
		}
		if v > math.MaxInt64/int64(time.Millisecond) {
			return math.MaxInt64
		}
		return time.Duration(v) * time.Millisecond
	}
	return librl.Decision{Allowed: six[0] == 1, Count: six[1], RetryAfter: ms(six[2]), Limit: six[3],
		Remaining: six[4], ResetAfter: ms(six[5])}
}

// localDecide decides one clause on the state its key holds (a state of
// another algorithm, after a policy changed, counts as none).
func localDecide(lim localLimit, state localState, now uint64) localOutcome {
	if state != nil && state.algorithm() != lim.algorithm {
		state = nil
	}
	switch lim.algorithm {
	case "fixed":
		s, ok := state.(localFixed)
		return localFixedDecide(lim, s, ok, now)
	case "sliding":
		s, _ := state.(localLog)
		return localSlidingDecide(lim, s, now)
	case "approx":
		s, ok := state.(localApprox)
		return localApproxDecide(lim, s, ok, now)
	case "token":
		s, ok := state.(localBucket)
		return localTokenDecide(lim, s, ok, now)
	}
	s, _ := state.(localLeases)
	return localConcurrentDecide(lim, s, now)
}

// i64 is a reply's integer: saturating, as the core's.
func i64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func satAdd(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func localAdmit(count, limit, resetAfter uint64, state localState, expiresAt uint64) localOutcome {
	return localOutcome{six: [6]int64{1, i64(count), 0, i64(limit), i64(satSub(limit, count)), i64(resetAfter)},
		commit: state, expiresAt: expiresAt}
}

// localDeny is a denial's reply; retryAfter -1: never.
func localDeny(count uint64, retryAfter int64, limit, resetAfter uint64) localOutcome {
	return localOutcome{six: [6]int64{0, i64(count), retryAfter, i64(limit), i64(satSub(limit, count)), i64(resetAfter)}}
}

// localFixedDecide is FIXED: a counter per window [start, start+window). A
// clock that steps back stands still at the window's start.
func localFixedDecide(lim localLimit, s localFixed, stored bool, now uint64) localOutcome {
	live := stored && max(now, s.startMs) < s.endMs
	w := s
	if live {
		now = max(now, s.startMs)
	} else {
		start := now
		if lim.aligned {
			start = now - now%lim.windowMs
		}
		w = localFixed{startMs: start, endMs: satAdd(start, lim.windowMs)}
	}
	untilEnd := w.endMs - now
	if count := w.count + lim.cost; count <= lim.limit {
		return localAdmit(count, lim.limit, untilEnd, localFixed{w.startMs, w.endMs, count}, w.endMs)
	}
	// The next window starts empty: any cost within the limit fits then.
	retry := int64(-1)
	if lim.cost <= lim.limit {
		retry = i64(untilEnd)
	}
	reset := uint64(0)
	if live {
		reset = untilEnd
	}
	return localDeny(w.count, retry, lim.limit, reset)
}

// localSlidingDecide is SLIDING (exact): the costs logged in (now-window, now].
func localSlidingDecide(lim localLimit, s localLog, now uint64) localOutcome {
	newest := uint64(0)
	if n := len(s.entries); n > 0 {
		newest = s.entries[n-1].t
	}
	now = max(now, newest)
	cutoff := satSub(now, lim.windowMs)
	first := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].t > cutoff })
	live := s.entries[first:]
	count := uint64(0)
	for _, e := range live {
		count += e.cost
	}
	if count+lim.cost <= lim.limit {
		logged := make([]localLogged, len(live), len(live)+1)
		copy(logged, live)
		if n := len(logged); n > 0 && logged[n-1].t == now {
			logged[n-1].cost += lim.cost
		} else {
			logged = append(logged, localLogged{now, lim.cost})
		}
		return localAdmit(count+lim.cost, lim.limit, lim.windowMs, localLog{logged}, satAdd(now, lim.windowMs))
	}
	retry := int64(-1)
	if lim.cost <= lim.limit {
		// The oldest entries leave first: wait until enough of them have.
		mustLeave, passed := count+lim.cost-lim.limit, uint64(0)
		retry = i64(lim.windowMs)
		for _, e := range live {
			passed += e.cost
			if passed >= mustLeave {
				retry = i64(satSub(satAdd(e.t, lim.windowMs), now))
				break
			}
		}
	}
	reset := uint64(0)
	if count > 0 {
		reset = satSub(satAdd(newest, lim.windowMs), now)
	}
	return localDeny(count, retry, lim.limit, reset)
}

// localApproxDecide is SLIDING APPROX: current + floor(previous * left /
// window) over windows aligned on the clock.
func localApproxDecide(lim localLimit, s localApprox, stored bool, now uint64) localOutcome {
	window := lim.windowMs
	if stored {
		now = max(now, s.startMs)
	}
	start := now - now%window
	current, previous := uint64(0), uint64(0)
	switch {
	case stored && s.startMs == start:
		current, previous = s.current, s.previous
	case stored && satAdd(s.startMs, window) == start:
		previous = s.current
	}
	left := window - (now - start)
	count := current + mulDiv(previous, left, window)
	// The counters matter until the window after this one ends.
	expiresAt := satAdd(start, satAdd(window, window))
	if count+lim.cost <= lim.limit {
		return localAdmit(count+lim.cost, lim.limit, expiresAt-now, localApprox{start, current + lim.cost, previous}, expiresAt)
	}
	retry := int64(-1)
	if lim.cost <= lim.limit {
		retry = i64(localApproxWait(current, previous, left, window, lim.limit-lim.cost))
	}
	reset := uint64(0)
	switch {
	case current > 0:
		reset = expiresAt - now
	case previous > 0:
		reset = satAdd(start, window) - now
	}
	return localDeny(count, retry, lim.limit, reset)
}

// mulDiv is floor(a * b / c), exactly (c > 0; the quotient fits: a <= 2^50, b <= c).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi%c, lo, c)
	return q
}

// localMaxLeft is the most ms left in a window at which floor(previous *
// left / window) <= room; false when even 1 ms left is too many.
func localMaxLeft(previous, room, window uint64) (uint64, bool) {
	if previous == 0 {
		return window, true
	}
	// floor(previous * x / window) <= room  <=>  previous * x < (room + 1) * window
	bound := mul128(room+1, window).sub(u128{lo: 1})
	x := bound.divFloor(previous)
	if x.isZero() {
		return 0, false
	}
	return x.min64(window), true
}

// localApproxWait is the least wait after which count + cost <= limit,
// room being limit - cost, nothing else admitted meanwhile.
func localApproxWait(current, previous, left, window, room uint64) uint64 {
	if room >= current {
		// Later in this window: the previous window's weight shrinks.
		if x, ok := localMaxLeft(previous, room-current, window); ok {
			return left - min(x, left)
		}
	}
	// In the next window, this window's count becomes the weighted one.
	if x, ok := localMaxLeft(current, room, window); ok {
		return left + (window - x)
	}
	return left + window
}

// localTokenDecide is TOKEN: the shortfall kept in 1/window ms tokens, so
// one ms refills exactly rate units: exact integers; waits round up,
// tokens down.
func localTokenDecide(lim localLimit, s localBucket, stored bool, now uint64) localOutcome {
	window, rate := lim.windowMs, lim.limit
	full := mul128(lim.capacity, window)
	short := u128{}
	if stored {
		now = max(now, s.atMs)
		missing := s.missing
		if s.windowMs != window {
			// A changed window rescales the shortfall, towards fewer tokens.
			missing = missing.rescale(window, s.windowMs)
		}
		short = missing.sub(mul128(now-s.atMs, rate)).min(full)
	}
	after := short.add(mul128(lim.cost, window))
	owed := after.sub(full)
	if owed.isZero() {
		count, reset := after.divCeil(window).sat64(), after.divCeil(rate).sat64()
		return localAdmit(count, lim.capacity, reset, localBucket{atMs: now, windowMs: window, missing: after}, satAdd(now, reset))
	}
	retry := int64(-1)
	if lim.cost <= lim.capacity {
		retry = i64(max(1, owed.divCeil(rate).sat64()))
	}
	return localDeny(short.divCeil(window).sat64(), retry, lim.capacity, short.divCeil(rate).sat64())
}

// localIDsCaughtUp is the ms from which a key that starts afresh gives ids
// of at least nextID.
func localIDsCaughtUp(nextID uint64) uint64 {
	n := satSub(nextID, 1)
	return n/localIDsPerMs + min(n%localIDsPerMs, 1)
}

// localConcurrentDecide is CONCURRENT: cost slots as one lease, held
// [now, now+lease) unless released first.
func localConcurrentDecide(lim localLimit, s localLeases, now uint64) localOutcome {
	count, latest := uint64(0), uint64(0)
	held := make([]localLease, 0, len(s.leases)+1)
	for _, x := range s.leases {
		if x.endMs > now {
			held = append(held, x)
			count = satAdd(count, x.slots)
			latest = max(latest, x.endMs)
		}
	}
	reset := satSub(max(latest, localIDsCaughtUp(s.nextID)), now)
	if satAdd(count, lim.cost) <= lim.limit {
		// A new key's first id comes from the clock, the others from the counter.
		id := s.nextID
		if id == 0 {
			id = satAdd(satMul(now, localIDsPerMs), 1)
		}
		if id > localMaxLeaseID {
			return localDeny(count, -1, lim.limit, reset)
		}
		end := satAdd(now, lim.windowMs)
		expiresAt := max(latest, end, localIDsCaughtUp(id+1))
		o := localAdmit(count+lim.cost, lim.limit, expiresAt-now,
			localLeases{nextID: id + 1, leases: append(held, localLease{id, end, lim.cost})}, expiresAt)
		o.leaseID = id
		return o
	}
	if lim.cost > lim.limit {
		return localDeny(count, -1, lim.limit, reset)
	}
	// The least wait after which enough slots have ended for the cost.
	sort.Slice(held, func(i, j int) bool {
		return held[i].endMs < held[j].endMs || held[i].endMs == held[j].endMs && held[i].slots < held[j].slots
	})
	mustEnd, ended, retry := count+lim.cost-lim.limit, uint64(0), uint64(0)
	for _, x := range held {
		ended += x.slots
		if ended >= mustEnd {
			retry = x.endMs - now
			break
		}
	}
	return localDeny(count, i64(retry), lim.limit, reset)
}

func satMul(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}

// u128 is an unsigned 128-bit integer: the token bucket's units (up to
// 2^50 tokens times 3650 days in ms) and APPROX's bounds, as the core's u128.
type u128 struct{ hi, lo uint64 }

func mul128(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (a u128) isZero() bool { return a.hi == 0 && a.lo == 0 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) min(b u128) u128 {
	if b.less(a) {
		return b
	}
	return a
}

// add saturates at the largest u128.
func (a u128) add(b u128) u128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, over := bits.Add64(a.hi, b.hi, carry)
	if over != 0 {
		return u128{math.MaxUint64, math.MaxUint64}
	}
	return u128{hi, lo}
}

// sub saturates at 0.
func (a u128) sub(b u128) u128 {
	if a.less(b) {
		return u128{}
	}
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return u128{hi, lo}
}

// divFloor is a / d (d > 0).
func (a u128) divFloor(d uint64) u128 {
	qhi := a.hi / d
	qlo, _ := bits.Div64(a.hi%d, a.lo, d)
	return u128{qhi, qlo}
}

// divCeil is a / d rounded up (d > 0).
func (a u128) divCeil(d uint64) u128 {
	qhi := a.hi / d
	qlo, rem := bits.Div64(a.hi%d, a.lo, d)
	q := u128{qhi, qlo}
	if rem != 0 {
		q = q.add(u128{lo: 1})
	}
	return q
}

// sat64 is the value, or the largest uint64 when it does not fit.
func (a u128) sat64() uint64 {
	if a.hi != 0 {
		return math.MaxUint64
	}
	return a.lo
}

func (a u128) min64(b uint64) uint64 {
	if a.hi == 0 && a.lo < b {
		return a.lo
	}
	return b
}

// rescale is ceil(a * to / from), or the largest u128 when the product
// does not fit, as the core's (a bucket's window changed; rare, so big.Int).
func (a u128) rescale(to, from uint64) u128 {
	n := new(big.Int).Lsh(new(big.Int).SetUint64(a.hi), 64)
	n.Or(n, new(big.Int).SetUint64(a.lo))
	n.Mul(n, new(big.Int).SetUint64(to))
	if n.BitLen() > 128 {
		return u128{math.MaxUint64, math.MaxUint64}
	}
	f := new(big.Int).SetUint64(from)
	n.Add(n, new(big.Int).Sub(f, big.NewInt(1)))
	n.Quo(n, f)
	lo := new(big.Int).And(n, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	return u128{new(big.Int).Rsh(n, 64).Uint64(), lo}
}
