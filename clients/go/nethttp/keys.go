package nethttp

import (
	"crypto/sha256"
	"encoding/hex"
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
