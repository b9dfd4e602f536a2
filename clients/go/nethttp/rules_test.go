package nethttp

import (
	"strings"
	"testing"
)

// The pure rules of docs/http.md that section A of the contract decided,
// until the shared vectors (conformance/vectors/) carry them.

func TestCanonicalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/":                "/",
		"":                 "/",
		"/limited":         "/limited",
		"//limited":        "/limited",
		"/limited/":        "/limited",
		"/limited%2Fx":     "/limited/x",
		"/limited%252Fx":   "/limited/x",
		"/limited%2fx":     "/limited/x",
		"/./limited":       "/limited",
		"/x/../limited":    "/limited",
		"/../../limited":   "/limited",
		"/limited;x":       "/limited",
		"/limited;x/y":     "/limited/y",
		"/a/b?x=1/../c":    "/a/b",
		"/a%3Fb":           "/a?b",
		"/%2E%2E/limited":  "/limited",
		"/a/%2e":           "/a",
		"/100%":            "/100%",
		"/a%zz":            "/a%zz",
		"/%%34%31":         "/A",
		"/%25%32%46x":      "/x",
		"/LIMITED":         "/LIMITED",
		"/a/./b/../../c/.": "/c",
		"/\xfc":            "/\xfc",
	} {
		if got := canonicalPath(in); got != want {
			t.Errorf("canonicalPath(%q) = %q, want %q", in, got, want)
		}
	}
	// Linear however deep the encoding: 2^16 layers of %25 around "A".
	if got := canonicalPath("/%" + strings.Repeat("25", 1<<16) + "41"); got != "/A" {
		t.Fatalf("%q", got)
	}
}

func TestRoutesMatchCanonicalPathsFoldingCase(t *testing.T) {
	routes := []route{
		{path: "/limited/", match: lowerASCII(canonicalPath("/limited/"))},
		{path: "/Up", match: lowerASCII(canonicalPath("/Up")), methods: []string{"M-SEARCH"}},
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/limited", 0}, {"GET", "/LIMITED/x", 0}, {"GET", "//limited", 0},
		{"GET", "/limitedx", -1}, {"GET", "/x/../limited;a", 0},
		{"M-SEARCH", "/up", 1}, {"GET", "/up", -1},
	} {
		if got := selectRoute(routes, c.method, c.path); got != c.want {
			t.Errorf("%s %s: route %d, want %d", c.method, c.path, got, c.want)
		}
	}
}

func TestDurationsAreTheModulesGrammar(t *testing.T) {
	for in, want := range map[string]int64{"1": 1000, "250ms": 250, "250MS": 250, "1S": 1000, "2m": 120000,
		"3H": 10800000, "1d": 86400000} {
		if got, ok := durationMS(in); !ok || got != want {
			t.Errorf("durationMS(%q) = %d, %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0", "0ms", "05s", " 5s", "5s ", "1.5s", "-5s", "+5s", "5sec", "ms", "5 s",
		"99999999999999999999d"} {
		if got, ok := durationMS(in); ok {
			t.Errorf("durationMS(%q) = %d, want an error", in, got)
		}
	}
}

func TestRatesAreTheLimitsLibrarysGrammar(t *testing.T) {
	for in, want := range map[string][2]int64{
		"5/minute": {5, 60000}, "5/Minute": {5, 60000}, "5/minutes": {5, 60000}, "5 / minute": {5, 60000},
		"5 per minute": {5, 60000}, "5 PER MINUTE": {5, 60000}, "5/2 minutes": {5, 120000}, "5/10s": {5, 10000},
		"3/1500ms": {3, 1500}, "5/60": {5, 60000}, "100/s": {100, 1000}, "1/day": {1, 86400000},
		" 7 /\thour ": {7, 3600000}, "1125899906842624/d": {1 << 50, 86400000},
	} {
		limit, ms, ok := parseRate(in)
		if !ok || limit != want[0] || ms != want[1] {
			t.Errorf("parseRate(%q) = %d, %d, %v, want %v", in, limit, ms, ok, want)
		}
	}
	for _, in := range []string{"5/sec", "5/min", "5/month", "5/1.5s", "5/0s", "/minute", "5/", "5",
		"-5/minute", "+5/minute", "5 perminute", "5/0 minutes", "5/10 ms", "5/ms", "5//minute"} {
		if limit, ms, ok := parseRate(in); ok {
			t.Errorf("parseRate(%q) = %d, %d, want an error", in, limit, ms)
		}
	}
}

func TestCostHeaders(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  int64
	}{{nil, 1}, {[]string{"5"}, 5}, {[]string{" 007\t"}, 7}, {[]string{"1125899906842624"}, 1 << 50}} {
		if got, ok := headerCost(c.lines); !ok || got != c.want {
			t.Errorf("headerCost(%q) = %d, %v, want %d", c.lines, got, ok, c.want)
		}
	}
	for _, lines := range [][]string{{""}, {"  "}, {"5", "5"}, {"+5"}, {"5.0"}, {"0"}, {"-1"}, {"1125899906842625"},
		{"99999999999999999999999"}, {"٣"}} {
		if got, ok := headerCost(lines); ok {
			t.Errorf("headerCost(%q) = %d, want an error", lines, got)
		}
	}
}

func TestZoneIndexesAreDropped(t *testing.T) {
	for in, want := range map[string]string{"[fe80::1%eth0]:443": "fe80::1", "2001:db8::1%eth0": "2001:db8::1",
		"[::ffff:10.0.0.1]:80": "10.0.0.1"} {
		if a, ok := parseHop(in); !ok || a.String() != want {
			t.Errorf("parseHop(%q) = %v, %v, want %s", in, a, ok, want)
		}
	}
	if p, err := parseNetwork("fe80::1%eth0/64"); err == nil {
		t.Errorf("parseNetwork: %v: a configuration's network has no zone", p)
	}
}

func TestKeysDeriveFromBytes(t *testing.T) {
	// X-Api-Key: FC 6E EF ("ünï" in Latin-1) hashes those three bytes.
	if got := hashID("\xfc\x6e\xef"); got != "28fe6888e9434cb726094453387d3238" {
		t.Fatal(got)
	}
	if keyValue("\xfc") == "\xfc" || keyValue("alice") != "alice" || keyValue(strings.Repeat("a", 65)) == strings.Repeat("a", 65) {
		t.Fatal("the key-safe test is on bytes")
	}
}

func TestConfigurationRules(t *testing.T) {
	ok := func(extra string) string {
		return `{"policies": [{"name": "p", "algorithm": "fixed", "rate": "5/Minute"}], "routes": [{"path": "/x", "policies": ["p"]` + extra + `}]}`
	}
	for _, doc := range []string{ok(`, "methods": ["M-SEARCH", "PROPFIND", "GET"]`), ok("")} {
		if _, err := parseConfig(mustDocument(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	for doc, field := range map[string]string{
		ok(`, "methods": []`):       "routes[0].methods",
		ok(`, "methods": ["get"]`):  "routes[0].methods[0]",
		ok(`, "methods": ["GE T"]`): "routes[0].methods[0]",
		ok(`, "methods": [""]`):     "routes[0].methods[0]",
	} {
		_, err := parseConfig(mustDocument(t, doc))
		if ce, isCE := err.(*ConfigError); !isCE || ce.Field != field {
			t.Errorf("%s: %v, want an error at %s", doc, err, field)
		}
	}
}

func mustDocument(t *testing.T, doc string) any {
	t.Helper()
	v, err := Bytes([]byte(doc)).document()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
