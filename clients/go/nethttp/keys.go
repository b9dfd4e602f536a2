package nethttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Keys (docs/http.md, Keys): <prefix>{<subject>}:<policy>, and the
// override key beside it. The subject is the cluster hash tag, so one
// subject's keys share a slot.

// subjectKeys are a policy's limiter key and, when it is overridable,
// its override key, for the subject whose tag is head+tail, and that
// subject: its tag is the key's own bytes between the braces, so that a
// request's subject and key cost one allocation.
func subjectKeys(prefix, head, tail string, p *policy) (s subject, key, okey string) {
	key = prefix + "{" + head + tail + "}:" + p.name
	open := len(prefix) + 1
	s.tag = key[open : open+len(head)+len(tail)]
	if p.overridable {
		okey = key[:open+len(s.tag)+2] + "override:" + p.name
	}
	return s, key, okey
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

// Key is the limiter key the middleware uses for the policy and a
// subject's raw value for the policy's key (docs/http.md, Keys from code):
// an address for ip, an API key as a client sends it (hashed here), a
// user name, a header's value; ignored for global. From the current
// configuration.
func (m *Middleware) Key(policy, value string) (string, error) {
	key, _, err := m.keysFor(policy, value)
	return key, err
}

// OverrideKey is the policy's override key for the subject (docs/http.md,
// Keys from code): where RL.OVERRIDE SET gives one subject a limit of its
// own. The middleware reads it when the policy is overridable.
func (m *Middleware) OverrideKey(policy, value string) (string, error) {
	_, okey, err := m.keysFor(policy, value)
	return okey, err
}

func (m *Middleware) keysFor(policy, value string) (key, okey string, err error) {
	return keysOf(m.cur.Load().c, policy, value)
}

// keysOf is Key and OverrideKey for a configuration.
func keysOf(c *config, policy, value string) (key, okey string, err error) {
	p, ok := c.byName[policy]
	if !ok {
		return "", "", fmt.Errorf("librl: no policy is named %q", policy)
	}
	s, err := subjectOf(c, p, value)
	if err != nil {
		return "", "", err
	}
	base := c.prefix + "{" + s.tag + "}:"
	return base + p.name, base + "override:" + p.name, nil
}

// subjectOf is the policy's subject for a raw value, by the rules a
// request's goes through (identity.go).
func subjectOf(c *config, p *policy, value string) (subject, error) {
	if p.keyKind == "global" {
		return subject{tag: "global"}, nil
	}
	if value == "" {
		return subject{}, fmt.Errorf("librl: policy %q: the subject's value is empty", p.name)
	}
	switch p.keyKind {
	case "ip":
		a, ok := parseHop(value)
		if !ok {
			return subject{}, fmt.Errorf("librl: policy %q: %q is not an IP address", p.name, value)
		}
		return ipSubject(c, a), nil
	case "api-key":
		return subject{tag: "api-key:" + hashID(value)}, nil
	case "user":
		return subject{tag: "user:" + keyValue(value)}, nil
	case "identity":
		return subject{tag: p.ident.tag + p.ident.value(value)}, nil
	case "authorization":
		return subject{tag: p.keyTag + hashID(value)}, nil
	default: // header, cookie, query
		return subject{tag: p.keyTag + keyValue(value)}, nil
	}
}
