package nethttp

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// deniedByMembers is a denial's problem body written member by member
// through problem (encoding/json), as docs/http.md's Refusals section
// spells it: what denied's one-buffer writing must equal byte for byte.
func deniedByMembers(deny *refusal, x checked, cost int64) reply {
	limit := quota(x)
	window := x.p.window.Milliseconds()
	per := strconv.FormatInt(window, 10) + "ms"
	if window%1000 == 0 {
		per = strconv.FormatInt(window/1000, 10) + "s"
	}
	what := fmt.Sprintf(`"%s" (%d per %s)`, x.p.name, limit, per)
	var retry any
	detail := fmt.Sprintf("This request costs %d, more than rate limit %s ever admits at once.", cost, what)
	if r := ms(x.d.RetryAfter); r >= 0 {
		retry = r
		detail = fmt.Sprintf("Rate limit %s exceeded; retry in %d s.", what, retryAfterSecs(x.d))
	}
	if x.p.algorithm == "concurrency" {
		what = fmt.Sprintf(`"%s" (%d at once)`, x.p.name, limit)
		detail = fmt.Sprintf("This request costs %d, more than concurrency limit %s ever admits.", cost, what)
		if retry != nil {
			detail = fmt.Sprintf("Concurrency limit %s reached; retry in %d s.", what, retryAfterSecs(x.d))
		}
	}
	r := problem(deny.status, "Too Many Requests", detail,
		member{"policy", x.p.name}, member{"limit", limit}, member{"retry_after", retry})
	r.headers = deny.headers
	return r
}

func TestDeniedWritesTheProblemBodyAsEncodingJSON(t *testing.T) {
	policies := []*policy{
		{name: "api", algorithm: "fixed", limit: 100, window: time.Minute},
		{name: "burst.1_x-y", algorithm: "sliding", limit: 7, window: 1500 * time.Millisecond},
		{name: "tok", algorithm: "token", limit: 5, burst: 20, window: 2 * time.Second},
		{name: "uploads", algorithm: "concurrency", limit: 2, lease: time.Minute},
		// Names the schema refuses, for the escaping alone.
		{name: `a<b>&"c\d`, algorithm: "fixed", limit: 1, window: time.Second},
		{name: "é\x01\xff", algorithm: "concurrency", limit: 3, lease: time.Second},
	}
	decisions := []librl.Decision{
		{Limit: 100, RetryAfter: 1234 * time.Millisecond},
		{Limit: 20, RetryAfter: librl.Never},
		{Limit: 1 << 50, RetryAfter: 0},
	}
	for _, status := range []int{429, 503} {
		deny := &refusal{status: status, body: "problem"}
		for _, p := range policies {
			for _, d := range decisions {
				for _, cost := range []int64{1, 3, 1 << 50} {
					x := checked{p: p, d: d}
					got, want := denied(deny, x, cost), deniedByMembers(deny, x, cost)
					if string(got.body) != string(want.body) || got.status != want.status || got.contentType != want.contentType {
						t.Errorf("policy %q, %+v, cost %d:\n got %s\nwant %s", p.name, d, cost, got.body, want.body)
					}
				}
			}
		}
	}
}
