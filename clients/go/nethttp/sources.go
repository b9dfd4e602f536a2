package nethttp

import (
	"context"
	"net/http"
	"strings"
)

// Sources (docs/http.md, Named identities): where a subject's value is
// read from a request: a header, a cookie, a query parameter, the
// credentials of an Authorization scheme, the user, or a request
// attribute (WithAttribute). Each reader gives
// the value's bytes as received (a query parameter's once decoded), and
// false when there is none or it is empty.

// cookieValue is the first `name=value` pair of the Cookie header's lines
// (each split on ";", trimmed) with exactly that name, a surrounding pair
// of double quotes removed, not decoded (RFC 6265).
func cookieValue(h http.Header, name string) (string, bool) {
	for _, line := range h.Values("Cookie") {
		for pair := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || trimOWS(k) != name {
				continue
			}
			v = trimOWS(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, v != ""
		}
	}
	return "", false
}

// queryValue is the first `name=value` pair of the raw query string
// (split on "&") whose name, form-decoded, is exactly name; its value
// form-decoded: "+" is a space, then each %XX once (an escape that is not
// one stays as written).
func queryValue(rawQuery, name string) (string, bool) {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || formDecode(k) != name {
			continue
		}
		v = formDecode(v)
		return v, v != ""
	}
	return "", false
}

func formDecode(s string) string {
	if strings.IndexByte(s, '+') < 0 && strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				b = append(b, c)
				continue
			}
			b = append(b, hi<<4|lo)
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// authorizationValue is the credentials of an Authorization value whose
// first token is scheme (ASCII case-insensitively): the rest after the
// spaces, trimmed.
func authorizationValue(h http.Header, scheme string) (string, bool) {
	v, ok := headerValue(h, "Authorization")
	if !ok || len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	rest := v[len(scheme):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // a longer scheme
	}
	rest = trimOWS(rest)
	return rest, rest != ""
}

// sourceValue reads one source (header:<Name>, cookie:<Name>,
// query:<Name>, authorization:<Scheme>, user, attribute:<name>) from a
// request's parts; ctx is the request's context.
func sourceValue(ctx context.Context, source string, h http.Header, rawQuery, user string) (string, bool) {
	kind, name, _ := strings.Cut(source, ":")
	switch kind {
	case "header":
		return headerValue(h, name)
	case "cookie":
		return cookieValue(h, name)
	case "query":
		return queryValue(rawQuery, name)
	case "authorization":
		return authorizationValue(h, name)
	case "user":
		return user, user != ""
	case "attribute":
		return attributeValue(ctx, name)
	}
	return "", false
}
