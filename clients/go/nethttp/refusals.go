package nethttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Refusals (docs/http.md, Refusals): the responses the middleware makes
// itself, RFC 9457 problem bodies with the contract's exact detail texts,
// or the configured text or JSON body of a denial or of fail: closed.

// reply is a response the middleware makes instead of calling the
// handler.
type reply struct {
	status      int
	contentType string
	body        []byte
	headers     http.Header // a refusal's own (deny.headers); read only
}

// refusal is a deny, fail_deny or route deny as configured (a route's
// merged over deny), its bodies built at start-up.
type refusal struct {
	status      int
	body        string // problem | text | json
	text        []byte // message
	contentType string // the text body's
	json        []byte // the json body, serialized
	headers     http.Header
}

const (
	problemJSON = "application/problem+json"
	appJSON     = "application/json"
)

// configured is the refusal's text or JSON body, false for a problem one.
func (f *refusal) configured() (reply, bool) {
	switch f.body {
	case "text":
		return reply{status: f.status, contentType: f.contentType, body: f.text, headers: f.headers}, true
	case "json":
		return reply{status: f.status, contentType: appJSON, body: f.json, headers: f.headers}, true
	}
	return reply{}, false
}

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

// denied is the refusal by the most restrictive check: the deny's status
// with a problem body naming the policy (retry_after in ms, null when no
// wait helps), or its text or JSON body.
func denied(deny *refusal, x checked, cost int64) reply {
	if r, ok := deny.configured(); ok {
		return r
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
	r := problem(deny.status, "Too Many Requests", detail,
		member{"policy", x.p.name}, member{"limit", limit}, member{"retry_after", retry})
	r.headers = deny.headers
	return r
}

// badCost is the 400 for a cost header that is not an integer from 1 to
// 2^50; header is the name as the configuration writes it.
func badCost(header, policy string) reply {
	return problem(http.StatusBadRequest, "Bad Request", header+" must be an integer from 1 to 2^50.",
		member{"policy", policy})
}

// badResolvedCost is the 400 for a cost resolver's answer that is not an
// integer from 1 to 2^50; resolver is its name in code:<name>.
func badResolvedCost(resolver, policy string) reply {
	return problem(http.StatusBadRequest, "Bad Request", "The cost \""+resolver+"\" must be an integer from 1 to 2^50.",
		member{"policy", policy})
}

// tooLarge is the 413 for a body past max_body_bytes.
func tooLarge(max int64) reply {
	return problem(http.StatusRequestEntityTooLarge, "Content Too Large",
		fmt.Sprintf("The body may be at most %d bytes.", max))
}

// unavailable is the refusal of fail: closed: fail_deny's status (503)
// with a problem body, or its text or JSON body.
func unavailable(failDeny *refusal) reply {
	if r, ok := failDeny.configured(); ok {
		return r
	}
	r := problem(failDeny.status, "Service Unavailable",
		"The rate limiter is unavailable, and this service does not admit unlimited requests.")
	r.headers = failDeny.headers
	return r
}
