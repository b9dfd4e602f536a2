package nethttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Keys (docs/http.md, Keys): <prefix>{<subject>}:<policy>, and the
// override key beside it. The subject is the cluster hash tag, so one
// subject's keys share a slot.

// keys are a policy's limiter key and, when it is overridable, its
// override key, for one subject.
func keys(prefix string, s subject, p *policy) (key, okey string) {
	key = prefix + "{" + s.tag + "}:" + p.name
	if p.overridable {
		okey = prefix + "{" + s.tag + "}:override:" + p.name
	}
	return key, okey
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

// Subject is whose counter a key is, for Key and OverrideKey: the fields
// the policy's key reads, with the middleware's fallbacks (a user policy
// without User is the APIKey's, then the IP's).
type Subject struct {
	IP     string // an address: ip policies and every fallback (an IPv6 one is counted by its network)
	APIKey string // the key as a client sends it; hashed here as the middleware hashes it
	User   string // user policies
	Header string // header:<Name> policies: the header's value
}

// Key is the limiter key the middleware uses for the policy and subject
// (docs/http.md, Keys), from the current configuration.
func (m *Middleware) Key(policy string, s Subject) (string, error) {
	key, _, err := m.keysFor(policy, s)
	return key, err
}

// OverrideKey is the policy's override key for the subject: where
// RL.OVERRIDE SET gives one subject its own limit (docs/http.md, Keys),
// the key the middleware sends with OVERRIDE. A policy that is not
// overridable has none: its checks never read one.
func (m *Middleware) OverrideKey(policy string, s Subject) (string, error) {
	_, okey, err := m.keysFor(policy, s)
	if err == nil && okey == "" {
		err = fmt.Errorf("librl: policy %q is not overridable: its checks read no override key", policy)
	}
	return okey, err
}

func (m *Middleware) keysFor(policy string, s Subject) (key, okey string, err error) {
	c := m.cur.Load().c
	p, ok := c.byName[policy]
	if !ok {
		return "", "", fmt.Errorf("librl: no policy is named %q", policy)
	}
	h := http.Header{}
	if s.APIKey != "" {
		h.Set(c.apiKeyHeader, s.APIKey)
	}
	if p.keyKind == "header" && s.Header != "" {
		h.Set(p.keyHeader, s.Header)
	}
	// A peer of its own, so that no trusted proxy's headers are read.
	id := &identity{c: c, peer: s.IP, header: h, user: s.User}
	if s.IP != "" {
		if _, ok := parseHop(s.IP); !ok {
			return "", "", fmt.Errorf("librl: %q is not an IP address", s.IP)
		}
	}
	key, okey = keys(c.prefix, id.subject(p), p)
	return key, okey, nil
}
