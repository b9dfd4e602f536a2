package librl

import (
	"strconv"
	"time"
)

// Clause is one limit of an RL.ALL call, built by Fixed, Sliding, Token or
// Concurrent. Its arguments are checked when the call is made.
type Clause struct {
	algorithm string // FIXED, SLIDING, TOKEN or CONCURRENT
	key       string
	limit     int64
	window    time.Duration // CONCURRENT: the lease
	opts      []Option      // a prepared clause: For's options only
	pre       *prepared     // set by Prepare
}

// prepared is what Prepare checked and rendered once: the options and
// the words after the key (limit, window, options).
type prepared struct {
	o     options
	words []any
}

// Prepare checks the clause and renders its limit, window and options
// once, for a clause sent again and again with other keys (For): a
// server's policy, checked on every request. It returns the error All
// would return for the clause.
func (c Clause) Prepare() (Clause, error) {
	if c.algorithm == "" {
		return Clause{}, argErr("Prepare", "the zero Clause: build clauses with Fixed, Sliding, Token or Concurrent")
	}
	where := "Prepare (" + c.algorithm + ")"
	var base options // a clause prepared again keeps what it had
	if c.pre != nil {
		base = c.pre.o
	}
	o, err := collectOnto(where, c.allowed(), base, c.opts)
	if err != nil {
		return Clause{}, err
	}
	words, err := render(where, c, o, nil)
	if err != nil {
		return Clause{}, err
	}
	c.opts, c.pre = nil, &prepared{o: o, words: words[1:]} // words[0] is the key
	return c, nil
}

// For is the clause for key with more options (a call's own Cost,
// Refund or Override): a prepared clause renders only those. An option
// the prepared clause has already is given twice, an error when sent.
func (c Clause) For(key string, opts ...Option) Clause {
	c.key = key
	c.opts = append(c.opts[:len(c.opts):len(c.opts)], opts...)
	return c
}

// Fixed is an RL.ALL clause for a fixed window of limit units per window
// (Limiter.Fixed's options but Peek).
func Fixed(key string, limit int64, window time.Duration, opts ...Option) Clause {
	return Clause{algorithm: "FIXED", key: key, limit: limit, window: window, opts: opts}
}

// Sliding is an RL.ALL clause for a sliding window (Limiter.Sliding's
// options but Peek).
func Sliding(key string, limit int64, window time.Duration, opts ...Option) Clause {
	return Clause{algorithm: "SLIDING", key: key, limit: limit, window: window, opts: opts}
}

// Token is an RL.ALL clause for a token bucket refilling rate tokens per
// window (Limiter.Token's options but Peek).
func Token(key string, rate int64, window time.Duration, opts ...Option) Clause {
	return Clause{algorithm: "TOKEN", key: key, limit: rate, window: window, opts: opts}
}

// Concurrent is an RL.ALL clause taking Cost slots (default 1) of limit
// as one lease of the given length, only when every clause admits the
// call; AllDecision.Lease gives it back (options Cost and Override).
func Concurrent(key string, limit int64, lease time.Duration, opts ...Option) Clause {
	return Clause{algorithm: "CONCURRENT", key: key, limit: limit, window: lease, opts: opts}
}

func (c Clause) allowed() optionBit {
	switch c.algorithm {
	case "FIXED":
		return fixedClause
	case "SLIDING":
		return slidingClause
	case "CONCURRENT":
		return concurrentClause
	default:
		return tokenClause
	}
}

// call is a checked command ready to send: its words, the position of the
// key that routes it, the keys it names (for the slot check and the denial
// cache) and what it means to the denial cache.
type call struct {
	name   string
	argv   []any
	keyPos int8
	keys   []string
	effect effect
	// wait is the longest time the server may hold the reply (WAIT).
	wait time.Duration
	// writes: the call may change the dataset (durability waits for it).
	writes bool
	// leases: per clause (one for RL.CONCURRENT), what a lease it takes
	// is, or nil; the reply of such a clause carries the lease id.
	leases []*leaseSpec
	// parts: the limits behind argv (one per RL.ALL clause, one for a
	// limiter call), to send them as one-key calls when a half-moved slot
	// answers TRYAGAIN (split.go); nil for a call that names one key, or
	// that cannot be split.
	parts []part
	// peek: RL.ALL ... PEEK.
	peek bool
}

// part is one limit of a call: its clause and collected options, and for
// RL.CONCURRENT's RELEASE or RENEW the verb and the lease id.
type part struct {
	c    Clause
	o    options
	verb string // "", "RELEASE" or "RENEW"
	id   int64
}

// effect is what a call means to the denial cache.
type effect uint8

const (
	effectNone      effect = iota // a read, or a write that ends no denial
	effectCacheable               // a limiter call whose denial may be kept
	effectRefund                  // gives units back: forget its keys' denials
	effectClearAll                // an override change: forget every denial
)

// clauseWords appends key, limit, window and the options, in the
// grammar's order, and returns what the clause means.
func clauseWords(where string, c Clause, allowed optionBit, words []any) ([]any, options, error) {
	if c.pre != nil {
		return c.pre.clauseWords(where, c, allowed, words)
	}
	o, err := collect(where, allowed, c.opts)
	if err != nil {
		return nil, o, err
	}
	words, err = render(where, c, o, words)
	return words, o, err
}

// clauseWords is a prepared clause's: its key and prepared words, then
// For's options.
func (p *prepared) clauseWords(where string, c Clause, allowed optionBit, words []any) ([]any, options, error) {
	words = append(append(words, c.key), p.words...)
	if len(c.opts) == 0 {
		return words, p.o, nil // checked by Prepare
	}
	o, err := collectOnto(where, allowed, p.o, c.opts)
	if err != nil {
		return nil, o, err
	}
	extra, err := collect(where, allowed, c.opts)
	if err != nil {
		return nil, o, err
	}
	words, err = renderOptions(where, extra, words)
	return words, o, err
}

// render appends a clause's key, limit, window and collected options.
func render(where string, c Clause, o options, words []any) ([]any, error) {
	length := "window"
	if c.algorithm == "CONCURRENT" {
		length = "lease"
	}
	window, err := durationArg(where, length, c.window, false)
	if err != nil {
		return nil, err
	}
	return renderOptions(where, o, append(words, c.key, intArg(c.limit), window))
}

// renderOptions appends the collected options, in the grammar's order.
func renderOptions(where string, o options, words []any) ([]any, error) {
	if o.has(optAligned) {
		words = append(words, "ALIGNED")
	}
	if o.has(optApprox) {
		words = append(words, "APPROX")
	}
	if o.has(optBurst) {
		words = append(words, "BURST", intArg(o.burst))
	}
	if o.has(optCost) {
		words = append(words, "COST", intArg(o.cost))
	}
	if o.has(optRefund) {
		words = append(words, "REFUND", intArg(o.refund))
	}
	for _, d := range []struct {
		bit    optionBit
		word   string
		value  time.Duration
		zeroOK bool
	}{
		{optReserve, "RESERVE", o.reserve, true},
		{optWait, "WAIT", o.wait, true},
		{optBlock, "BLOCK", o.block, false},
	} {
		if !o.has(d.bit) {
			continue
		}
		s, err := durationArg(where, optionNames[d.bit]+"()", d.value, d.zeroOK)
		if err != nil {
			return nil, err
		}
		words = append(words, d.word, s)
	}
	if o.has(optOverride) {
		words = append(words, "OVERRIDE", o.override)
	}
	return words, nil
}

// reads: Cost(0) and Peek change nothing on the server.
func reads(o options) bool { return o.has(optPeek) || (o.has(optCost) && o.cost == 0) }

func limiterCall(method string, c Clause, opts []Option) (call, error) {
	c.opts = append(c.opts[:len(c.opts):len(c.opts)], opts...)
	allowed := c.allowed() | optPeek
	if c.algorithm == "CONCURRENT" {
		allowed = concurrentAcquire
	}
	o, err := collect(method, allowed, c.opts)
	if err != nil {
		return call{}, err
	}
	return partCall(method, part{c: c, o: o})
}

// partCall is one limiter command from a part: RL.FIXED, RL.SLIDING,
// RL.TOKEN, RL.CONCURRENT, or RL.CONCURRENT ... RELEASE or RENEW id.
func partCall(where string, p part) (call, error) {
	c, o := p.c, p.o
	name := "RL." + c.algorithm
	words, err := render(where, c, o, []any{name})
	if err != nil {
		return call{}, err
	}
	if p.verb != "" {
		words = append(words, p.verb, intArg(p.id))
	}
	if o.has(optPeek) {
		words = append(words, "PEEK")
	}
	k := call{name: name, argv: words, keyPos: 1, keys: clauseKeys(c.key, o), wait: o.wait, writes: !reads(o)}
	if len(k.keys) > 1 {
		k.parts = []part{p}
	}
	switch {
	case c.algorithm == "CONCURRENT":
		// Never cached: a RELEASE frees a slot before the RetryAfter of a
		// denial, which counts only the leases' own ends.
		k.effect = effectNone
		k.leases = []*leaseSpec{specOf(c, o)}
	case o.has(optRefund):
		k.effect = effectRefund
	case o.has(optPeek):
		k.effect = effectNone
	default:
		k.effect = effectCacheable
	}
	return k, nil
}

func clauseKeys(key string, o options) []string {
	if o.has(optOverride) {
		return []string{key, o.override}
	}
	return []string{key}
}

// algorithmWord is a clause's algorithm as an argument: the constant's
// own, which an interface holds without an allocation.
func algorithmWord(name string) any {
	switch name {
	case "FIXED":
		return "FIXED"
	case "SLIDING":
		return "SLIDING"
	case "TOKEN":
		return "TOKEN"
	case "CONCURRENT":
		return "CONCURRENT"
	}
	return name
}

func allCall(clauses []Clause, peek bool) (call, error) {
	if len(clauses) == 0 {
		return call{}, argErr("All", "needs at least one clause (Fixed, Sliding, Token or Concurrent)")
	}
	// Room for every word (a prepared clause's are known; two per option
	// added) and PEEK, so that the arguments are allocated once, no
	// larger than they need.
	words := 2
	for _, c := range clauses {
		if c.pre != nil {
			words += 2 + len(c.pre.words) + 2*len(c.opts)
		} else {
			words += 4 + 2*len(c.opts)
		}
	}
	argv := make([]any, 1, words)
	argv[0] = "RL.ALL"
	k := call{name: "RL.ALL", argv: argv, keyPos: 2, effect: effectCacheable}
	refund, writes, leases := false, false, false
	for i, c := range clauses {
		if c.algorithm == "" {
			return call{}, argErr("All", "clause %d is the zero Clause: build clauses with Fixed, Sliding, Token or Concurrent", i)
		}
		words, o, err := clauseWords("", c, c.allowed(), append(k.argv, algorithmWord(c.algorithm)))
		if err != nil {
			// The clause's place is named only when there is an error to
			// name it in: the same check again, with it.
			where := "All clause " + strconv.Itoa(i) + " (" + c.algorithm + " " + c.key + ")"
			_, _, err = clauseWords(where, c, c.allowed(), nil)
			return call{}, err
		}
		k.argv = words
		// parts serve a call naming several keys: kept only then.
		if len(clauses) > 1 || o.has(optOverride) {
			k.parts = append(k.parts, part{c: c, o: o})
		}
		k.keys = append(k.keys, clauseKeys(c.key, o)...)
		// leases: nil unless a clause takes one.
		if c.algorithm == "CONCURRENT" {
			if !leases {
				k.leases = make([]*leaseSpec, i, len(clauses))
			}
			k.leases, leases = append(k.leases, specOf(c, o)), true
		} else if leases {
			k.leases = append(k.leases, nil)
		}
		refund = refund || o.has(optRefund)
		writes = writes || !reads(o)
		if o.has(optWait) && o.wait > k.wait {
			k.wait = o.wait
		}
	}
	if len(k.keys) < 2 {
		k.parts = nil
	}
	k.peek = peek
	switch {
	case peek:
		k.argv = append(k.argv, "PEEK")
		k.effect = effectNone
	case refund:
		k.effect = effectRefund
	case leases:
		// As for RL.CONCURRENT alone: a release frees a slot sooner.
		k.effect = effectNone
	}
	k.writes = writes && !peek
	return k, nil
}
