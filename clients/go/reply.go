package librl

import (
	"fmt"
	"time"
)

// Never is the RetryAfter of a call no wait can help (its cost exceeds the
// effective limit; the commands reply retry_after -1), and the TTL of an
// override that has none. It is the only negative duration a reply holds.
const Never time.Duration = -1

// Decision is a limiter's reply (docs/commands.md, The limiter reply).
type Decision struct {
	// Allowed: the call was admitted and its cost recorded.
	Allowed bool
	// Count is the units counted against the limit after this call.
	Count int64
	// RetryAfter is how long until a call of the same cost is admitted: 0
	// when admitted, Never when no wait helps. After an admitted Reserve,
	// the wait before acting on the reserved tokens.
	RetryAfter time.Duration
	// Limit is the effective limit (after any override); TOKEN: the capacity.
	Limit int64
	// Remaining is max(0, Limit-Count).
	Remaining int64
	// ResetAfter is how long until the limiter is empty (TOKEN: full) again.
	ResetAfter time.Duration
	// LeaseID (RL.CONCURRENT, and RL.ALL's CONCURRENT clauses) is the
	// lease this call took, released or renewed: a positive integer below
	// 2^53, unique within the key; 0 when the call holds none (refused,
	// Peek, Cost(0), off mode, a lease no longer held). 0 for the other
	// limiters.
	LeaseID int64
}

// AllDecision is RL.ALL's reply: Allowed only if every clause admitted the
// call, RetryAfter the longest wait among the denying clauses (Never if one
// of them can never admit it), and one Decision per clause, in order. The
// lease a Concurrent clause took is Lease(i).
type AllDecision struct {
	Allowed    bool
	RetryAfter time.Duration
	Decisions  []Decision
	// leases: per clause, the lease a Concurrent clause took, or nil.
	leases []*Lease
}

// OverrideValues is an override's stored values (RL.OVERRIDE GET).
type OverrideValues struct {
	Limit  int64
	Window time.Duration
	Burst  int64         // 0 when unset
	TTL    time.Duration // Never when the override does not expire
}

// OverrideEntry is one override listed by OverrideList or OverrideScan.
type OverrideEntry struct {
	Key string
	OverrideValues
}

// millis turns a reply's milliseconds into a duration, -1 into Never.
func millis(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}

func replyError(what string, reply any) error {
	return fmt.Errorf("librl: unexpected %s reply %#v", what, reply)
}

// ints reads the first n integers of an array reply (n < 0: every
// element). A longer reply is accepted and the rest ignored, whatever it
// holds: a newer module may add fields at the end (docs/commands.md, The
// limiter reply), and a deployed client must keep working.
func ints(what string, reply any, n int) ([]int64, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) < n {
		return nil, replyError(what, reply)
	}
	if n >= 0 {
		arr = arr[:n]
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		x, ok := v.(int64)
		if !ok {
			return nil, replyError(what, reply)
		}
		out[i] = x
	}
	return out, nil
}

// limiterInts is ints for a limiter's reply (six or seven integers),
// into an array: reading a reply allocates nothing.
func limiterInts(what string, reply any, n int) ([7]int64, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) < n {
		return [7]int64{}, replyError(what, reply)
	}
	return intsIn(what, arr, n)
}

// intsIn reads the first n (at most seven) integers of arr.
func intsIn(what string, arr []any, n int) ([7]int64, error) {
	var out [7]int64
	for i := range n {
		x, ok := arr[i].(int64)
		if !ok {
			return out, replyError(what, arr)
		}
		out[i] = x
	}
	return out, nil
}

func decisionFrom(reply any) (Decision, error) {
	return limiterDecision(reply, false)
}

// limiterDecision reads a limiter's reply: six integers, and with lease
// the seventh, RL.CONCURRENT's lease id.
func limiterDecision(reply any, lease bool) (Decision, error) {
	n := 6
	if lease {
		n = 7
	}
	v, err := limiterInts("limiter", reply, n)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{
		Allowed:    v[0] == 1,
		Count:      v[1],
		RetryAfter: millis(v[2]),
		Limit:      v[3],
		Remaining:  v[4],
		ResetAfter: millis(v[5]),
	}
	if lease {
		d.LeaseID = v[6]
	}
	return d, nil
}

// allDecisionFrom reads RL.ALL's reply; leases says which clauses are
// CONCURRENT ones, whose replies carry a lease id (nil: none).
func allDecisionFrom(reply any, leases []*leaseSpec) (AllDecision, error) {
	if a, ok := reply.(*allReply); ok {
		return a.decision(leases)
	}
	arr, ok := reply.([]any)
	if !ok || len(arr) < 3 {
		return AllDecision{}, replyError("RL.ALL", reply)
	}
	head, err := intsIn("RL.ALL", arr[:2], 2)
	if err != nil {
		return AllDecision{}, err
	}
	out := AllDecision{Allowed: head[0] == 1, RetryAfter: millis(head[1]), Decisions: make([]Decision, 0, len(arr)-2)}
	for i, r := range arr[2:] {
		d, err := limiterDecision(r, i < len(leases) && leases[i] != nil)
		if err != nil {
			return AllDecision{}, err
		}
		out.Decisions = append(out.Decisions, d)
	}
	return out, nil
}

func overrideFrom(v []int64) OverrideValues {
	o := OverrideValues{Limit: v[0], Window: millis(v[1]), Burst: v[2], TTL: millis(v[3])}
	return o
}

// decision is allDecisionFrom for a reply the pipelined connection read
// as an allReply: the same checks, the same decisions. An error names a
// copy of the reply, so that a reply on the caller's stack stays there.
func (a *allReply) decision(leases []*leaseSpec) (AllDecision, error) {
	if a.heads < 2 || a.n < 1 {
		return AllDecision{}, replyError("RL.ALL", *a)
	}
	out := AllDecision{Allowed: a.head[0] == 1, RetryAfter: millis(a.head[1]), Decisions: make([]Decision, a.n)}
	for i := range a.n {
		row := a.row(i)
		lease := i < len(leases) && leases[i] != nil
		need := 6
		if lease {
			need = 7
		}
		if row.ints < need {
			return AllDecision{}, replyError("RL.ALL", *a)
		}
		v := row.v
		out.Decisions[i] = Decision{Allowed: v[0] == 1, Count: v[1], RetryAfter: millis(v[2]), Limit: v[3], Remaining: v[4],
			ResetAfter: millis(v[5])}
		if lease {
			out.Decisions[i].LeaseID = v[6]
		}
	}
	return out, nil
}
