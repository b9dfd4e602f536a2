package nethttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// subject is whose counter a request uses: the part inside the key's
// braces (docs/http.md, Identity and Keys).
type subject struct {
	tag      string // ip:203.0.113.7, api-key:<32 hex>, user:alice, header:x-tenant:acme, global
	loopback bool   // an ip subject with a loopback address
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

// hashID is the first 32 hex digits of the value's SHA-256:
// printf %s "$KEY" | sha256sum | cut -c1-32.
func hashID(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:16])
}

// keyValue is a user or header value as it appears in a key: verbatim when
// it is 1 to 64 bytes of A-Z a-z 0-9 . _ ~ @ + = : / -, else hashed (a "}"
// must not break the hash tag). Go strings are bytes: a header value's
// bytes as received, a user name's UTF-8.
func keyValue(v string) string {
	if keySafe(v) {
		return v
	}
	return "sha256-" + hashID(v)
}

func keySafe(v string) bool {
	if len(v) < 1 || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._~@+=:/-", c) >= 0) {
			return false
		}
	}
	return true
}

// identity computes a request's subjects, each once.
type identity struct {
	r    *http.Request
	c    *config
	user string
	ip   *subject
}

// parseHop reads an address with an optional port or [v6] brackets. An
// IPv6 zone index (fe80::1%eth0) is dropped: a zone names the receiving
// host's interface, not the client.
func parseHop(hop string) (netip.Addr, bool) {
	s := strings.TrimSpace(hop)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func (id *identity) trusted(a netip.Addr) bool {
	for _, p := range id.c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP: the TCP peer, unless it is a trusted proxy; then
// X-Forwarded-For read from the nearest hop back, the first untrusted
// address being the client (an unreadable hop stops the walk), else a
// trusted peer's X-Real-IP.
func (id *identity) clientIP() subject {
	if id.ip != nil {
		return *id.ip
	}
	peer, ok := parseHop(id.r.RemoteAddr)
	var s subject
	switch {
	case !ok:
		s = subject{tag: "ip:unknown"}
	default:
		client := peer
		if id.trusted(peer) {
			var hops []string
			for _, line := range id.r.Header.Values("X-Forwarded-For") {
				for _, h := range strings.Split(line, ",") {
					if h = strings.TrimSpace(h); h != "" {
						hops = append(hops, h)
					}
				}
			}
			if len(hops) == 0 {
				if real, ok := parseHop(id.r.Header.Get("X-Real-IP")); ok {
					client = real
				}
			}
			for i := len(hops) - 1; i >= 0; i-- {
				a, ok := parseHop(hops[i])
				if !ok {
					break
				}
				client = a
				if !id.trusted(a) {
					break
				}
			}
		}
		s = subject{tag: "ip:" + client.String(), loopback: client.IsLoopback()}
	}
	id.ip = &s
	return s
}

func (id *identity) apiKey() (subject, bool) {
	v := id.r.Header.Get(id.c.apiKeyHeader)
	if v == "" {
		return subject{}, false
	}
	return subject{tag: "api-key:" + hashID(v)}, true
}

func (id *identity) subject(p *policy) subject {
	switch p.keyKind {
	case "api-key":
		if s, ok := id.apiKey(); ok {
			return s
		}
	case "user":
		if id.user != "" {
			return subject{tag: "user:" + keyValue(id.user)}
		}
		if s, ok := id.apiKey(); ok {
			return s
		}
	case "header":
		if v := id.r.Header.Get(p.keyHeader); v != "" {
			return subject{tag: "header:" + strings.ToLower(p.keyHeader) + ":" + keyValue(v)}
		}
	case "global":
		return subject{tag: "global"}
	}
	return id.clientIP()
}
