package nethttp

import "strings"

// Routes (docs/http.md, Routes): the canonical path a route matches on,
// and the route a request selects.

// route is one configured route, its path canonical and in lower case.
type route struct {
	path     string // as configured: the hook's Route
	match    string // canonicalPath(path), ASCII lower case
	methods  []string
	policies []*policy
	deny     *refusal // the configuration's deny, with this route's fields
}

// canonicalPath is the path routes match on (docs/http.md, Routes): an
// absolute-form target's scheme and authority dropped, the query and any
// fragment dropped, percent-decoded until no %XX is left that decodes, then
// split on "/", each segment cut at its first ";", empty and "." segments
// dropped, ".." removing the segment before it, and joined with "/" and no
// trailing slash. A path already in that form is returned as is (the
// common case allocates nothing); the work is linear in the path's length
// however deep its encoding.
func canonicalPath(p string) string {
	if isCanonical(p) {
		return p
	}
	p = pathOfAbsoluteForm(p)
	if q := strings.IndexAny(p, "?#"); q >= 0 {
		p = p[:q]
	}
	decoded := percentDecode(p)
	var segs []string
	for len(decoded) > 0 {
		var seg string
		if i := strings.IndexByte(decoded, '/'); i >= 0 {
			seg, decoded = decoded[:i], decoded[i+1:]
		} else {
			seg, decoded = decoded, ""
		}
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	return "/" + strings.Join(segs, "/")
}

// pathOfAbsoluteForm is an absolute-form request target's path and
// query (http://host/a?b gives /a?b; http://host gives ""); any other
// target as it is. A scheme is a letter, then letters, digits, +, - or .,
// then "://".
func pathOfAbsoluteForm(p string) string {
	i := 0
	for i < len(p) && (isLetter(p[i]) || i > 0 && (p[i] >= '0' && p[i] <= '9' || p[i] == '+' || p[i] == '-' || p[i] == '.')) {
		i++
	}
	if i == 0 || !strings.HasPrefix(p[i:], "://") {
		return p
	}
	rest := p[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		return rest[j:]
	}
	return ""
}

// isCanonical: "/", or "/" followed by segments that need nothing done.
func isCanonical(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	if p[len(p)-1] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%', '?', '#', ';':
			return false
		case '/':
			// An empty, "." or ".." segment follows.
			rest := p[i+1:]
			if rest == "" || rest[0] == '/' || rest == "." || rest == ".." ||
				strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
				return false
			}
		}
	}
	return true
}

// percentDecode decodes %XX (two hex digits, any case) until none is left
// that decodes: %252F ends as "/", as a framework that decoded once
// already would see it. A "%" not followed by two hex digits stays. Each
// decoded byte is checked, with the two bytes before it, for a new %XX,
// so the whole is one pass (the rewriting has one result whatever the
// order: no two %XX can overlap).
func percentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		for n := len(out); n >= 3 && out[n-3] == '%'; n = len(out) {
			hi, okHi := unhex(out[n-2])
			lo, okLo := unhex(out[n-1])
			if !okHi || !okLo {
				break
			}
			out = append(out[:n-3], hi<<4|lo)
		}
	}
	return string(out)
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lowerASCII folds A-Z only (routes fold ASCII case, not Unicode's).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// segmentPrefix: the canonical path starts with the route's (lower-case,
// canonical) path on whole segments, ASCII case folded: /upload covers
// /upload and /UPLOAD/x, never /uploads; / covers everything.
func segmentPrefix(path, prefix string) bool {
	if prefix == "/" {
		return true
	}
	if len(path) < len(prefix) || (len(path) > len(prefix) && path[len(prefix)] != '/') {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := path[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// selectPolicies is the policies a request gets and the index of the
// route that chose them (-1 without routes); false when routes exist and
// none matches: the request is not checked.
func (c *config) selectPolicies(method, path string) ([]*policy, int, bool) {
	if len(c.routes) == 0 {
		return c.policies, -1, true
	}
	i := selectRoute(c.routes, method, path)
	if i < 0 {
		return nil, -1, false
	}
	return c.routes[i].policies, i, true
}

// selectRoute: the index of the route with the longest path prefix (whole
// segments) among those whose methods include the request's, the first on
// a tie; -1 when none matches. path is the request's path as net/http
// decoded it (r.URL.Path); canonicalPath makes the raw form give the same.
func selectRoute(routes []route, method, path string) int {
	p := canonicalPath(path)
	best := -1
	for i := range routes {
		r := &routes[i]
		if !segmentPrefix(p, r.match) || (r.methods != nil && !contains(r.methods, method)) {
			continue
		}
		if best < 0 || len(r.match) > len(routes[best].match) {
			best = i
		}
	}
	return best
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
