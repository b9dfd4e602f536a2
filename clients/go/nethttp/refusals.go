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

// denied is the refusal by the most restrictive check: the deny's status
// with a problem body naming the policy (retry_after in ms, null when no
// wait helps), or its text or JSON body. The body is what problem writes
// for these members, appended into one buffer: the refusal path of a
// limit under attack allocates little.
func denied(deny *refusal, x checked, cost int64) reply {
	if r, ok := deny.configured(); ok {
		return r
	}
	limit := quota(x)
	retry := ms(x.d.RetryAfter)
	concurrency := x.p.algorithm == "concurrency"
	b := make([]byte, 0, 256+3*len(x.p.name))
	b = append(b, `{"type":"about:blank","title":"Too Many Requests","status":`...)
	b = strconv.AppendInt(b, int64(deny.status), 10)
	b = append(b, `,"detail":"`...)
	switch {
	case concurrency && retry >= 0:
		b = appendWhat(append(b, "Concurrency limit "...), x.p, limit)
		b = strconv.AppendInt(append(b, " reached; retry in "...), retryAfterSecs(x.d), 10)
		b = append(b, ` s."`...)
	case concurrency:
		b = strconv.AppendInt(append(b, "This request costs "...), cost, 10)
		b = appendWhat(append(b, ", more than concurrency limit "...), x.p, limit)
		b = append(b, ` ever admits."`...)
	case retry >= 0:
		b = appendWhat(append(b, "Rate limit "...), x.p, limit)
		b = strconv.AppendInt(append(b, " exceeded; retry in "...), retryAfterSecs(x.d), 10)
		b = append(b, ` s."`...)
	default:
		b = strconv.AppendInt(append(b, "This request costs "...), cost, 10)
		b = appendWhat(append(b, ", more than rate limit "...), x.p, limit)
		b = append(b, ` ever admits at once."`...)
	}
	b = appendJSONString(append(b, `,"policy":`...), x.p.name)
	b = strconv.AppendInt(append(b, `,"limit":`...), limit, 10)
	b = append(b, `,"retry_after":`...)
	if retry >= 0 {
		b = strconv.AppendInt(b, retry, 10)
	} else {
		b = append(b, "null"...)
	}
	// The title names the refusal, whatever status it is sent with.
	return reply{status: deny.status, contentType: problemJSON, body: append(b, '}'), headers: deny.headers}
}

// appendWhat appends the details' name of the policy, inside a JSON
// string: \"api\" (100 per 60s), or \"uploads\" (2 at once).
func appendWhat(b []byte, p *policy, limit int64) []byte {
	b = append(appendJSONContent(append(b, `\"`...), p.name), `\" (`...)
	b = strconv.AppendInt(b, limit, 10)
	if p.algorithm == "concurrency" {
		return append(b, " at once)"...)
	}
	w := p.window.Milliseconds()
	if w%1000 == 0 {
		b = strconv.AppendInt(append(b, " per "...), w/1000, 10)
		return append(b, "s)"...)
	}
	b = strconv.AppendInt(append(b, " per "...), w, 10)
	return append(b, "ms)"...)
}

// appendJSONString appends s as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	return append(appendJSONContent(append(b, '"'), s), '"')
}

// appendJSONContent appends s as encoding/json writes it, without the
// quotes; a string of characters it never escapes (every policy name) is
// copied as it is.
func appendJSONContent(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string: never an error
			return append(b, q[1:len(q)-1]...)
		}
	}
	return append(b, s...)
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
