package nethttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Refusals (docs/http.md, Refusals): the responses the middleware makes
// itself, RFC 9457 problem bodies (or the deny message as text), with the
// contract's exact detail texts.

// reply is a response the middleware makes instead of calling the
// handler.
type reply struct {
	status      int
	contentType string
	body        []byte
}

const (
	problemJSON = "application/problem+json"
	textPlain   = "text/plain; charset=utf-8"
)

// member is one member of a problem body, in the order it is written.
type member struct {
	name  string
	value any
}

// problem is an RFC 9457 body of type about:blank: type, title, status
// and detail, then the extra members.
func problem(status int, title, detail string, extra ...member) reply {
	members := append([]member{{"type", "about:blank"}, {"title", title}, {"status", status}, {"detail", detail}}, extra...)
	body := []byte{'{'}
	for i, m := range members {
		if i > 0 {
			body = append(body, ',')
		}
		name, _ := json.Marshal(m.name)
		value, _ := json.Marshal(m.value) // strings, integers and nil: never an error
		body = append(append(append(body, name...), ':'), value...)
	}
	return reply{status: status, contentType: problemJSON, body: append(body, '}')}
}

// windowText is the window as the details write it: whole seconds with s,
// else milliseconds with ms (60s, 1500ms).
func windowText(window int64) string {
	if window%1000 == 0 {
		return strconv.FormatInt(window/1000, 10) + "s"
	}
	return strconv.FormatInt(window, 10) + "ms"
}

// denied is the refusal by the most restrictive check: deny.status with a
// problem body naming the policy (retry_after in ms, null when no wait
// helps), or deny.message as text.
func denied(c *config, x checked, cost int64) reply {
	if c.denyText {
		return reply{status: c.denyStatus, contentType: textPlain, body: []byte(c.denyMessage)}
	}
	limit := quota(x)
	what := fmt.Sprintf(`"%s" (%d per %s)`, x.p.name, limit, windowText(x.p.window.Milliseconds()))
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
	// The title names the refusal, whatever status it is sent with.
	return problem(c.denyStatus, "Too Many Requests", detail,
		member{"policy", x.p.name}, member{"limit", limit}, member{"retry_after", retry})
}

// badCost is the 400 for a cost header that is not an integer from 1 to
// 2^50; header is the name as the configuration writes it.
func badCost(header, policy string) reply {
	return problem(http.StatusBadRequest, "Bad Request", header+" must be an integer from 1 to 2^50.",
		member{"policy", policy})
}

// tooLarge is the 413 for a body past max_body_bytes.
func tooLarge(max int64) reply {
	return problem(http.StatusRequestEntityTooLarge, "Content Too Large",
		fmt.Sprintf("The body may be at most %d bytes.", max))
}

// unavailable is the 503 of fail: closed.
func unavailable() reply {
	return problem(http.StatusServiceUnavailable, "Service Unavailable",
		"The rate limiter is unavailable, and this service does not admit unlimited requests.")
}
