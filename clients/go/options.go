package librl

import (
	"fmt"
	"strconv"
	"time"
)

// Option is one of a command's options (docs/commands.md): Cost, Refund,
// Block, Reserve, Wait, Override, Peek, Aligned, Approx, Burst, and for the
// override commands TTL, Match and Count. Each option may be given once; an
// option the command does not take is an error before anything is sent.
type Option func(*options)

// The options a command can be given, as bits, to check each is allowed
// and given once.
type optionBit uint32

const (
	optCost optionBit = 1 << iota
	optRefund
	optBlock
	optReserve
	optWait
	optOverride
	optPeek
	optAligned
	optApprox
	optBurst
	optTTL
	optMatch
	optCount
)

var optionNames = map[optionBit]string{
	optCost: "Cost", optRefund: "Refund", optBlock: "Block", optReserve: "Reserve",
	optWait: "Wait", optOverride: "Override", optPeek: "Peek", optAligned: "Aligned",
	optApprox: "Approx", optBurst: "Burst", optTTL: "TTL", optMatch: "Match", optCount: "Count",
}

// What each command takes. A clause of RL.ALL takes its command's options
// but Peek, which applies to the whole call (PeekAll).
const (
	commonClause  = optCost | optRefund | optBlock | optOverride
	fixedClause   = commonClause | optAligned
	slidingClause = commonClause | optApprox
	tokenClause   = commonClause | optBurst | optReserve | optWait
	// RL.CONCURRENT: Acquire also takes Wait and Peek, which a clause
	// does not (WAIT is RL.CONCURRENT's alone).
	concurrentClause  = optCost | optOverride
	concurrentAcquire = concurrentClause | optWait | optPeek
	overrideSetOK     = optBurst | optTTL
	overrideLsOK      = optMatch | optCount
)

type options struct {
	set      optionBit
	twice    optionBit
	cost     int64
	refund   int64
	block    time.Duration
	reserve  time.Duration
	wait     time.Duration
	override string
	burst    int64
	ttl      time.Duration
	match    string
	count    int64
}

func (o *options) mark(bit optionBit) {
	if o.set&bit != 0 {
		o.twice |= bit
	}
	o.set |= bit
}

func (o *options) has(bit optionBit) bool { return o.set&bit != 0 }

// Cost is the units this call consumes (COST n, default 1; on Acquire, the
// slots the lease takes). Cost(0) reads the limiter as it stands and
// changes nothing.
func Cost(n int64) Option { return func(o *options) { o.mark(optCost); o.cost = n } }

// Refund gives back up to n units this limiter recorded (REFUND n); not
// with Cost.
func Refund(n int64) Option { return func(o *options) { o.mark(optRefund); o.refund = n } }

// Block makes a denial start a block of d on the key (BLOCK duration).
func Block(d time.Duration) Option { return func(o *options) { o.mark(optBlock); o.block = d } }

// Reserve admits a TOKEN call now against tokens that will exist within
// maxWait (RESERVE max_wait); the Decision's RetryAfter is when to act.
func Reserve(maxWait time.Duration) Option {
	return func(o *options) { o.mark(optReserve); o.reserve = maxWait }
}

// Wait makes the server hold the reply (WAIT max_wait): on Token, Reserve
// with the reply held until the reserved time; on Acquire, a refused call
// waits up to maxWait for a slot, served in arrival order as soon as a
// release or a lease's end frees one. The call goes on a connection of
// its own (see Limiter.Close), held until the reply.
func Wait(maxWait time.Duration) Option {
	return func(o *options) { o.mark(optWait); o.wait = maxWait }
}

// Override reads limit, window and burst from the override stored at okey
// when there is one (OVERRIDE okey).
func Override(okey string) Option {
	return func(o *options) { o.mark(optOverride); o.override = okey }
}

// Peek answers as if the call were made and changes nothing (PEEK).
func Peek() Option { return func(o *options) { o.mark(optPeek) } }

// Aligned aligns FIXED windows on multiples of the window in Unix time.
func Aligned() Option { return func(o *options) { o.mark(optAligned) } }

// Approx selects SLIDING's two-window weighted counter instead of the log.
func Approx() Option { return func(o *options) { o.mark(optApprox) } }

// Burst is a TOKEN bucket's capacity (BURST capacity; default the rate),
// or an override's burst in OverrideSet.
func Burst(capacity int64) Option {
	return func(o *options) { o.mark(optBurst); o.burst = capacity }
}

// TTL makes an override set by OverrideSet expire after d.
func TTL(d time.Duration) Option { return func(o *options) { o.mark(optTTL); o.ttl = d } }

// Match lists only the overrides whose key matches a glob-style pattern.
func Match(pattern string) Option {
	return func(o *options) { o.mark(optMatch); o.match = pattern }
}

// Count hints how many keys one RL.OVERRIDE LIST step looks at.
func Count(n int64) Option { return func(o *options) { o.mark(optCount); o.count = n } }

// collect applies opts, and refuses any option that `where` does not take
// or that is given twice.
func collect(where string, allowed optionBit, opts []Option) (options, error) {
	return collectOnto(where, allowed, options{}, opts)
}

// collectOnto is collect onto options already collected (a prepared
// clause's): an option given in both is given twice.
func collectOnto(where string, allowed optionBit, o options, opts []Option) (options, error) {
	for _, opt := range opts {
		if opt == nil {
			return o, argErr(where, "an option is nil")
		}
		opt(&o)
	}
	for bit := optionBit(1); bit <= optCount; bit <<= 1 {
		if o.twice&bit != 0 {
			return o, argErr(where, "option %s() given twice", optionNames[bit])
		}
		if o.set&bit != 0 && allowed&bit == 0 {
			if bit == optPeek && allowed&optCost != 0 {
				return o, argErr(where, "Peek() applies to a whole RL.ALL call: use Limiter.PeekAll")
			}
			return o, argErr(where, "does not take option %s()", optionNames[bit])
		}
	}
	if o.has(optCost) && o.has(optRefund) {
		return o, argErr(where, "Cost() and Refund() exclude each other: a call consumes or gives back")
	}
	if o.has(optReserve) && o.has(optWait) {
		return o, argErr(where, "Reserve() and Wait() exclude each other: Wait is Reserve plus the server's wait")
	}
	return o, nil
}

// durationArg renders d as the commands take it, in whole milliseconds:
// "1500ms". zeroOK allows 0 (RESERVE 0 and WAIT 0: admit only without a
// wait).
func durationArg(where, name string, d time.Duration, zeroOK bool) (string, error) {
	if d < 0 || (d == 0 && !zeroOK) {
		return "", argErr(where, "%s must be positive, got %v", name, d)
	}
	if d%time.Millisecond != 0 {
		return "", argErr(where, "%s must be a whole number of milliseconds, got %v", name, d)
	}
	var b [24]byte // one allocation: the string
	return string(append(strconv.AppendInt(b[:0], int64(d/time.Millisecond), 10), "ms"...)), nil
}

func intArg(n int64) string { return strconv.FormatInt(n, 10) }

// ArgError is a call refused before sending: a bad or misplaced option, or
// (in a cluster) keys of one call in different slots.
type ArgError struct {
	Where   string // the method, e.g. "Fixed" or "All clause 2"
	Message string
}

func (e *ArgError) Error() string { return "librl: " + e.Where + ": " + e.Message }

func argErr(where, format string, args ...any) *ArgError {
	return &ArgError{Where: where, Message: fmt.Sprintf(format, args...)}
}
