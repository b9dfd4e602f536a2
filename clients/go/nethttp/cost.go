package nethttp

// Costs (docs/http.md, Cost) read from the request.

// headerCost is a `header:<Name>` cost from the header's lines: 1 when
// absent; else the lines joined by ", " (as HTTP combines them) and
// trimmed of spaces and tabs must be decimal digits (leading zeros
// allowed) of a value from 1 to 2^50. false for anything else: empty,
// two lines, "+5", "5.0", "0".
func headerCost(lines []string) (int64, bool) {
	switch len(lines) {
	case 0:
		return 1, true
	case 1:
	default:
		// Two lines join as "a, b": never digits only.
		return 0, false
	}
	v := trimOWS(lines[0])
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int64(c-'0'); n > maxUnits {
			return 0, false
		}
	}
	return n, n >= 1
}
