package nethttp

import "testing"

// ${VAR} substitution (docs/http/go.md, Configuration): the forms, the
// escape, and the errors naming the variable.
func TestSubstitute(t *testing.T) {
	env := map[string]string{"LIMIT": "50", "EMPTY": "", "W": "1m"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct{ in, out, err string }{
		{"limit: ${LIMIT}", "limit: 50", ""},
		{"limit: ${MISSING:-10}, window: ${W:-1s}", "limit: 10, window: 1m", ""},
		{"limit: ${EMPTY:-7}", "limit: 7", ""},
		{"message: ${EMPTY}", "message: ", ""},
		{"message: cost $5, $${LIMIT} $LIMIT", "message: cost $5, ${LIMIT} $LIMIT", ""},
		{"default: ${MISSING:-a:-b}", "default: a:-b", ""},
		{"limit: ${MISSING}", "", "librl: configuration: ${MISSING}: not set"},
		{"limit: ${LIMIT", "", "librl: configuration: ${: is not closed by }"},
		{"limit: ${1X}", "", `librl: configuration: ${1X}: "1X" is not a variable name (letters, digits and _, not starting with a digit)`},
		{"no references at all", "no references at all", ""},
	} {
		out, err := substitute([]byte(c.in), lookup)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(out) != c.out {
			t.Errorf("%q: %q, %v; want %q", c.in, out, err, c.out)
		}
	}
}
