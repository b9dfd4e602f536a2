package nethttp

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Source is where the configuration comes from (docs/http.md, One
// configuration): File, Bytes, or a Config struct.
type Source interface {
	document() (any, error)
}

// File reads a YAML or JSON configuration file (JSON is YAML).
func File(path string) Source { return fileSource(path) }

// Bytes is a configuration document, YAML or JSON.
func Bytes(doc []byte) Source { return bytesSource(doc) }

type fileSource string

func (f fileSource) document() (any, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("librl: configuration: %w", err)
	}
	return bytesSource(data).document()
}

type bytesSource []byte

func (b bytesSource) document() (any, error) {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("librl: configuration: not YAML or JSON: %w", err)
	}
	return doc, nil
}

// Config is the configuration as Go data, field for field the document of
// docs/http.md (durations and rates as the document writes them: "250ms",
// "100/minute"). A zero field is an absent one and takes its default;
// pointers mark the fields whose zero value is meaningful.
type Config struct {
	Prefix         *string  // default "rl:"
	Mode           string   // enforce | shadow
	Fail           string   // open | closed
	Timeout        string   // default "250ms"
	Headers        string   // both | ietf | legacy | none
	TrustedProxies []string // addresses or CIDR networks
	ExemptLoopback *bool    // default true
	APIKeyHeader   string   // default X-Api-Key
	MaxBodyBytes   int64    // default 8 MiB
	Deny           *Deny
	Policies       []Policy
	Routes         []Route // nil: every policy applies to every request
}

// Deny is the refusal's status and body.
type Deny struct {
	Status  int    // default 429
	Body    string // problem | text
	Message string // the text body
}

// Policy is one named limit.
type Policy struct {
	Name        string
	Algorithm   string // fixed | sliding | approx | token
	Limit       int64  // token: the rate per Window
	Window      string
	Rate        string // instead of Limit and Window: "100/minute"
	Aligned     bool   // fixed only
	Burst       int64  // token only
	Key         string // ip | api-key | user | header:<Name> | global
	Cost        string // "" (1) | "<n>" | body-bytes | header:<Name>
	Count       string // all | failed | succeeded
	Overridable bool
}

// Route attaches policies to a path prefix (and methods).
type Route struct {
	Path     string
	Methods  []string
	Policies []string // empty: the route is exempt
}

// Ptr is a pointer to v, for Config's optional fields.
func Ptr[T any](v T) *T { return &v }

func (c Config) document() (any, error) {
	doc := map[string]any{}
	put := func(k string, v any, present bool) {
		if present {
			doc[k] = v
		}
	}
	if c.Prefix != nil {
		doc["prefix"] = *c.Prefix
	}
	put("mode", c.Mode, c.Mode != "")
	put("fail", c.Fail, c.Fail != "")
	put("timeout", c.Timeout, c.Timeout != "")
	put("headers", c.Headers, c.Headers != "")
	if c.TrustedProxies != nil {
		list := make([]any, len(c.TrustedProxies))
		for i, p := range c.TrustedProxies {
			list[i] = p
		}
		doc["trusted_proxies"] = list
	}
	if c.ExemptLoopback != nil {
		doc["exempt_loopback"] = *c.ExemptLoopback
	}
	put("api_key_header", c.APIKeyHeader, c.APIKeyHeader != "")
	put("max_body_bytes", c.MaxBodyBytes, c.MaxBodyBytes != 0)
	if c.Deny != nil {
		d := map[string]any{}
		if c.Deny.Status != 0 {
			d["status"] = c.Deny.Status
		}
		if c.Deny.Body != "" {
			d["body"] = c.Deny.Body
		}
		if c.Deny.Message != "" {
			d["message"] = c.Deny.Message
		}
		doc["deny"] = d
	}
	if c.Policies != nil {
		list := make([]any, len(c.Policies))
		for i, p := range c.Policies {
			m := map[string]any{"name": p.Name, "algorithm": p.Algorithm}
			if p.Limit != 0 {
				m["limit"] = p.Limit
			}
			if p.Window != "" {
				m["window"] = p.Window
			}
			if p.Rate != "" {
				m["rate"] = p.Rate
			}
			if p.Aligned {
				m["aligned"] = true
			}
			if p.Burst != 0 {
				m["burst"] = p.Burst
			}
			if p.Key != "" {
				m["key"] = p.Key
			}
			if p.Cost != "" {
				if n, err := strconv.ParseInt(p.Cost, 10, 64); err == nil {
					m["cost"] = n
				} else {
					m["cost"] = p.Cost
				}
			}
			if p.Count != "" {
				m["count"] = p.Count
			}
			if p.Overridable {
				m["overridable"] = true
			}
			list[i] = m
		}
		doc["policies"] = list
	}
	if c.Routes != nil {
		list := make([]any, len(c.Routes))
		for i, r := range c.Routes {
			m := map[string]any{"path": r.Path}
			if r.Methods != nil {
				ms := make([]any, len(r.Methods))
				for j, x := range r.Methods {
					ms[j] = x
				}
				m["methods"] = ms
			}
			ps := make([]any, len(r.Policies))
			for j, x := range r.Policies {
				ps[j] = x
			}
			m["policies"] = ps
			list[i] = m
		}
		doc["routes"] = list
	}
	return doc, nil
}

// ConfigError is a configuration refused at start-up; Field is the path
// of the field at fault (policies[0].burst).
type ConfigError struct {
	Field   string
	Message string
}

func (e *ConfigError) Error() string {
	return "librl: configuration: " + e.Field + ": " + e.Message
}

func bad(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// The validated configuration.
type config struct {
	prefix         string
	shadow         bool
	failClosed     bool
	timeout        time.Duration
	ietf, legacy   bool
	trusted        []netip.Prefix
	exemptLoopback bool
	apiKeyHeader   string
	maxBody        int64
	denyStatus     int
	denyText       bool
	denyMessage    string
	policies       []*policy
	byName         map[string]*policy
	routes         []route
	hasRoutes      bool
}

type costKind uint8

const (
	costUnits costKind = iota
	costBodyBytes
	costHeader
)

type policy struct {
	name        string
	algorithm   string // fixed sliding approx token
	limit       int64
	window      time.Duration
	aligned     bool
	burst       int64
	keyKind     string // ip api-key user header global
	keyHeader   string // canonical header name for header:<Name>
	cost        costKind
	costUnits   int64
	costHeader  string
	count       string
	overridable bool
}

var (
	policyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	token      = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	method     = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Z-]+$") // a token without lower case
)

func fields(path string, m map[string]any, known ...string) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		found := false
		for _, kn := range known {
			if k == kn {
				found = true
				break
			}
		}
		if !found {
			return bad(join(path, k), "unknown field (expected one of %s)", strings.Join(known, ", "))
		}
	}
	return nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func asMap(path string, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bad(path, "must be an object, got %s", describe(v))
	}
	return m, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprint(x)
	}
}

func asString(path string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", bad(path, "must be a string, got %s", describe(v))
	}
	return s, nil
}

// eachString reads a list of strings at path, what naming its items in the
// error when it is not a list, and hands each item to use with its own path,
// in order, stopping at the first error.
func eachString(path string, v any, what string, use func(at, s string) error) error {
	list, ok := v.([]any)
	if !ok {
		return bad(path, "must be a list of %s", what)
	}
	for i, item := range list {
		at := index(path, i)
		s, err := asString(at, item)
		if err != nil {
			return err
		}
		if err := use(at, s); err != nil {
			return err
		}
	}
	return nil
}

func asBool(path string, v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, bad(path, "must be true or false, got %s", describe(v))
	}
	return b, nil
}

// asInt reads an integer (YAML int, JSON number) from lo to hi.
func asInt(path string, v any, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, bad(path, "must be at most %d", hi)
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
			return 0, bad(path, "must be an integer, got %v", x)
		}
		n = int64(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, bad(path, "must be an integer, got %s", x)
		}
		n = i
	default:
		return 0, bad(path, "must be an integer, got %s", describe(v))
	}
	if n < lo || n > hi {
		return 0, bad(path, "must be from %d to %d, got %d", lo, hi, n)
	}
	return n, nil
}

func asDuration(path string, v any, lo, hi time.Duration) (time.Duration, error) {
	var ms int64
	switch x := v.(type) {
	case string:
		var ok bool
		if ms, ok = durationMS(x); !ok {
			return 0, bad(path, "%q is not a duration: write a positive integer with ms, s, m, h or d (1500ms, 1m), or seconds", x)
		}
	default:
		n, err := asInt(path, v, 1, 1<<40)
		if err != nil {
			return 0, bad(path, "must be a duration such as \"250ms\" or \"1m\", got %s", describe(v))
		}
		ms = n * 1000
	}
	if d := time.Duration(ms) * time.Millisecond; ms <= int64(hi/time.Millisecond) && d >= lo {
		return d, nil
	}
	return 0, bad(path, "must be from %v to %v", lo, hi)
}

func oneOf(path string, v any, allowed ...string) (string, error) {
	s, err := asString(path, v)
	if err != nil {
		return "", err
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", bad(path, "%q is not one of %s", s, strings.Join(allowed, ", "))
}

func parseConfig(doc any) (*config, error) {
	top, err := asMap("configuration", doc)
	if err != nil {
		return nil, err
	}
	if err := fields("", top, "prefix", "mode", "fail", "timeout", "headers", "trusted_proxies",
		"exempt_loopback", "api_key_header", "max_body_bytes", "local_max_keys", "deny", "policies", "routes"); err != nil {
		return nil, err
	}
	c := &config{prefix: "rl:", timeout: 250 * time.Millisecond, ietf: true, legacy: true, exemptLoopback: true,
		apiKeyHeader: "X-Api-Key", maxBody: 8 << 20, denyStatus: 429, denyMessage: "Too Many Requests",
		byName: map[string]*policy{}}
	if v, ok := top["prefix"]; ok {
		s, err := asString("prefix", v)
		if err != nil {
			return nil, err
		}
		if len(s) > 64 {
			return nil, bad("prefix", "at most 64 bytes, got %d", len(s))
		}
		for _, r := range s {
			if r < 0x21 || r > 0x7e || r == '{' || r == '}' {
				return nil, bad("prefix", "%q: printable ASCII without braces or spaces only (braces would break the cluster hash tag)", s)
			}
		}
		c.prefix = s
	}
	if v, ok := top["mode"]; ok {
		s, err := oneOf("mode", v, "enforce", "shadow")
		if err != nil {
			return nil, err
		}
		c.shadow = s == "shadow"
	}
	if v, ok := top["fail"]; ok {
		s, err := oneOf("fail", v, "open", "closed", "local")
		if err != nil {
			return nil, err
		}
		if s == "local" {
			return nil, bad("fail", "local is only in the Rust integration (librl-tower); use open or closed")
		}
		c.failClosed = s == "closed"
	}
	if v, ok := top["timeout"]; ok {
		if c.timeout, err = asDuration("timeout", v, time.Millisecond, time.Minute); err != nil {
			return nil, err
		}
	}
	if v, ok := top["headers"]; ok {
		s, err := oneOf("headers", v, "both", "ietf", "legacy", "none")
		if err != nil {
			return nil, err
		}
		c.ietf, c.legacy = s == "both" || s == "ietf", s == "both" || s == "legacy"
	}
	if v, ok := top["trusted_proxies"]; ok {
		err := eachString("trusted_proxies", v, "addresses or networks", func(at, s string) error {
			net, err := parseNetwork(s)
			if err != nil {
				return bad(at, "%q is not an address or a network", s)
			}
			c.trusted = append(c.trusted, net)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if v, ok := top["exempt_loopback"]; ok {
		if c.exemptLoopback, err = asBool("exempt_loopback", v); err != nil {
			return nil, err
		}
	}
	if v, ok := top["api_key_header"]; ok {
		s, err := asString("api_key_header", v)
		if err != nil {
			return nil, err
		}
		if !token.MatchString(s) {
			return nil, bad("api_key_header", "%q is not a header name", s)
		}
		c.apiKeyHeader = s
	}
	if v, ok := top["max_body_bytes"]; ok {
		if c.maxBody, err = asInt("max_body_bytes", v, 1, maxUnits); err != nil {
			return nil, err
		}
	}
	if v, ok := top["local_max_keys"]; ok {
		// Read by the Rust integration's local fail mode only; checked alike.
		if _, err = asInt("local_max_keys", v, 1, 1<<32); err != nil {
			return nil, err
		}
	}
	if v, ok := top["deny"]; ok {
		if err := c.parseDeny(v); err != nil {
			return nil, err
		}
	}
	v, ok := top["policies"]
	if !ok {
		return nil, bad("policies", "missing: a configuration needs at least one policy")
	}
	list, ok := v.([]any)
	if !ok {
		return nil, bad("policies", "must be a list of policies")
	}
	for i, item := range list {
		p, err := parsePolicy(index("policies", i), item)
		if err != nil {
			return nil, err
		}
		if _, dup := c.byName[p.name]; dup {
			return nil, bad(index("policies", i)+".name", "%q is used by an earlier policy", p.name)
		}
		c.byName[p.name] = p
		c.policies = append(c.policies, p)
	}
	if v, ok := top["routes"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, bad("routes", "must be a list of routes")
		}
		c.hasRoutes = len(list) > 0
		for i, item := range list {
			r, err := c.parseRoute(index("routes", i), item)
			if err != nil {
				return nil, err
			}
			c.routes = append(c.routes, r)
		}
	}
	return c, nil
}

// parseNetwork reads an address or a CIDR network; an IPv6 zone index on
// the address is dropped, as everywhere an address is read.
func parseNetwork(s string) (netip.Prefix, error) {
	if addr, bits, ok := strings.Cut(s, "/"); ok {
		if at := strings.IndexByte(addr, '%'); at >= 0 && strings.Contains(addr, ":") {
			s = addr[:at] + "/" + bits
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96), nil
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.WithZone("").Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (c *config) parseDeny(v any) error {
	m, err := asMap("deny", v)
	if err != nil {
		return err
	}
	if err := fields("deny", m, "status", "body", "message"); err != nil {
		return err
	}
	if s, ok := m["status"]; ok {
		n, err := asInt("deny.status", s, 400, 599)
		if err != nil {
			return err
		}
		c.denyStatus = int(n)
	}
	if b, ok := m["body"]; ok {
		s, err := oneOf("deny.body", b, "problem", "text")
		if err != nil {
			return err
		}
		c.denyText = s == "text"
	}
	if msg, ok := m["message"]; ok {
		s, err := asString("deny.message", msg)
		if err != nil {
			return err
		}
		if len(s) < 1 || len(s) > 1024 {
			return bad("deny.message", "must be 1 to 1024 bytes, got %d", len(s))
		}
		c.denyMessage = s
	}
	return nil
}

func parsePolicy(path string, v any) (*policy, error) {
	m, err := asMap(path, v)
	if err != nil {
		return nil, err
	}
	if err := fields(path, m, "name", "algorithm", "limit", "window", "rate", "aligned", "burst", "key",
		"cost", "count", "overridable"); err != nil {
		return nil, err
	}
	p := &policy{keyKind: "ip", cost: costUnits, costUnits: 1, count: "all"}
	f := func(k string) string { return path + "." + k }
	name, ok := m["name"]
	if !ok {
		return nil, bad(f("name"), "missing")
	}
	if p.name, err = asString(f("name"), name); err != nil {
		return nil, err
	}
	if !policyName.MatchString(p.name) {
		return nil, bad(f("name"), "%q: 1 to 64 of A-Z a-z 0-9 - _ . (it is part of the key)", p.name)
	}
	alg, ok := m["algorithm"]
	if !ok {
		return nil, bad(f("algorithm"), "missing (fixed, sliding, approx or token)")
	}
	if p.algorithm, err = oneOf(f("algorithm"), alg, "fixed", "sliding", "approx", "token"); err != nil {
		return nil, err
	}
	limit, hasLimit := m["limit"]
	window, hasWindow := m["window"]
	if rate, ok := m["rate"]; ok {
		if hasLimit || hasWindow {
			return nil, bad(f("rate"), "rate is limit and window in one: give rate, or limit and window, not both")
		}
		s, err := asString(f("rate"), rate)
		if err != nil {
			return nil, err
		}
		limit, ms, ok := parseRate(s)
		if !ok {
			return nil, bad(f("rate"), "%q is not N/unit (unit: s, second, m, minute, h, hour, d, day, their plurals, or a duration such as 10s)", s)
		}
		if ms > int64(maxWindow/time.Millisecond) {
			return nil, bad(f("rate"), "%q: the period must be from 1ms to 3650 days", s)
		}
		p.limit, p.window = limit, time.Duration(ms)*time.Millisecond
	} else {
		if !hasLimit {
			return nil, bad(f("limit"), "missing: give limit and window, or rate")
		}
		if p.limit, err = asInt(f("limit"), limit, 1, maxUnits); err != nil {
			return nil, err
		}
		if !hasWindow {
			return nil, bad(f("window"), "missing: give limit and window, or rate")
		}
		if p.window, err = asDuration(f("window"), window, time.Millisecond, maxWindow); err != nil {
			return nil, err
		}
	}
	if v, ok := m["aligned"]; ok {
		if p.aligned, err = asBool(f("aligned"), v); err != nil {
			return nil, err
		}
		if p.algorithm != "fixed" {
			return nil, bad(f("aligned"), "aligned is for fixed policies, not %s", p.algorithm)
		}
	}
	if v, ok := m["burst"]; ok {
		if p.algorithm != "token" {
			return nil, bad(f("burst"), "burst is for token policies, not %s", p.algorithm)
		}
		if p.burst, err = asInt(f("burst"), v, 1, maxUnits); err != nil {
			return nil, err
		}
	}
	if v, ok := m["key"]; ok {
		s, err := asString(f("key"), v)
		if err != nil {
			return nil, err
		}
		switch {
		case s == "ip" || s == "api-key" || s == "user" || s == "global":
			p.keyKind = s
		case strings.HasPrefix(s, "header:") && token.MatchString(s[len("header:"):]):
			p.keyKind, p.keyHeader = "header", s[len("header:"):]
		default:
			return nil, bad(f("key"), "%q is not ip, api-key, user, header:<Name> or global", s)
		}
	}
	if v, ok := m["cost"]; ok {
		if s, isString := v.(string); isString {
			switch {
			case s == "body-bytes":
				p.cost = costBodyBytes
			case strings.HasPrefix(s, "header:") && token.MatchString(s[len("header:"):]):
				p.cost, p.costHeader = costHeader, s[len("header:"):]
			default:
				return nil, bad(f("cost"), "%q is not an integer, body-bytes or header:<Name>", s)
			}
		} else if p.costUnits, err = asInt(f("cost"), v, 1, maxUnits); err != nil {
			return nil, err
		}
	}
	if v, ok := m["count"]; ok {
		if p.count, err = oneOf(f("count"), v, "all", "failed", "succeeded"); err != nil {
			return nil, err
		}
	}
	if v, ok := m["overridable"]; ok {
		if p.overridable, err = asBool(f("overridable"), v); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (c *config) parseRoute(path string, v any) (route, error) {
	m, err := asMap(path, v)
	if err != nil {
		return route{}, err
	}
	if err := fields(path, m, "path", "methods", "policies"); err != nil {
		return route{}, err
	}
	var r route
	p, ok := m["path"]
	if !ok {
		return r, bad(path+".path", "missing")
	}
	if r.path, err = asString(path+".path", p); err != nil {
		return r, err
	}
	if !strings.HasPrefix(r.path, "/") {
		return r, bad(path+".path", "%q must start with /", r.path)
	}
	r.match = lowerASCII(canonicalPath(r.path))
	if ms, ok := m["methods"]; ok {
		err := eachString(path+".methods", ms, "method names", func(at, s string) error {
			if !method.MatchString(s) {
				return bad(at, "%q is not a method name without lower-case letters (GET, M-SEARCH)", s)
			}
			r.methods = append(r.methods, s)
			return nil
		})
		if err != nil {
			return r, err
		}
		// A route that matches no method is a mistake; without methods, every method.
		if len(r.methods) == 0 {
			return r, bad(path+".methods", "must not be empty: omit methods for every method")
		}
	}
	ps, ok := m["policies"]
	if !ok {
		return r, bad(path+".policies", "missing (a list of policy names; [] exempts the route)")
	}
	err = eachString(path+".policies", ps, "policy names", func(at, s string) error {
		pol, ok := c.byName[s]
		if !ok {
			return bad(at, "no policy is named %q", s)
		}
		r.policies = append(r.policies, pol)
		return nil
	})
	return r, err
}
