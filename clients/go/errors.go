package librl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Error is a command that failed on the way or on the server. Its message
// carries librl's own (for a server error, the ERR or WRONGTYPE line that
// names the argument); Unwrap gives go-redis's error, so errors.As with a
// redis.Error, or errors.Is with context.DeadlineExceeded, work as usual.
type Error struct {
	Command string // RL.FIXED, RL.ALL, RL.OVERRIDE SET...
	Err     error
}

func (e *Error) Error() string { return "librl: " + e.Command + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// ServerError reports whether the server answered the call with an error
// reply (a bad argument, WRONGTYPE, OOM...), rather than the call failing
// on the way (connection, timeout).
func (e *Error) ServerError() bool {
	var re redis.Error
	return errors.As(e.Err, &re)
}

// NotDurable is the code a *DurabilityError's message starts with, as the
// Rust client's error.
const NotDurable = "NOTDURABLE"

// DurabilityError is returned with the Decision when WithDurability is on
// and fewer replicas than asked acknowledged the call's write in time. The
// decision stands on the primary; it may be lost if the primary fails now.
type DurabilityError struct {
	Command string
	Wanted  int
	Acked   int64
	Timeout time.Duration
}

func (e *DurabilityError) Error() string {
	return fmt.Sprintf("librl: %s: %s the call reached %d of %d replicas within %d ms",
		e.Command, NotDurable, e.Acked, e.Wanted, e.Timeout.Milliseconds())
}

// redirect parses a MOVED or ASK error: its kind and the node's address.
func redirect(err error) (kind, addr string) {
	var re redis.Error
	if !errors.As(err, &re) {
		return "", ""
	}
	f := strings.Fields(re.Error())
	if len(f) == 3 && (f[0] == "MOVED" || f[0] == "ASK") {
		return f[0], f[2]
	}
	return "", ""
}
