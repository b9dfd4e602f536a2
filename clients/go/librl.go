// Package librl is the Go client of librl, the Redis and Valkey module for
// rate limiting, over go-redis v9: typed calls of RL.FIXED, RL.SLIDING,
// RL.TOKEN, RL.CONCURRENT (Acquire, a Lease to Release, Renew or
// KeepAlive), RL.ALL and RL.OVERRIDE (docs/commands.md), each routed
// straight to the node that owns its key.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	lim := librl.New(rdb)
//	d, err := lim.Fixed(ctx, "user:42", 10, time.Minute)
//	if err == nil && !d.Allowed {
//		fmt.Println("retry in", d.RetryAfter)
//	}
//	all, err := lim.All(ctx,
//		librl.Fixed("{ip:203.0.113.7}:s", 5, time.Second, librl.Aligned()),
//		librl.Sliding("{ip:203.0.113.7}:m", 100, time.Minute))
//	lease, err := lim.Acquire(ctx, "llm:{key7}", 5, time.Minute)
//	if err == nil {
//		defer lease.Release(ctx)
//	}
//
// Routing: in a *redis.ClusterClient every call goes to the primary owning
// its key's slot, computed here (RL.ALL and RL.OVERRIDE included, whose
// second word is not a key), through go-redis's own Process, which follows
// MOVED and ASK when a slot moves; a call naming several keys that a
// half-moved slot refuses with TRYAGAIN is sent again as one-key calls
// (split.go). No COMMAND GETKEYS is ever sent. The keys
// of one call must share a slot (a hash tag: "{user42}:min",
// "{user42}:day"); otherwise the call is refused before sending with an
// *ArgError saying so.
package librl

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter sends librl's commands through a go-redis client. It is safe for
// concurrent use, as the client is.
type Limiter struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // the same client, when it is a cluster
	cache   *DenialCache
	durable *durability
	// readTimeout is the client's, when known: a WAIT held longer on the
	// client's own connections fails.
	readTimeout time.Duration
	// waiting sends the calls the server holds (WAIT), on a pool of
	// their own.
	waiting *waiting
	// tryAgain: how long a call retries while its slot migrates.
	tryAgain time.Duration
	// moving: the slots that answered TRYAGAIN lately (cluster only).
	moving *movingSlots
	// pipe: the client's auto-pipeliner, when the calls ride it
	// (WithAutoPipelining).
	pipe *redis.AutoPipeliner
	// conn: the package's own pipelined connection, when the calls ride
	// it (WithPipelinedConnection).
	conn *pipeConn
	// timeout: how long a call may take from its start (WithTimeout; 0:
	// as long as its context allows).
	timeout time.Duration
}

// New wraps a *redis.Client, a *redis.ClusterClient, or any
// redis.UniversalClient (NewUniversalClient's result included).
func New(client redis.UniversalClient) *Limiter {
	l := &Limiter{client: client, tryAgain: DefaultTryAgainWait, waiting: &waiting{}}
	switch c := client.(type) {
	case *redis.ClusterClient:
		l.cluster = c
		l.readTimeout = c.Options().ReadTimeout
		l.moving = &movingSlots{}
	case *redis.Client:
		l.readTimeout = c.Options().ReadTimeout
	}
	return l
}

// WithDenialCache returns a Limiter that answers repeated denied calls
// locally until their RetryAfter has passed (see DenialCache for when that
// is exact, and MaxAge for how long a change made elsewhere takes to
// apply). Pass nil for a new cache of 10,000 entries kept at most a second.
func (l *Limiter) WithDenialCache(cache *DenialCache) *Limiter {
	if cache == nil {
		cache = NewDenialCache(0, 0)
	}
	out := *l
	out.cache = cache
	return &out
}

// WithTimeout returns a Limiter whose calls end at most d after they
// start, as if each call's context had that deadline too (whichever
// comes first ends it). On the pipelined connection
// (WithPipelinedConnection) the connection keeps the deadlines itself,
// one timer for all the calls in flight, which costs less than a context
// and a timer per call, and a call ends with an error wrapping
// context.DeadlineExceeded; elsewhere each call gets context.WithTimeout
// and ends with what go-redis returns at a context's deadline. As with a
// context's deadline, a call given up this way may still run on the
// server. d <= 0: no timeout of the Limiter's own.
func (l *Limiter) WithTimeout(d time.Duration) *Limiter {
	out := *l
	out.timeout = max(d, 0)
	return &out
}

// Client is the go-redis client the Limiter sends through.
func (l *Limiter) Client() redis.UniversalClient { return l.client }

// Cache is the Limiter's denial cache, or nil.
func (l *Limiter) Cache() *DenialCache { return l.cache }

// Fixed is RL.FIXED: at most limit units per window, a window opening at
// the first admitted call (Aligned: on multiples of window in Unix time).
// Options: Aligned, Cost, Refund, Block, Override, Peek.
func (l *Limiter) Fixed(ctx context.Context, key string, limit int64, window time.Duration, opts ...Option) (Decision, error) {
	return l.single(ctx, "Fixed", Fixed(key, limit, window), opts)
}

// Sliding is RL.SLIDING: at most limit units in any window ending now
// (Approx: the two-window weighted counter). Options: Approx, Cost, Refund,
// Block, Override, Peek.
func (l *Limiter) Sliding(ctx context.Context, key string, limit int64, window time.Duration, opts ...Option) (Decision, error) {
	return l.single(ctx, "Sliding", Sliding(key, limit, window), opts)
}

// Token is RL.TOKEN: a bucket refilling rate tokens per window, holding
// Burst tokens (default rate). Options: Burst, Cost, Refund, Reserve, Wait,
// Block, Override, Peek.
func (l *Limiter) Token(ctx context.Context, key string, rate int64, window time.Duration, opts ...Option) (Decision, error) {
	return l.single(ctx, "Token", Token(key, rate, window), opts)
}

// All is RL.ALL: the call is admitted only if every clause admits it, and
// then every clause records it; otherwise nothing is recorded anywhere.
func (l *Limiter) All(ctx context.Context, clauses ...Clause) (AllDecision, error) {
	k, err := allCall(clauses, false)
	if err != nil {
		return AllDecision{}, err
	}
	return l.many(ctx, k)
}

// PeekAll is RL.ALL ... PEEK: the answer All would give, changing nothing.
func (l *Limiter) PeekAll(ctx context.Context, clauses ...Clause) (AllDecision, error) {
	k, err := allCall(clauses, true)
	if err != nil {
		return AllDecision{}, err
	}
	return l.many(ctx, k)
}

func (l *Limiter) single(ctx context.Context, method string, c Clause, opts []Option) (Decision, error) {
	k, err := limiterCall(method, c, opts)
	if err != nil {
		return Decision{}, err
	}
	e, err := l.decide(ctx, k)
	return e.one, err
}

func (l *Limiter) many(ctx context.Context, k call) (AllDecision, error) {
	sent := time.Now()
	e, err := l.decide(ctx, k)
	if !e.many {
		return AllDecision{}, err
	}
	a := e.all
	if k.leases != nil && len(a.Decisions) == len(k.leases) {
		a.leases = make([]*Lease, len(k.leases))
		for i, spec := range k.leases {
			if spec != nil {
				a.leases[i] = l.newLease(spec, a.Decisions[i], sent)
			}
		}
	}
	return a, err
}

// decide answers a limiter call or RL.ALL (k.name says which) with its
// decision, in the entry's one or all: from the denial cache while it still
// holds the call's denial, else from the server, keeping a denial it gives.
// On an error the entry is empty; a decision may come with a
// *DurabilityError.
func (l *Limiter) decide(ctx context.Context, k call) (cacheEntry, error) {
	many := k.name == "RL.ALL"
	id, gen, sent := l.cached(k)
	if id != "" {
		if e, ok := l.cache.lookup(id, sent); ok && e.many == many {
			return *e, nil
		}
	}
	// RL.ALL's reply on the pipelined connection is read into this, on
	// the stack.
	var into allReply
	reply, err := l.send(ctx, k, &into)
	if reply == nil {
		return cacheEntry{}, err
	}
	e := cacheEntry{keys: k.keys, many: many}
	var perr error
	allowed, retry := false, time.Duration(0)
	switch {
	case reply == filledInto:
		e.all, perr = into.decision(k.leases)
		allowed, retry = e.all.Allowed, e.all.RetryAfter
	case many:
		e.all, perr = allDecisionFrom(reply, k.leases)
		allowed, retry = e.all.Allowed, e.all.RetryAfter
	default:
		e.one, perr = limiterDecision(reply, len(k.leases) == 1)
		allowed, retry = e.one.Allowed, e.one.RetryAfter
	}
	if perr != nil {
		return cacheEntry{}, &Error{Command: k.name, Err: perr}
	}
	if id != "" && !allowed {
		l.cache.keep(id, gen, sent, time.Now(), retry, e)
	}
	return e, err
}

// cached gives the cache id of a call whose denial may be kept, the cache
// generation and the time before sending; id is "" otherwise.
func (l *Limiter) cached(k call) (id string, gen uint64, now time.Time) {
	now = time.Now()
	if l.cache == nil || k.effect != effectCacheable {
		return "", 0, now
	}
	return cacheID(k), l.cache.generation(), now
}

// filledInto is the reply of an RL.ALL read into the caller's allReply
// (send's into): a marker, so that the reply on the caller's stack is
// never held by an interface that could take it to the heap.
var filledInto any = new(int)

// send routes and sends a checked call. A nil reply comes with an error; a
// reply may come with a *DurabilityError. An RL.ALL the pipelined
// connection answers is read into into (the reply is then filledInto).
func (l *Limiter) send(ctx context.Context, k call, into *allReply) (any, error) {
	if l.cluster != nil {
		if err := oneSlot(k.name, k.keys); err != nil {
			return nil, err
		}
	}
	durable := l.durable != nil && k.writes
	var client redis.UniversalClient = l.client
	// The Limiter's timeout, from the call's start: kept by the pipelined
	// connection for the calls it sends, a context's deadline for the
	// others (a held call's included).
	var deadline int64
	if l.timeout > 0 {
		if !durable && l.onConn(client, k) {
			deadline = time.Now().Add(l.timeout).UnixNano()
		} else {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, l.timeout)
			defer cancel()
		}
	}
	if k.wait > 0 && !durable {
		if w, hold, cancel, ok := l.waitingClient(ctx, k.wait); ok {
			defer cancel()
			client, ctx = w, hold
		}
	}
	if k.wait > 0 && client == l.client && l.readTimeout > 0 && k.wait+time.Second > l.readTimeout {
		return nil, argErr(k.name, "Wait(%v) holds the reply about as long as the client's ReadTimeout (%v) or longer: "+
			"raise redis.Options.ReadTimeout above it, or use Reserve and wait in the caller", k.wait, l.readTimeout)
	}
	if l.cache != nil {
		defer l.cache.after(k)
	}
	split := l.moving != nil && k.splittable()
	if split && l.moving.moving(Slot(k.keys[0])) {
		return l.sendSplit(ctx, k)
	}
	var reply any
	var err error
	if durable {
		reply, err = l.sendDurable(ctx, k)
	} else {
		reply, err = l.sendOnce(ctx, client, k, deadline, into)
	}
	if err != nil && split && isTryAgain(err) {
		l.moving.mark(Slot(k.keys[0]))
		return l.sendSplit(ctx, k)
	}
	return reply, err
}

// onConn: the call goes through the pipelined connection. A call the
// server may hold (Wait) would hold every call queued behind it there: it
// keeps the client's connections.
func (l *Limiter) onConn(client redis.UniversalClient, k call) bool {
	return l.conn != nil && client == l.client && k.wait == 0
}

// sendOnce sends a call through client, retrying it while its slot
// moves (retry.go); on the pipelined connection it ends at deadline (Unix
// ns; 0: none), and an RL.ALL's reply is read into into.
func (l *Limiter) sendOnce(ctx context.Context, client redis.UniversalClient, k call, deadline int64, into *allReply) (any, error) {
	var reply any
	err := l.retrying(ctx, k.splittable(), func(ctx context.Context) error {
		if l.onConn(client, k) {
			var err error
			reply, err = l.conn.do(ctx, k.argv, k.name == "RL.ALL" && into != nil, deadline, into)
			return err
		}
		cmd := redis.NewCmd(ctx, k.argv...)
		// go-redis's ClusterClient routes by the key at this position,
		// instead of COMMAND's first-key position (none for RL.ALL and
		// RL.OVERRIDE).
		cmd.SetFirstKeyPos(k.keyPos)
		var err error
		if l.pipe != nil && client == l.client {
			err = l.pipelined(ctx, cmd)
		} else {
			err = client.Process(ctx, cmd)
		}
		// Only once answered: an auto-pipelined command's Val waits for
		// its reply, which a hanging server never sends.
		if err == nil {
			reply = cmd.Val()
		}
		return err
	})
	if err != nil {
		return nil, &Error{Command: k.name, Err: err}
	}
	return reply, nil
}
