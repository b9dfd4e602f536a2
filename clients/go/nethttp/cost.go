package nethttp

import (
	"bytes"
	"io"
	"net/http"
)

// Costs (docs/http.md, Cost): what each check costs, from the policy, the
// request's body size or a header; a bad cost header (400) or a body too
// large (413) refuses the request before any check.

// costs fills in each check's cost, or returns the refusal: a body too
// large first (it is measured before any cost header is read), then the
// first bad cost header in check order.
func costs(c *config, r *http.Request, checks []check) *reply {
	var body int64 = -1
	for _, ch := range checks {
		if ch.p.cost == costBodyBytes {
			var ok bool
			if body, ok = measure(r, c.maxBody); !ok {
				refusal := tooLarge(c.maxBody)
				return &refusal
			}
			break
		}
	}
	for i := range checks {
		ch := &checks[i]
		switch ch.p.cost {
		case costUnits:
			ch.cost = ch.p.costUnits
		case costHeader:
			n, ok := headerCost(r.Header.Values(ch.p.costHeader))
			if !ok {
				refusal := badCost(ch.p.costHeader, ch.p.name)
				return &refusal
			}
			ch.cost = n
		case costBodyBytes:
			ch.cost = min(max(body, 1), maxUnits)
		case costCode:
			n, err := ch.p.costResolver(r)
			if err != nil || n < 1 || n > maxUnits {
				refusal := badResolvedCost(ch.p.costName, ch.p.name)
				return &refusal
			}
			ch.cost = n
		}
	}
	return nil
}

// headerCost is a `header:<Name>` cost from the header's lines: 1 when
// absent; else the lines joined by ", " (as HTTP combines them) and
// trimmed of spaces and tabs must be decimal digits (leading zeros
// allowed) of a value from 1 to 2^50. false for anything else: empty,
// two lines, "+5", "5.0", "0".
func headerCost(lines []string) (int64, bool) {
	if len(lines) == 0 {
		return 1, true
	}
	v := trimOWS(joinLines(lines))
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int64(c-'0'); n > maxUnits {
			return 0, false
		}
	}
	return n, n >= 1
}

// measure is the body's size: its Content-Length, or a body without one
// (chunked) read into memory (and given back to the handler) up to max;
// false when it is larger.
func measure(r *http.Request, max int64) (int64, bool) {
	if r.ContentLength >= 0 {
		return r.ContentLength, r.ContentLength <= max
	}
	if r.Body == nil {
		return 0, true
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil || int64(len(data)) > max {
		return 0, false
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return int64(len(data)), true
}
