package nethttp

// Durations and rates as the configuration writes them (docs/http.md,
// Durations; policies' rate).

// maxUnits is 2^50, the module's largest amount: a body-bytes cost is
// capped there, and a cost header's value bounded.
const maxUnits = int64(1) << 50

// durationMS reads the module's duration grammar (core/src/units.rs): a
// positive integer without leading zeros, then an optional unit ms, s, m,
// h or d in any case, no unit meaning seconds; no spaces, sign or
// fraction. false for anything else, and past 2^62 ms.
func durationMS(s string) (int64, bool) {
	n, rest, ok := leadingDecimal(s)
	if !ok || n == 0 || s[0] == '0' {
		return 0, false
	}
	var scale int64
	switch lowerASCII(rest) {
	case "", "s":
		scale = 1000
	case "ms":
		scale = 1
	case "m":
		scale = 60 * 1000
	case "h":
		scale = 60 * 60 * 1000
	case "d":
		scale = 24 * 60 * 60 * 1000
	default:
		return 0, false
	}
	return mulCapped(n, scale)
}

// durationOf reads a duration field's value: a string in the module's
// grammar, or a number of seconds whose value is whole (60, 60.0). Bounds
// are the schema's, checked by the walker.
func durationOf(v any) (int64, bool) {
	if s, ok := v.(string); ok {
		return durationMS(s)
	}
	n, ok := wholeNumber(v)
	if !ok || n < 0 {
		return 0, false
	}
	return mulCapped(n, 1000)
}

// leadingDecimal reads the digits s starts with (at least one) and returns
// the rest; false when there are none or the value passes 2^62.
func leadingDecimal(s string) (int64, string, bool) {
	var n int64
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if n > (1<<62)/10 {
			return 0, "", false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, s[i:], i > 0
}

// mulCapped is n*scale when it is at most 2^62.
func mulCapped(n, scale int64) (int64, bool) {
	if n > (1<<62)/scale {
		return 0, false
	}
	return n * scale, true
}

// rateUnits are the limits library's period words (minus month and year),
// each also in the plural.
var rateUnits = map[string]int64{
	"s": 1000, "second": 1000, "seconds": 1000,
	"m": 60 * 1000, "minute": 60 * 1000, "minutes": 60 * 1000,
	"h": 3600 * 1000, "hour": 3600 * 1000, "hours": 3600 * 1000,
	"d": 86400 * 1000, "day": 86400 * 1000, "days": 86400 * 1000,
}

// parseRate reads `rate:` as the limits library (slowapi, flask-limiter)
// writes it, ASCII case-insensitive: OWS count OWS ("/" | "per") OWS
// period OWS, count 1 to 2^50 digits, period `[n OWS] unit` (n >= 1; unit
// s, m, h, d, their words or the words' plurals) or a duration (5/10s,
// 3/1500ms, 5/60). "per" needs a space only where letters would touch.
// The count and the period in ms, unbounded: the walker bounds both with
// the schema's x-librl-rate.
func parseRate(s string) (int64, int64, bool) {
	s = trimOWS(lowerASCII(s))
	limit, rest, ok := leadingDecimal(s)
	if !ok {
		return 0, 0, false
	}
	rest = trimOWS(rest)
	switch {
	case len(rest) > 0 && rest[0] == '/':
		rest = rest[1:]
	case len(rest) > 3 && rest[:3] == "per" && !isLetter(rest[3]):
		rest = rest[3:]
	default:
		return 0, 0, false
	}
	period := trimOWS(rest)
	if ms, ok := durationMS(period); ok {
		return limit, ms, true
	}
	n, word := int64(1), period
	if len(period) > 0 && '0' <= period[0] && period[0] <= '9' {
		if n, word, ok = leadingDecimal(period); !ok || n < 1 {
			return 0, 0, false
		}
		word = trimOWS(word)
	}
	unit, ok := rateUnits[word]
	if !ok {
		return 0, 0, false
	}
	ms, ok := mulCapped(n, unit)
	return limit, ms, ok
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// trimOWS drops spaces and tabs at both ends (RFC 9110's OWS).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
