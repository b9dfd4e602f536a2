package nethttp

import (
	"math/bits"
	"net/http"
	"strconv"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// Headers (docs/http.md, Headers): the rate-limit headers of a checked
// request, from the module's replies, describing the most restrictive
// policy.

// checked is one policy's check with the reply it got.
type checked struct {
	p *policy
	d librl.Decision
}

// The rate-limit headers under net/http's canonical keys, so that
// Header().Get finds them from wrapping code (on the wire in HTTP/1.1:
// Ratelimit-Policy; header names are case-insensitive). Assigning the
// canonical key directly is what Header.Set does, without canonicalizing
// the name on every request.
const (
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrLimit      = "X-Ratelimit-Limit"
	hdrRemaining  = "X-Ratelimit-Remaining"
	hdrReset      = "X-Ratelimit-Reset"
	hdrRetryAfter = "Retry-After"
	// headers: draft6 (express-rate-limit's draft-6 names).
	hdrDraftLimit     = "Ratelimit-Limit"
	hdrDraftRemaining = "Ratelimit-Remaining"
	hdrDraftReset     = "Ratelimit-Reset"
)

// setHeaders writes the rate-limit headers the configuration's `headers`
// names; with denied (a group refused the request), Retry-After too,
// except in shadow mode, which never refuses. now is read only for
// legacy_reset: unix.
func setHeaders(c *config, h http.Header, cs []checked, denied bool, now func() time.Time) {
	if len(cs) == 0 {
		return
	}
	w := cs[mostRestrictive(cs, denied)]
	reset := ceilSecs(w.d.ResetAfter)
	var space [192]byte
	b := space[:0]
	var vs values
	if c.ietf {
		for i, x := range cs {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(append(append(b, '"'), x.p.name...), `";q=`...)
			b = strconv.AppendInt(b, quota(x), 10)
			// A concurrency policy's slots are held at once: no window.
			if x.p.algorithm != "concurrency" {
				b = strconv.AppendInt(append(b, ";w="...), ceilSecs(x.p.window), 10)
			}
			if x.p.cost == costBodyBytes {
				b = append(b, `;qu="content-bytes"`...)
			}
		}
		vs.end(hdrPolicy, len(b))
		b = append(append(append(b, '"'), w.p.name...), `";r=`...)
		b = strconv.AppendInt(b, w.d.Remaining, 10)
		b = strconv.AppendInt(append(b, ";t="...), reset, 10)
		vs.end(hdrRateLimit, len(b))
	}
	if c.legacy {
		b = strconv.AppendInt(b, quota(w), 10)
		vs.end(hdrLimit, len(b))
		b = strconv.AppendInt(b, w.d.Remaining, 10)
		vs.end(hdrRemaining, len(b))
		if c.unixReset {
			b = strconv.AppendInt(b, unixReset(now(), w.d.ResetAfter), 10)
		} else {
			b = strconv.AppendInt(b, reset, 10)
		}
		vs.end(hdrReset, len(b))
	}
	if c.draft6 {
		b = strconv.AppendInt(b, quota(w), 10)
		vs.end(hdrDraftLimit, len(b))
		b = strconv.AppendInt(b, w.d.Remaining, 10)
		vs.end(hdrDraftRemaining, len(b))
		b = strconv.AppendInt(b, reset, 10)
		vs.end(hdrDraftReset, len(b))
		b = strconv.AppendInt(b, quota(w), 10)
		if w.p.algorithm != "concurrency" {
			b = strconv.AppendInt(append(b, ";w="...), ceilSecs(w.p.window), 10)
		}
		vs.end(hdrPolicy, len(b))
	}
	if denied && !c.shadow && !w.p.shadow && !w.d.Allowed && w.d.RetryAfter != librl.Never {
		b = strconv.AppendInt(b, retryAfterSecs(w.d), 10)
		vs.end(hdrRetryAfter, len(b))
	}
	vs.set(h, b)
}

// values are the headers' values, written one after another into one
// buffer and set as substrings of one string: two allocations for all of
// them.
type values struct {
	keys [6]string
	ends [6]int
	n    int
}

// end closes the value written since the last one, for header k.
func (vs *values) end(k string, at int) {
	vs.keys[vs.n], vs.ends[vs.n] = k, at
	vs.n++
}

// set assigns each value under its canonical key (what Header.Set does,
// without canonicalizing the name on every request).
func (vs *values) set(h http.Header, b []byte) {
	all := string(b)
	one := make([]string, vs.n)
	start := 0
	for i := range vs.n {
		one[i] = all[start:vs.ends[i]]
		start = vs.ends[i]
		h[vs.keys[i]] = one[i : i+1 : i+1]
	}
}

// unixReset is legacy_reset: unix's X-RateLimit-Reset: the Unix time in
// seconds at which the policy resets, rounded up.
func unixReset(now time.Time, resetAfter time.Duration) int64 {
	at := now.UnixMilli() + max(ms(resetAfter), 0)
	return (at + 999) / 1000
}

// retryAfterSecs is Retry-After's value: max(1, ceil(retry_after_ms / 1000)).
func retryAfterSecs(d librl.Decision) int64 { return max(1, ceilSecs(d.RetryAfter)) }

func ms(d time.Duration) int64 {
	if d == librl.Never {
		return -1
	}
	return d.Milliseconds()
}

// ceilSecs is whole seconds, rounded up.
func ceilSecs(d time.Duration) int64 {
	m := ms(d)
	if m <= 0 {
		return 0
	}
	return (m + 999) / 1000
}

// mostRestrictive: among denials the longest wait (Never first); else the
// smallest share of the limit left, then the later reset, then the first.
// A refused request's is among the enforced policies' denials, so that
// Retry-After and the refusal name a policy that refused it.
func mostRestrictive(cs []checked, refused bool) int {
	best := -1
	for i := range cs {
		if refused && (cs[i].p.shadow || cs[i].d.Allowed) {
			continue
		}
		if best < 0 || tighter(cs[i].d, cs[best].d) {
			best = i
		}
	}
	return max(best, 0)
}

func tighter(a, b librl.Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		ra, rb := ms(a.RetryAfter), ms(b.RetryAfter)
		if ra < 0 || rb < 0 {
			return ra < 0 && rb >= 0
		}
		return ra > rb
	}
	// remaining/limit compared without division, in 128 bits.
	if c := cmp128(a.Remaining, b.Limit, b.Remaining, a.Limit); c != 0 {
		return c < 0
	}
	return a.ResetAfter > b.ResetAfter
}

// cmp128 compares x1*y1 with x2*y2 (non-negative) exactly.
func cmp128(x1, y1, x2, y2 int64) int {
	h1, l1 := bits.Mul64(uint64(max(x1, 0)), uint64(max(y1, 0)))
	h2, l2 := bits.Mul64(uint64(max(x2, 0)), uint64(max(y2, 0)))
	if h1 != h2 {
		return cmpU(h1, h2)
	}
	return cmpU(l1, l2)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// quota is the <limit> shown: the reply's (effective) limit, except a token
// policy whose capacity is its own configured burst: then its rate.
func quota(c checked) int64 {
	if c.p.algorithm == "token" && c.p.burst != 0 && c.d.Limit == c.p.burst {
		return c.p.limit
	}
	return c.d.Limit
}
