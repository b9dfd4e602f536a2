package nethttp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	librl "github.com/librl/librl/clients/go"
)

// The shared vectors (conformance/vectors/README.md): every pure rule of
// docs/http.md as input and expected output, run against the functions
// the middleware calls on requests, without Redis.

// vectorFiles are the files this runner runs; the directory must hold
// exactly these, so a new file cannot be skipped silently.
var vectorFiles = map[string]func(t *testing.T, input, expect json.RawMessage){
	"durations.json":     vectorDuration,
	"rates.json":         vectorRate,
	"cost-headers.json":  vectorCostHeader,
	"paths.json":         vectorCanonicalPath,
	"routes.json":        vectorRoute,
	"client-ip.json":     vectorClientIP,
	"keys.json":          vectorKey,
	"headers.json":       vectorResponseHeaders,
	"refusals.json":      vectorRefusal,
	"config-errors.json": vectorConfigError,
	"sources.json":       vectorSource,
	"outcomes.json":      vectorOutcome,
	"substitution.json":  vectorSubstitute,
	"override-keys.json": vectorOverrideKey,
	"algorithms.json":    vectorAlgorithm,
}

// vectorFunctions: each file's function, as the file names it.
var vectorFunctions = map[string]string{
	"durations.json": "duration", "rates.json": "rate", "cost-headers.json": "cost_header",
	"paths.json": "canonical_path", "routes.json": "route", "client-ip.json": "client_ip", "keys.json": "key",
	"headers.json": "response_headers", "refusals.json": "refusal", "config-errors.json": "config_error",
	"sources.json": "source", "outcomes.json": "outcome", "substitution.json": "substitute",
	"override-keys.json": "override_key", "algorithms.json": "algorithm",
}

func vectorsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "conformance", "vectors")
}

// pendingVectors are the vectors conformance/pending.json lists for go,
// per file: not passed yet, reported as PENDING instead of run.
func pendingVectors(t *testing.T) map[string][]string {
	data, err := os.ReadFile(filepath.Join(vectorsDir(), "..", "pending.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors map[string]map[string][]string `json:"vectors"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("conformance/pending.json: %v", err)
	}
	return doc.Vectors["go"]
}

// whollyPending: a file of a function not implemented yet, every vector of
// which conformance/pending.json lists for go.
func whollyPending(data []byte, pending []string) bool {
	var file struct {
		Vectors []struct {
			Name string `json:"name"`
		} `json:"vectors"`
	}
	if json.Unmarshal(data, &file) != nil {
		return false
	}
	for _, v := range file.Vectors {
		if !slices.Contains(pending, v.Name) {
			return false
		}
	}
	return true
}

func TestVectors(t *testing.T) {
	pending := pendingVectors(t)
	found, err := filepath.Glob(filepath.Join(vectorsDir(), "*.json"))
	if err != nil || len(found) == 0 {
		t.Fatalf("no vectors in %s (%v)", vectorsDir(), err)
	}
	seen := map[string]bool{}
	for _, path := range found {
		name := filepath.Base(path)
		seen[name] = true
		run, ok := vectorFiles[name]
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if !whollyPending(data, pending[name]) {
				t.Errorf("%s: a vector file this runner does not run", name)
			}
			continue
		}
		var file struct {
			Rule     string `json:"rule"`
			Function string `json:"function"`
			Vectors  []struct {
				Name   string          `json:"name"`
				Input  json.RawMessage `json:"input"`
				Expect json.RawMessage `json:"expect"`
			} `json:"vectors"`
		}
		if err := json.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if file.Function != vectorFunctions[name] {
			t.Errorf("%s: function %q, which this runner does not know there", name, file.Function)
			continue
		}
		t.Run(name, func(t *testing.T) {
			names := map[string]bool{}
			for _, v := range file.Vectors {
				if names[v.Name] {
					t.Errorf("%s: two vectors named %s", name, v.Name)
				}
				names[v.Name] = true
				if slices.Contains(pending[name], v.Name) {
					t.Run(v.Name, func(t *testing.T) { t.Skip("PENDING: conformance/pending.json") })
					continue
				}
				t.Run(v.Name, func(t *testing.T) { run(t, v.Input, v.Expect) })
			}
		})
	}
	for name := range vectorFiles {
		if !seen[name] {
			t.Errorf("%s: listed by this runner, missing from %s", name, vectorsDir())
		}
	}
}

// decode reads JSON with numbers as json.Number.
func decode(t *testing.T, raw json.RawMessage, into any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// asRead is a JSON value as the configuration reader reads a document:
// the JSON text through the YAML parser (JSON is YAML), as File and Bytes
// do.
func asRead(t *testing.T, v any) any {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return doc
}

// vectorBytes is a vector's bytes: a string's UTF-8, or {"hex": "..."}.
func vectorBytes(t *testing.T, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if h, ok := x["hex"].(string); ok && len(x) == 1 {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("not bytes: %#v", v)
	return ""
}

// same compares got, as JSON, with the expectation exactly (every member,
// no other); numbers by value.
func same(t *testing.T, got any, expect json.RawMessage) {
	t.Helper()
	text, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, e any
	decode(t, text, &g)
	decode(t, expect, &e)
	if !reflect.DeepEqual(normalNumbers(g), normalNumbers(e)) {
		t.Errorf("got %s, expected %s", text, expect)
	}
}

// normalNumbers writes every number in one spelling (60.0 is 60).
func normalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, ok := wholeNumber(x); ok {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = normalNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normalNumbers(x[k])
		}
	}
	return v
}

// config reads a document through the configuration reader, failing the
// test on an error.
func configOf(t *testing.T, doc map[string]any) *config {
	t.Helper()
	c, err := parseConfig(asRead(t, doc), vectorResolvers)
	if err != nil {
		t.Fatalf("the vector's configuration is refused: %v", err)
	}
	return c
}

// vectorResolvers are registered under the conformance test resolvers'
// names (conformance/README.md), so that a vector naming one is read; the
// vectors never call them.
var vectorResolvers = Resolvers{
	Cost:  map[string]func(*http.Request) (int64, error){"conformance-cost": nil},
	Limit: map[string]func(*http.Request) (Limit, bool){"conformance-limit": nil},
	Mode:  map[string]func(*http.Request) Mode{"conformance-mode": nil},
}

// header builds a request's header from [[name, value], ...], one line
// each, values bytes.
func header(t *testing.T, pairs []any) http.Header {
	h := http.Header{}
	for _, p := range pairs {
		pair := p.([]any)
		h.Add(pair[0].(string), vectorBytes(t, pair[1]))
	}
	return h
}

// decision is a module reply [allowed, count, retry_after, limit,
// remaining, reset_after] as the Go client reads it.
func decision(t *testing.T, v any) librl.Decision {
	t.Helper()
	r := v.([]any)
	n := func(i int) int64 {
		x, ok := wholeNumber(r[i])
		if !ok {
			t.Fatalf("reply %v", r)
		}
		return x
	}
	millis := func(x int64) time.Duration {
		if x < 0 {
			return librl.Never
		}
		return time.Duration(x) * time.Millisecond
	}
	return librl.Decision{Allowed: n(0) == 1, Count: n(1), RetryAfter: millis(n(2)), Limit: n(3), Remaining: n(4),
		ResetAfter: millis(n(5))}
}

func vectorDuration(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Value any    `json:"value"`
		Field string `json:"field"`
	}
	decode(t, input, &in)
	object := map[string]string{"timeout": "config", "window": "policy"}[in.Field]
	if object == "" {
		t.Fatalf("field %q", in.Field)
	}
	ms, err := walkField(in.Field, asRead(t, in.Value), object, in.Field)
	if err != nil {
		same(t, map[string]bool{"error": true}, expect)
		return
	}
	same(t, map[string]any{"ms": ms}, expect)
}

func vectorRate(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Value any `json:"value"`
	}
	decode(t, input, &in)
	v, err := walkField("rate", asRead(t, in.Value), "policy", "rate")
	if err != nil {
		same(t, map[string]bool{"error": true}, expect)
		return
	}
	r := v.(rateValue)
	same(t, map[string]any{"limit": r.limit, "window_ms": r.ms}, expect)
}

func vectorCostHeader(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Lines []any `json:"lines"`
	}
	decode(t, input, &in)
	h := http.Header{}
	for _, l := range in.Lines {
		h.Add("X-Cost", vectorBytes(t, l))
	}
	// As costs reads it: the header's lines, by name.
	if n, ok := headerCost(h.Values("x-cost")); ok {
		same(t, map[string]any{"cost": n}, expect)
	} else {
		same(t, map[string]any{"error": "bad-cost"}, expect)
	}
}

func vectorCanonicalPath(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Path any `json:"path"`
	}
	decode(t, input, &in)
	var want any
	decode(t, expect, &want)
	if got, w := canonicalPath(vectorBytes(t, in.Path)), vectorBytes(t, want); got != w {
		t.Errorf("got %q, expected %q", got, w)
	}
}

func vectorRoute(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Routes   any      `json:"routes"`
		Policies []string `json:"policies"`
		Method   string   `json:"method"`
		Path     any      `json:"path"`
	}
	decode(t, input, &in)
	var policies []any
	for _, n := range in.Policies {
		policies = append(policies, map[string]any{"name": n, "algorithm": "fixed", "limit": 1, "window": "1s"})
	}
	doc := map[string]any{"policies": policies}
	if in.Routes != nil {
		doc["routes"] = in.Routes
	}
	c := configOf(t, doc)
	ps, i, ok := c.selectPolicies(in.Method, vectorBytes(t, in.Path))
	if !ok {
		same(t, nil, expect)
		return
	}
	names := []string{}
	for _, p := range ps {
		names = append(names, p.name)
	}
	var route any
	if i >= 0 {
		route = i
	}
	same(t, map[string]any{"route": route, "policies": names}, expect)
}

func vectorClientIP(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Peer    *string `json:"peer"`
		Trusted []any   `json:"trusted_proxies"`
		Headers []any   `json:"headers"`
	}
	decode(t, input, &in)
	c := configOf(t, map[string]any{"trusted_proxies": in.Trusted,
		"policies": []any{map[string]any{"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}}})
	peer := ""
	if in.Peer != nil {
		peer = *in.Peer
	}
	if a, ok := clientIP(peer, c.trusted, header(t, in.Headers)); ok {
		same(t, a.String(), expect)
	} else {
		same(t, nil, expect)
	}
}

func vectorKey(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Config  map[string]any `json:"config"`
		Policy  map[string]any `json:"policy"`
		Request struct {
			Peer       *string        `json:"peer"`
			Headers    []any          `json:"headers"`
			User       any            `json:"user"`
			Query      string         `json:"query"`
			Attributes map[string]any `json:"attributes"`
		} `json:"request"`
	}
	decode(t, input, &in)
	doc := map[string]any{}
	for k, v := range in.Config {
		doc[k] = v
	}
	doc["policies"] = []any{in.Policy}
	c := configOf(t, doc)
	id := &identity{c: c, header: header(t, in.Request.Headers), rawQuery: in.Request.Query,
		ctx: attributes(t, in.Request.Attributes)}
	if in.Request.Peer != nil {
		id.peer = *in.Request.Peer
	}
	if in.Request.User != nil {
		id.user = vectorBytes(t, in.Request.User)
	}
	ch, exempt := checkFor(c, c.policies[0], id)
	var okey any
	if ch.okey != "" {
		okey = ch.okey
	}
	same(t, map[string]any{"subject": ch.s.tag, "key": ch.key, "override_key": okey, "exempt": exempt}, expect)
}

func vectorResponseHeaders(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Headers     string `json:"headers"`
		Mode        string `json:"mode"`
		LegacyReset string `json:"legacy_reset"`
		NowMS       int64  `json:"now_ms"`
		Policies    []any  `json:"policies"`
		Replies     []any  `json:"replies"`
		Denied      bool   `json:"denied"`
	}
	decode(t, input, &in)
	doc := map[string]any{"headers": in.Headers, "mode": in.Mode, "policies": in.Policies}
	if in.LegacyReset != "" {
		doc["legacy_reset"] = in.LegacyReset
	}
	c := configOf(t, doc)
	cs := make([]checked, len(c.policies))
	for i, p := range c.policies {
		cs[i] = checked{p: p, d: decision(t, in.Replies[i])}
	}
	h := http.Header{}
	setHeaders(c, h, cs, in.Denied, func() time.Time { return time.UnixMilli(in.NowMS) })
	var want struct {
		MostRestrictive int               `json:"most_restrictive"`
		Headers         map[string]string `json:"headers"`
		Absent          []string          `json:"absent"`
	}
	decode(t, expect, &want)
	if got := mostRestrictive(cs, in.Denied); got != want.MostRestrictive {
		t.Errorf("most restrictive %d, expected %d", got, want.MostRestrictive)
	}
	wanted := map[string]bool{}
	for name, value := range want.Headers {
		wanted[http.CanonicalHeaderKey(name)] = true
		if got := h.Values(name); len(got) != 1 || got[0] != value {
			t.Errorf("%s: %q, expected %q", name, got, value)
		}
	}
	for _, name := range want.Absent {
		if got, ok := h[http.CanonicalHeaderKey(name)]; ok {
			t.Errorf("%s: %q, expected none", name, got)
		}
	}
	var extra []string
	for name := range h {
		if !wanted[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("headers the vector does not expect: %v", extra)
	}
}

func vectorRefusal(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Deny         map[string]any `json:"deny"`
		RouteDeny    map[string]any `json:"route_deny"`
		FailDeny     map[string]any `json:"fail_deny"`
		Resolver     string         `json:"resolver"`
		Kind         string         `json:"kind"`
		Policy       map[string]any `json:"policy"`
		Reply        any            `json:"reply"`
		Cost         json.Number    `json:"cost"`
		Header       string         `json:"header"`
		MaxBodyBytes any            `json:"max_body_bytes"`
	}
	decode(t, input, &in)
	policy := in.Policy
	if policy == nil {
		policy = map[string]any{"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}
	}
	doc := map[string]any{"policies": []any{policy}}
	if in.Deny != nil {
		doc["deny"] = in.Deny
	}
	if in.FailDeny != nil {
		doc["fail_deny"] = in.FailDeny
	}
	if in.RouteDeny != nil {
		doc["routes"] = []any{map[string]any{"path": "/", "policies": []any{policy["name"]}, "deny": in.RouteDeny}}
	}
	if in.MaxBodyBytes != nil {
		doc["max_body_bytes"] = in.MaxBodyBytes
	}
	rs := vectorResolvers
	if in.Resolver != "" {
		rs.Cost = map[string]func(*http.Request) (int64, error){in.Resolver: nil}
	}
	c, err := parseConfig(asRead(t, doc), rs)
	if err != nil {
		t.Fatalf("the vector's configuration is refused: %v", err)
	}
	p := c.policies[0]
	deny := c.deny
	if len(c.routes) > 0 {
		deny = c.routes[0].deny
	}
	var r reply
	text := false // the refusal's body is text, whatever its Content-Type
	switch in.Kind {
	case "denied":
		text = deny.body == "text"
		cost, _ := wholeNumber(in.Cost)
		r = denied(deny, checked{p: p, d: decision(t, in.Reply)}, cost)
	case "bad-cost":
		switch {
		case p.cost == costCode && p.costName == in.Resolver:
			r = badResolvedCost(p.costName, p.name)
		case p.cost == costHeader && p.costHeader == in.Header:
			r = badCost(p.costHeader, p.name)
		default:
			t.Fatalf("the vector's header %q or resolver %q is not its policy's cost", in.Header, in.Resolver)
		}
	case "too-large":
		r = tooLarge(c.maxBody)
	case "unavailable":
		text = c.failDeny.body == "text"
		r = unavailable(c.failDeny)
	default:
		t.Fatalf("kind %q", in.Kind)
	}
	got := map[string]any{"status": r.status, "content_type": r.contentType}
	if len(r.headers) > 0 {
		hs := map[string]string{}
		for k := range r.headers {
			hs[k] = r.headers.Get(k)
		}
		got["headers"] = hs
	}
	if !text {
		var body any
		decode(t, r.body, &body)
		got["body"] = body
	} else {
		got["body_text"] = string(r.body)
	}
	same(t, got, expect)
}

func vectorConfigError(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Config any `json:"config"`
	}
	decode(t, input, &in)
	_, err := parseConfig(asRead(t, in.Config), vectorResolvers)
	got := fmt.Sprint(err)
	if err == nil {
		got = "no error"
	}
	same(t, got, expect)
}

// attributes is a context with a vector request's attributes, as an
// application's middleware leaves them (WithAttribute); Go's are strings.
func attributes(t *testing.T, attrs map[string]any) context.Context {
	ctx := context.Background()
	for name, v := range attrs {
		ctx = WithAttribute(ctx, name, vectorBytes(t, v))
	}
	return ctx
}

func vectorSource(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Source  string `json:"source"`
		Request struct {
			Headers    []any          `json:"headers"`
			Query      *string        `json:"query"`
			User       any            `json:"user"`
			Attributes map[string]any `json:"attributes"`
		} `json:"request"`
	}
	decode(t, input, &in)
	query, user := "", ""
	if in.Request.Query != nil {
		query = *in.Request.Query
	}
	if in.Request.User != nil {
		user = vectorBytes(t, in.Request.User)
	}
	v, ok := sourceValue(attributes(t, in.Request.Attributes), in.Source, header(t, in.Request.Headers), query, user)
	var want any
	decode(t, expect, &want)
	switch {
	case want == nil && ok:
		t.Errorf("%q, expected none", v)
	case want != nil && (!ok || v != vectorBytes(t, want)):
		t.Errorf("%q (%v), expected %s", v, ok, expect)
	}
}

func vectorOutcome(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Mode     string `json:"mode"`
		Policies []any  `json:"policies"`
		Replies  []any  `json:"replies"`
	}
	decode(t, input, &in)
	c := configOf(t, map[string]any{"mode": in.Mode, "policies": in.Policies})
	cs := make([]checked, len(c.policies))
	for i, p := range c.policies {
		cs[i] = checked{p: p, d: decision(t, in.Replies[i])}
	}
	same(t, map[string]any{"outcome": string(outcomeOf(c, cs))}, expect)
}

func vectorSubstitute(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Text string            `json:"text"`
		Env  map[string]string `json:"env"`
	}
	decode(t, input, &in)
	out, err := substitute([]byte(in.Text), func(k string) (string, bool) { v, ok := in.Env[k]; return v, ok })
	var want struct {
		Text  *string `json:"text"`
		Error any     `json:"error"`
	}
	decode(t, expect, &want)
	switch e := want.Error.(type) {
	case nil:
		if err != nil || want.Text == nil || string(out) != *want.Text {
			t.Errorf("%q, %v; expected %q", out, err, *want.Text)
		}
	case string:
		if err == nil || err.Error() != e {
			t.Errorf("error %v, expected %q", err, e)
		}
	default:
		if err == nil {
			t.Errorf("%q, expected an error", out)
		}
	}
}

func vectorOverrideKey(t *testing.T, input, expect json.RawMessage) {
	var in struct {
		Config map[string]any `json:"config"`
		Policy string         `json:"policy"`
		Value  any            `json:"value"`
	}
	decode(t, input, &in)
	c := configOf(t, in.Config)
	value := ""
	if in.Value != nil {
		value = vectorBytes(t, in.Value)
	}
	key, okey, err := keysOf(c, in.Policy, value)
	var want struct {
		Key         string `json:"key"`
		OverrideKey string `json:"override_key"`
		Error       any    `json:"error"`
	}
	decode(t, expect, &want)
	if want.Error != nil {
		if err == nil {
			t.Errorf("%q, %q; expected an error", key, okey)
		}
		return
	}
	if err != nil || key != want.Key || okey != want.OverrideKey {
		t.Errorf("%q, %q, %v; expected %q, %q", key, okey, err, want.Key, want.OverrideKey)
	}
}
