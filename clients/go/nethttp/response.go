package nethttp

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// checked is one policy's check with the reply it got.
type checked struct {
	p *policy
	d librl.Decision
}

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
func mostRestrictive(cs []checked) int {
	best := 0
	for i := 1; i < len(cs); i++ {
		if tighter(cs[i].d, cs[best].d) {
			best = i
		}
	}
	return best
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
	switch {
	case h1 != h2:
		return cmpU(h1, h2)
	default:
		return cmpU(l1, l2)
	}
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
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
)

// setHeaders writes the rate-limit headers (docs/http.md, Headers); with
// refused, Retry-After too.
func (m *Middleware) setHeaders(h http.Header, cs []checked, refused bool) {
	if len(cs) == 0 {
		return
	}
	w := cs[mostRestrictive(cs)]
	reset := strconv.FormatInt(ceilSecs(w.d.ResetAfter), 10)
	// One backing array for every header's one-value slice.
	vals := make([]string, 0, 6)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if m.c.ietf {
		parts := make([]string, len(cs))
		for i, c := range cs {
			unit := ""
			if c.p.cost == costBodyBytes {
				unit = `;qu="content-bytes"`
			}
			parts[i] = fmt.Sprintf(`"%s";q=%d;w=%d%s`, c.p.name, quota(c), ceilSecs(c.p.window), unit)
		}
		set(hdrPolicy, strings.Join(parts, ", "))
		set(hdrRateLimit, fmt.Sprintf(`"%s";r=%d;t=%s`, w.p.name, w.d.Remaining, reset))
	}
	if m.c.legacy {
		set(hdrLimit, strconv.FormatInt(quota(w), 10))
		set(hdrRemaining, strconv.FormatInt(w.d.Remaining, 10))
		set(hdrReset, reset)
	}
	if refused && !w.d.Allowed && w.d.RetryAfter != librl.Never {
		set(hdrRetryAfter, strconv.FormatInt(max(1, ceilSecs(w.d.RetryAfter)), 10))
	}
}

var titles = map[int]string{400: "Bad Request", 413: "Content Too Large", 429: "Too Many Requests",
	503: "Service Unavailable"}

// problem writes an RFC 9457 body; extra members go beside the standard ones.
func problem(w http.ResponseWriter, status int, title, detail string, extra map[string]any) {
	body := map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail}
	for k, v := range extra {
		body[k] = v
	}
	data, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func describeWindow(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// deny answers the refusal of the most restrictive check.
func (m *Middleware) deny(w http.ResponseWriter, c checked, cost int64) {
	if m.c.denyText {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(m.c.denyMessage)))
		w.WriteHeader(m.c.denyStatus)
		_, _ = w.Write([]byte(m.c.denyMessage))
		return
	}
	// The configured limit and window, as Rust's Policy Display writes them.
	what := fmt.Sprintf("\"%s\" (%d per %s)", c.p.name, c.p.limit, describeWindow(c.p.window))
	var retry any
	detail := fmt.Sprintf("This request costs %d, more than rate limit %s ever admits at once.", cost, what)
	if r := ms(c.d.RetryAfter); r >= 0 {
		retry = r
		detail = fmt.Sprintf("Rate limit %s exceeded; retry in %d s.", what, max(1, ceilSecs(c.d.RetryAfter)))
	}
	// The title names the refusal, whatever status it is sent with.
	problem(w, m.c.denyStatus, "Too Many Requests", detail,
		map[string]any{"policy": c.p.name, "limit": quota(c), "retry_after": retry})
}
