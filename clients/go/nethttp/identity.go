package nethttp

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
)

// Identity (docs/http.md, Identity): whose counter a request uses, its
// subject, from the peer, the headers the configuration trusts and the
// authenticated user.

// subject is the part inside the key's braces.
type subject struct {
	tag string // ip:203.0.113.7, ip:2001:db8:1::/56, api-key:<32 hex>, user:alice, header:x-tenant:acme, global
}

type userKey struct{}

// WithUser returns a context carrying the authenticated user, where the
// default user resolver looks: an authentication middleware in front of
// librl's does r = r.WithContext(nethttp.WithUser(r.Context(), name)).
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFromContext is the user WithUser stored, or "".
func UserFromContext(ctx context.Context) string {
	s, _ := ctx.Value(userKey{}).(string)
	return s
}

// attributeKey is where WithAttribute keeps a request attribute: one key
// per name, so that attributes set by different middlewares stack.
type attributeKey struct{ name string }

// WithAttribute returns a context carrying the request attribute name with
// value, for the attribute:<name> source (docs/http.md, Request
// attributes): an authentication or routing middleware in front of
// librl's records what it decided (a project, a tenant, a plan) with
// r = r.WithContext(nethttp.WithAttribute(r.Context(), "project", id)).
// The value is read trimmed of spaces and tabs; an empty one is no value.
// A name the configuration can name is 1 to 64 of A-Z a-z 0-9 _, not
// starting with a digit.
func WithAttribute(ctx context.Context, name, value string) context.Context {
	return context.WithValue(ctx, attributeKey{name}, value)
}

// attributeValue is the attribute WithAttribute stored under name,
// trimmed; false when there is none or it is empty.
func attributeValue(ctx context.Context, name string) (string, bool) {
	if ctx == nil {
		return "", false
	}
	v, _ := ctx.Value(attributeKey{name}).(string)
	v = trimOWS(v)
	return v, v != ""
}

// headerValue reads a header as docs/http.md's Identity says every header
// is read: all its lines joined by ", " (as HTTP combines a field's
// lines), trimmed of spaces and tabs; false when that leaves nothing.
// The bytes are those received.
func headerValue(h http.Header, name string) (string, bool) {
	v := trimOWS(joinLines(h.Values(name)))
	return v, v != ""
}

func joinLines(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.Join(lines, ", ")
}

// parseHop reads an address with an optional port (digits after ":")
// or [v6] brackets (with or without a port). An IPv6 zone index
// (fe80::1%eth0) is dropped: a zone names an interface of the machine
// that wrote it, not a different client.
func parseHop(hop string) (netip.Addr, bool) {
	s := trimOWS(hop)
	if rest, ok := strings.CutPrefix(s, "["); ok {
		inside, after, ok := strings.Cut(rest, "]")
		if !ok || (after != "" && !isPort(after)) {
			return netip.Addr{}, false
		}
		s = inside
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// One colon: an IPv4 address and its port.
		if !isPort(s[i:]) {
			return netip.Addr{}, false
		}
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// isPort: ":" and one or more digits.
func isPort(s string) bool {
	if len(s) < 2 || s[0] != ':' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func trustedBy(trusted []netip.Prefix, a netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP: the TCP peer, unless it is a trusted proxy; then
// X-Forwarded-For (its lines one list, empty elements skipped) read from
// the nearest hop back, the first untrusted address being the client (a
// hop that is not an address stops the walk), else a trusted peer's
// X-Real-IP when it is one address. false when the peer is no address.
func clientIP(peer string, trusted []netip.Prefix, h http.Header) (netip.Addr, bool) {
	client, ok := parseHop(peer)
	if !ok || !trustedBy(trusted, client) {
		return client, ok
	}
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(line, ",") {
			if hop = trimOWS(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	if len(hops) == 0 {
		if v, ok := headerValue(h, "X-Real-IP"); ok {
			if real, ok := parseHop(v); ok {
				client = real
			}
		}
		return client, true
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break
		}
		client = a
		if !trustedBy(trusted, a) {
			break
		}
	}
	return client, true
}

// identity computes a request's subjects, each once.
type identity struct {
	c      *config
	peer   string // the TCP peer, as http.Request.RemoteAddr writes it
	header http.Header
	// rawQuery is the request's query as sent (query: sources).
	rawQuery string
	user     string // the authenticated user, "" when none
	// ctx is the request's context, where WithAttribute keeps the
	// attributes (attribute: sources).
	ctx context.Context
	// The client's address (ok false: unknown) and its subject, found once.
	addr  netip.Addr
	ok    bool
	ip    subject
	hasIP bool
}

// client is the client's full address, false when unknown.
func (id *identity) client() (netip.Addr, bool) {
	if !id.hasIP {
		id.addr, id.ok = clientIP(id.peer, id.c.trusted, id.header)
		id.ip, id.hasIP = subject{tag: "ip:unknown"}, true
		if id.ok {
			id.ip = ipSubject(id.c, id.addr)
		}
	}
	return id.addr, id.ok
}

func (id *identity) clientIP() subject {
	id.client()
	return id.ip
}

// exempt: the client's full address is in an exempt network (docs/http.md,
// Exemptions); an unknown client never is.
func (id *identity) exempt() bool {
	if len(id.c.exempt) == 0 {
		return false
	}
	a, ok := id.client()
	return ok && trustedBy(id.c.exempt, a)
}

// ipSubject is ip:<address>, or an IPv6 client's network of ipv6_prefix
// bits (docs/http.md, IPv6 networks), written in one allocation.
func ipSubject(c *config, a netip.Addr) subject {
	var buf [3 + 43]byte
	b := append(buf[:0], "ip:"...)
	if a.Is6() && c.ipv6Prefix < 128 {
		p, _ := a.Prefix(c.ipv6Prefix) // 1..127 bits of a 128-bit address: never fails
		b = p.AppendTo(b)
	} else {
		b = a.AppendTo(b)
	}
	return subject{tag: string(b)}
}

func (id *identity) apiKey() (subject, bool) {
	v, ok := headerValue(id.header, id.c.apiKeyHeader)
	if !ok {
		return subject{}, false
	}
	return subject{tag: "api-key:" + hashID(v)}, true
}

// namedIdentity is one of the file's identities (docs/http.md, Named
// identities): its sources, tried in order.
type namedIdentity struct {
	tag     string   // "<name>:"
	sources []string // as written; ip only last
	// hashed: the value is always hashed (api-key, or an authorization:
	// source among its sources), whichever source gave it.
	hashed bool
}

// value is a source's value as the subject writes it.
func (n *namedIdentity) value(v string) string {
	if n.hashed {
		return hashID(v)
	}
	return keyValue(v)
}

// subjectParts is the policy's subject: its key kind's, falling back to
// the api-key subject (built-in user), then the ip; its tag in two parts,
// not yet joined (tail may be ""): subjectKeys joins them into the key
// itself, one allocation for both.
func (id *identity) subjectParts(p *policy) (head, tail string) {
	switch p.keyKind {
	case "api-key":
		if s, ok := id.apiKey(); ok {
			return s.tag, ""
		}
	case "user":
		if id.user != "" {
			return "user:", keyValue(id.user)
		}
		if s, ok := id.apiKey(); ok {
			return s.tag, ""
		}
	case "header":
		if v, ok := headerValue(id.header, p.keyHeader); ok {
			return p.keyTag, keyValue(v)
		}
	case "cookie", "query", "attribute":
		if v, ok := id.source(p.keySource); ok {
			return p.keyTag, keyValue(v)
		}
	case "authorization":
		if v, ok := id.source(p.keySource); ok {
			return p.keyTag, hashID(v)
		}
	case "identity":
		for _, source := range p.ident.sources {
			if source == "ip" {
				break
			}
			if v, ok := id.source(source); ok {
				return p.ident.tag, p.ident.value(v)
			}
		}
	case "global":
		return "global", ""
	}
	return id.clientIP().tag, ""
}

// source reads one of the request's sources.
func (id *identity) source(source string) (string, bool) {
	return sourceValue(id.ctx, source, id.header, id.rawQuery, id.user)
}
