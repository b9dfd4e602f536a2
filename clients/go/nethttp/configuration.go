package nethttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	librl "github.com/librl/librl/clients/go"
)

// Configuration (docs/http.md, One configuration and Start-up
// validation): the document from a file, bytes or a Config struct, read
// by the schema's walker (walker.go), then the rules that span fields,
// which the schema's description lists, here. Every mistake is a
// *ConfigError, `librl: configuration: <path>: <problem>`.

// Source is where the configuration comes from (docs/http.md, One
// configuration): File, Bytes, or a Config struct.
type Source interface {
	document() (any, error)
}

// File reads a YAML or JSON configuration file (JSON is YAML), its
// ${VAR} and ${VAR:-default} replaced from the environment first.
func File(path string) Source { return fileSource(path) }

// Bytes is a configuration document, YAML or JSON, its ${VAR} and
// ${VAR:-default} replaced from the environment first.
func Bytes(doc []byte) Source { return bytesSource(doc) }

type fileSource string

func (f fileSource) document() (any, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, bad("(file)", "cannot read %s: %v", string(f), err)
	}
	if data, err = fromEnvironment(data); err != nil {
		return nil, err
	}
	doc, err := parseYAML(data)
	if err != nil {
		return nil, bad("(file)", "%s is not YAML or JSON: %v", string(f), err)
	}
	return doc, nil
}

type bytesSource []byte

func (b bytesSource) document() (any, error) {
	data, err := fromEnvironment(b)
	if err != nil {
		return nil, err
	}
	doc, err := parseYAML(data)
	if err != nil {
		return nil, bad("(document)", "not YAML or JSON: %v", err)
	}
	return doc, nil
}

func parseYAML(data []byte) (any, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || root.Kind == 0 {
		return nil, err
	}
	var doc any
	if err := root.Decode(&doc); err != nil {
		return nil, err
	}
	keepJSONOrder(&root, doc)
	return doc, nil
}

// keepJSONOrder replaces each refusal's json object or list in doc (deny,
// fail_deny, a route's deny) with its JSON text in the order the file
// writes it: a json body is sent as given, and a Go map has no order.
func keepJSONOrder(root *yaml.Node, doc any) {
	top, ok := doc.(map[string]any)
	if !ok || len(root.Content) != 1 {
		return
	}
	refusal := func(node *yaml.Node, value any) {
		m, ok := value.(map[string]any)
		if n := mappingValue(node, "json"); ok && n != nil && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) {
			if text, err := nodeJSON(n); err == nil {
				m["json"] = json.RawMessage(text)
			}
		}
	}
	body := root.Content[0]
	for _, name := range []string{"deny", "fail_deny"} {
		refusal(mappingValue(body, name), top[name])
	}
	routes, _ := top["routes"].([]any)
	if n := mappingValue(body, "routes"); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == len(routes) {
		for i, r := range n.Content {
			if m, ok := routes[i].(map[string]any); ok {
				refusal(mappingValue(r, "deny"), m["deny"])
			}
		}
	}
}

// mappingValue is a YAML mapping's value under a key, nil when none.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// nodeJSON is a YAML value as JSON text, mappings in the order written.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return nodeJSON(n.Alias)
	case yaml.MappingNode, yaml.SequenceNode:
		open, end, step := byte('['), byte(']'), 1
		if n.Kind == yaml.MappingNode {
			open, end, step = '{', '}', 2
		}
		text := []byte{open}
		for i := 0; i+step-1 < len(n.Content); i += step {
			if i > 0 {
				text = append(text, ',')
			}
			if step == 2 {
				var k any
				if err := n.Content[i].Decode(&k); err != nil {
					return nil, err
				}
				name, _ := jsonText(fmt.Sprint(k))
				text = append(append(text, name...), ':')
			}
			v, err := nodeJSON(n.Content[i+step-1])
			if err != nil {
				return nil, err
			}
			text = append(text, v...)
		}
		return append(text, end), nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return jsonText(jsonValue(v))
}

// jsonText is v as JSON, without encoding/json's escaping of <, > and &
// (a body is sent as given, not for embedding in HTML).
func jsonText(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Config is the configuration as Go data, field for field the document of
// docs/http.md (durations and rates as the document writes them: "250ms",
// "100/minute"). A zero field is an absent one and takes its default;
// pointers mark the fields whose zero value is meaningful.
type Config struct {
	Prefix         *string  // default "rl:"
	Mode           string   // enforce | shadow
	Fail           string   // open | closed | local
	LocalMaxKeys   int      // default 100000: the most keys fail: local holds
	Timeout        string   // default "250ms"
	Headers        string   // both | ietf | legacy | draft6 | none
	LegacyReset    string   // seconds | unix: what X-RateLimit-Reset holds
	TrustedProxies []string // addresses or CIDR networks
	Exempt         []string // addresses or CIDR networks no policy limits
	ExemptLoopback *bool    // default false; true adds 127.0.0.0/8 and ::1 to Exempt
	IPv6Prefix     int      // default 56: an IPv6 client's ip subject is its network
	APIKeyHeader   string   // default X-Api-Key
	// Identities names subjects made of sources tried in order
	// (header:<Name>, cookie:<Name>, query:<Name>, authorization:<Scheme>,
	// user, ip).
	Identities   map[string][]string
	MaxBodyBytes int64 // default 8 MiB
	Deny         *Deny // a policy's refusal
	FailDeny     *Deny // fail: closed's refusal (default 503, problem)
	Policies     []Policy
	Routes       []Route // nil: every policy applies to every request
}

// Deny is a refusal's status, body and extra headers (docs/http.md,
// Refusals). A zero field is an absent one: the default at the top level,
// the top-level deny's field in a route's.
type Deny struct {
	Status      int               // default 429 (503 for FailDeny)
	Body        string            // problem | text | json
	Message     string            // the text body
	ContentType string            // the text body's Content-Type
	JSON        any               // the json body as encoding/json writes it (a json.RawMessage: that text)
	Headers     map[string]string // extra headers on this refusal
}

// Policy is one named limit.
type Policy struct {
	Name        string
	Algorithm   string // fixed | sliding | approx | token | concurrency
	Limit       int64  // token: the rate per Window; concurrency: the slots
	Window      string
	Lease       string // concurrency only: the longest a request holds its slots
	Rate        string // instead of Limit and Window: "100/minute"
	Aligned     bool   // fixed only
	Burst       int64  // token only
	Key         string // ip | global | an identity's name | header:, cookie:, query: or authorization:<Name>
	Cost        string // "" (1) | "<n>" | body-bytes | header:<Name>
	Count       string // all | failed | succeeded
	Overridable bool
	Mode        string // "" (the top-level mode) | enforce | shadow
	Block       string // a denial locks the subject out this long ("1h")
	Queue       string // token only: a request waits for its turn up to this long ("2s")
}

// Route attaches policies to a path prefix (and methods).
type Route struct {
	Path     string
	Methods  []string
	Policies []string // empty: the route is exempt
	Deny     *Deny    // this route's denials: the fields it gives replace Config.Deny's
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
	put("local_max_keys", c.LocalMaxKeys, c.LocalMaxKeys != 0)
	put("timeout", c.Timeout, c.Timeout != "")
	put("headers", c.Headers, c.Headers != "")
	put("legacy_reset", c.LegacyReset, c.LegacyReset != "")
	strings := func(k string, xs []string) {
		if xs != nil {
			list := make([]any, len(xs))
			for i, x := range xs {
				list[i] = x
			}
			doc[k] = list
		}
	}
	strings("trusted_proxies", c.TrustedProxies)
	strings("exempt", c.Exempt)
	if c.ExemptLoopback != nil {
		doc["exempt_loopback"] = *c.ExemptLoopback
	}
	put("ipv6_prefix", c.IPv6Prefix, c.IPv6Prefix != 0)
	put("api_key_header", c.APIKeyHeader, c.APIKeyHeader != "")
	if c.Identities != nil {
		ids := map[string]any{}
		for name, sources := range c.Identities {
			list := make([]any, len(sources))
			for i, x := range sources {
				list[i] = x
			}
			ids[name] = list
		}
		doc["identities"] = ids
	}
	put("max_body_bytes", c.MaxBodyBytes, c.MaxBodyBytes != 0)
	if c.Deny != nil {
		doc["deny"] = c.Deny.document()
	}
	if c.FailDeny != nil {
		doc["fail_deny"] = c.FailDeny.document()
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
			if p.Lease != "" {
				m["lease"] = p.Lease
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
			if p.Mode != "" {
				m["mode"] = p.Mode
			}
			if p.Block != "" {
				m["block"] = p.Block
			}
			if p.Queue != "" {
				m["queue"] = p.Queue
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
			if r.Deny != nil {
				m["deny"] = r.Deny.document()
			}
			list[i] = m
		}
		doc["routes"] = list
	}
	return doc, nil
}

func (d *Deny) document() map[string]any {
	m := map[string]any{}
	set := func(k string, v any, present bool) {
		if present {
			m[k] = v
		}
	}
	set("status", d.Status, d.Status != 0)
	set("body", d.Body, d.Body != "")
	set("message", d.Message, d.Message != "")
	set("content_type", d.ContentType, d.ContentType != "")
	set("json", d.JSON, d.JSON != nil)
	if d.Headers != nil {
		h := map[string]any{}
		for k, v := range d.Headers {
			h[k] = v
		}
		m["headers"] = h
	}
	return m
}

// ConfigError is a configuration refused at start-up; Field is the path
// of the field at fault (policies[0].burst), Message what is wrong with it
// (conformance/README.md, Configuration errors).
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
	failLocal      bool // decided in the process while Redis cannot answer
	localMaxKeys   int
	timeout        time.Duration
	ietf, legacy   bool
	draft6         bool
	unixReset      bool // legacy_reset: unix
	trusted        []netip.Prefix
	exempt         []netip.Prefix // exempt_loopback's networks included
	ipv6Prefix     int
	shadowPolicies bool // a policy of its own mode: shadow (under mode: enforce)
	queues         bool // a policy has queue: a request may wait for its turn
	apiKeyHeader   string
	modeResolver   func(*http.Request) Mode  // mode: code:<name>
	identities     map[string]*namedIdentity // the file's, built-ins redefined included
	maxBody        int64
	deny           *refusal // a policy's refusal (a route's deny may replace it)
	failDeny       *refusal // fail: closed's
	policies       []*policy
	byName         map[string]*policy
	routes         []route // empty: every policy applies to every request
}

type costKind uint8

const (
	costUnits costKind = iota
	costBodyBytes
	costHeader
	costCode // a cost resolver's
)

type policy struct {
	name      string
	algorithm string // fixed sliding approx token concurrency
	limit     int64
	window    time.Duration // 0 for concurrency
	lease     time.Duration // concurrency only
	aligned   bool
	burst     int64
	// keyKind: ip api-key user global (the built-ins), identity (a named
	// one), or an inline source's kind: header cookie query authorization.
	keyKind   string
	keyHeader string         // header:<Name>'s name as configured
	keySource string         // an inline cookie:, query: or authorization: source as written
	ident     *namedIdentity // keyKind identity
	// keyTag is an inline source's subject start: "header:<name in lower
	// case>:", "cookie:<Name>:", "query:<Name>:", "authorization:<scheme
	// in lower case>:".
	keyTag     string
	cost       costKind
	costUnits  int64
	costHeader string // header:<Name>'s name as configured
	// A cost: code:<name> policy's resolver and name.
	costResolver func(*http.Request) (int64, error)
	costName     string
	// A limit: code:<name> policy's resolver and name: its limit, window
	// and burst come from the request (resolvedLimits).
	limitResolver func(*http.Request) (Limit, bool)
	limitName     string
	count         string
	overridable   bool
	// shadow: the policy's own mode is shadow (under mode: enforce): its
	// clauses go in RL.ALL calls of their own and it never refuses.
	shadow bool
	// block: a denial locks the subject out that long; queue: a request
	// over the rate waits for its turn up to that long (token only).
	block, queue time.Duration
	// opts are the clause options fixed by the configuration (ALIGNED,
	// APPROX, BURST, BLOCK, RESERVE; COST for a fixed cost), built once
	// for every request; refundOpts those of its refund (setOptions).
	opts, refundOpts []librl.Option
	// prepared is the clause with opts, its words rendered once; ready
	// says it is (a limit: code: policy's is prepared when its resolver
	// gives the limit)
	prepared librl.Clause
	ready    bool
}

// parseConfig reads a document: the walker first (every field, with the
// schema), then the rules that span fields.
func parseConfig(doc any, rs Resolvers) (*config, error) {
	top, err := walkDocument(doc)
	if err != nil {
		return nil, err
	}
	c := &config{
		prefix:       top["prefix"].(string),
		shadow:       top["mode"] == "shadow",
		failClosed:   top["fail"] == "closed",
		failLocal:    top["fail"] == "local",
		localMaxKeys: int(top["local_max_keys"].(int64)),
		timeout:      time.Duration(top["timeout"].(int64)) * time.Millisecond,
		ietf:         top["headers"] == "both" || top["headers"] == "ietf",
		legacy:       top["headers"] == "both" || top["headers"] == "legacy",
		draft6:       top["headers"] == "draft6",
		unixReset:    top["legacy_reset"] == "unix",
		ipv6Prefix:   int(top["ipv6_prefix"].(int64)),
		apiKeyHeader: top["api_key_header"].(string),
		maxBody:      top["max_body_bytes"].(int64),
		byName:       map[string]*policy{},
	}
	if c.deny, err = refusalOf("deny", top["deny"].(walked), nil); err != nil {
		return nil, err
	}
	if c.failDeny, err = refusalOf("fail_deny", top["fail_deny"].(walked), nil); err != nil {
		return nil, err
	}
	// trusted-proxies-are-networks
	for i, v := range top["trusted_proxies"].([]any) {
		net, err := parseNetwork(v.(string))
		if err != nil {
			return nil, bad(fmt.Sprintf("trusted_proxies[%d]", i), "must be an IP address or a CIDR network")
		}
		c.trusted = append(c.trusted, net)
	}
	// exempt-are-networks
	for i, v := range top["exempt"].([]any) {
		net, err := parseNetwork(v.(string))
		if err != nil {
			return nil, bad(fmt.Sprintf("exempt[%d]", i), "must be an IP address or a CIDR network")
		}
		c.exempt = append(c.exempt, net)
	}
	if top["exempt_loopback"].(bool) {
		c.exempt = append(c.exempt, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
	}
	if c.identities, err = identitiesOf(top["identities"]); err != nil {
		return nil, err
	}
	// resolvers-registered
	if mode := top["mode"].(string); strings.HasPrefix(mode, "code:") {
		if c.modeResolver, _, err = resolverOf("mode", "mode", mode, rs.Mode); err != nil {
			return nil, err
		}
	}
	for i, v := range top["policies"].([]any) {
		p, err := policyOf(fmt.Sprintf("policies[%d]", i), v.(walked), c.identities, rs)
		if err != nil {
			return nil, err
		}
		// policy-names-unique
		if _, dup := c.byName[p.name]; dup {
			return nil, bad(fmt.Sprintf("policies[%d].name", i), "\"%s\" is used by an earlier policy", p.name)
		}
		c.byName[p.name] = p
		c.policies = append(c.policies, p)
		// Under mode: shadow every policy is checked as enforce would
		// check it; a policy's own shadow applies under mode: enforce.
		p.shadow = p.shadow && !c.shadow
		c.shadowPolicies = c.shadowPolicies || p.shadow
		c.queues = c.queues || p.queue > 0
	}
	for i, v := range top["routes"].([]any) {
		r, err := c.routeOf(fmt.Sprintf("routes[%d]", i), v.(walked))
		if err != nil {
			return nil, err
		}
		c.routes = append(c.routes, r)
	}
	return c, nil
}

// parseNetwork reads an address or a CIDR network, without a zone index
// (a configuration names networks, not interfaces); an IPv4-mapped IPv6
// network is the IPv4 network.
func parseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "%") {
		return netip.Prefix{}, errors.New("a zone index")
	}
	if strings.Contains(s, "/") {
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
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// policyOf is a walked policy, with the rules that span its fields
// (concurrency-has-lease, rate-or-limit-and-window, aligned-only-on-fixed,
// burst-only-on-token).
func policyOf(path string, m walked, identities map[string]*namedIdentity, rs Resolvers) (*policy, error) {
	p := &policy{name: m["name"].(string), algorithm: m["algorithm"].(string), count: m["count"].(string),
		aligned: m["aligned"].(bool), overridable: m["overridable"].(bool), shadow: m["mode"] == "shadow"}
	limit, hasLimit := m["limit"]
	window, hasWindow := m["window"]
	lease, hasLease := m["lease"]
	code, hasCode := limit.(string)
	if hasCode {
		if err := codeLimitAlone(path, code, p, m); err != nil {
			return nil, err
		}
	} else if p.algorithm == "concurrency" {
		if err := concurrencyFields(path, m); err != nil {
			return nil, err
		}
		p.limit, p.lease = limit.(int64), time.Duration(lease.(int64))*time.Millisecond
	} else if hasLease {
		return nil, bad(path+".lease", "lease is for concurrency policies, not %s", p.algorithm)
	} else if rate, ok := m["rate"].(rateValue); ok {
		if hasLimit || hasWindow {
			return nil, bad(path+".rate", "give rate, or limit and window, not both")
		}
		p.limit, p.window = rate.limit, time.Duration(rate.ms)*time.Millisecond
	} else {
		if !hasLimit {
			return nil, bad(path+".limit", "missing (give limit and window, or rate)")
		}
		if !hasWindow {
			return nil, bad(path+".window", "missing (give limit and window, or rate)")
		}
		p.limit, p.window = limit.(int64), time.Duration(window.(int64))*time.Millisecond
	}
	if p.aligned && p.algorithm != "fixed" {
		return nil, bad(path+".aligned", "aligned is for fixed policies, not %s", p.algorithm)
	}
	if burst, ok := m["burst"]; ok {
		if p.algorithm != "token" {
			return nil, bad(path+".burst", "burst is for token policies, not %s", p.algorithm)
		}
		p.burst = burst.(int64)
	}
	// queue-only-on-token
	if queue, ok := m["queue"]; ok {
		if p.algorithm != "token" {
			return nil, bad(path+".queue", "queue is for token policies, not %s", p.algorithm)
		}
		p.queue = time.Duration(queue.(int64)) * time.Millisecond
	}
	if block, ok := m["block"]; ok {
		p.block = time.Duration(block.(int64)) * time.Millisecond // concurrencyFields refused it on concurrency
	}
	if err := keyOf(path, p, m["key"].(string), identities); err != nil {
		return nil, err
	}
	// resolvers-registered
	var err error
	if hasCode {
		if p.limitResolver, p.limitName, err = resolverOf(path+".limit", "limit", code, rs.Limit); err != nil {
			return nil, err
		}
	}
	switch cost := m["cost"].(type) {
	case int64:
		p.cost, p.costUnits = costUnits, cost
	case string:
		if name, ok := strings.CutPrefix(cost, "header:"); ok {
			p.cost, p.costHeader = costHeader, name
		} else if strings.HasPrefix(cost, "code:") {
			p.cost = costCode
			if p.costResolver, p.costName, err = resolverOf(path+".cost", "cost", cost, rs.Cost); err != nil {
				return nil, err
			}
		} else {
			p.cost = costBodyBytes
		}
	}
	setOptions(p)
	return p, nil
}

// keyOf reads a policy's key (keys-name-identities): a built-in, an
// identity of the file's (which wins over a built-in of its name), or one
// source inline. The walker has checked it against the schema's pattern.
func keyOf(path string, p *policy, key string, identities map[string]*namedIdentity) error {
	if n, ok := identities[key]; ok {
		p.keyKind, p.ident = "identity", n
		return nil
	}
	kind, name, inline := strings.Cut(key, ":")
	switch {
	case !inline && (key == "ip" || key == "global" || key == "api-key" || key == "user"):
		p.keyKind = key
	case !inline:
		return bad(path+".key", "no identity is named \"%s\"", key)
	case kind == "header":
		p.keyKind, p.keyHeader, p.keyTag = kind, name, "header:"+lowerASCII(name)+":"
	case kind == "authorization":
		p.keyKind, p.keySource, p.keyTag = kind, key, "authorization:"+lowerASCII(name)+":"
	default: // cookie and query names are case-sensitive: as written
		p.keyKind, p.keySource, p.keyTag = kind, key, key+":"
	}
	return nil
}

// identitiesOf reads identities (identity-names-not-reserved,
// ip-source-last), in name order: one message for one document.
func identitiesOf(v any) (map[string]*namedIdentity, error) {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]*namedIdentity, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if name == "ip" || name == "global" {
			return nil, bad("identities."+name, "ip and global are reserved")
		}
		n := &namedIdentity{tag: name + ":", hashed: name == "api-key"}
		for j, x := range m[name].([]any) {
			source := x.(string)
			if j > 0 && n.sources[j-1] == "ip" {
				return nil, bad(fmt.Sprintf("identities.%s[%d]", name, j), "a source after ip is never read")
			}
			n.hashed = n.hashed || strings.HasPrefix(source, "authorization:")
			n.sources = append(n.sources, source)
		}
		out[name] = n
	}
	return out, nil
}

// codeLimitAlone is code-limit-alone: a policy whose limit is code:<name>
// has no window, rate, burst or overridable (its resolver gives them),
// and is not a concurrency policy (whose limit is its slots).
func codeLimitAlone(path, code string, p *policy, m walked) error {
	if p.algorithm == "concurrency" {
		return bad(path+".limit", "a concurrency policy's limit is its slots, an integer, not %s", code)
	}
	for _, f := range []string{"window", "rate", "burst"} {
		if _, ok := m[f]; ok {
			return bad(path+"."+f, "a policy whose limit is %s has no %s", code, f)
		}
	}
	if p.overridable {
		return bad(path+".overridable", "a policy whose limit is %s has no overridable", code)
	}
	return nil
}

// setOptions builds the policy's clause options that no request changes:
// opts for a check (COST when fixed, ALIGNED, APPROX, BURST, BLOCK,
// RESERVE), refundOpts for its refund (neither COST nor RESERVE: REFUND
// gives back what was booked, queued or not).
func setOptions(p *policy) {
	var shape []librl.Option
	switch {
	case p.aligned:
		shape = append(shape, librl.Aligned())
	case p.algorithm == "approx":
		shape = append(shape, librl.Approx())
	case p.burst != 0:
		shape = append(shape, librl.Burst(p.burst))
	}
	if p.block > 0 {
		shape = append(shape, librl.Block(p.block))
	}
	p.refundOpts = shape[:len(shape):len(shape)]
	p.opts = append([]librl.Option(nil), shape...)
	if p.cost == costUnits {
		p.opts = append(p.opts, librl.Cost(p.costUnits))
	}
	if p.queue > 0 {
		p.opts = append(p.opts, librl.Reserve(p.queue))
	}
	var err error
	p.prepared, err = clauseOf(p, "", p.opts).Prepare()
	p.ready = err == nil
}

// concurrencyFields is concurrency-has-lease for a concurrency policy:
// limit and lease, no window, rate or block, and count all.
func concurrencyFields(path string, m walked) error {
	for _, f := range []string{"window", "rate", "block"} {
		if _, ok := m[f]; ok {
			return bad(path+"."+f, "a concurrency policy has no %s; give limit and lease", f)
		}
	}
	for _, f := range []string{"limit", "lease"} {
		if _, ok := m[f]; !ok {
			return bad(path+"."+f, "missing (a concurrency policy gives limit and lease)")
		}
	}
	if m["count"] != "all" {
		return bad(path+".count", "must be all on a concurrency policy (its slots are freed when the response is finished)")
	}
	return nil
}

// routeOf is a walked route, its policies named by the configuration
// (routes-name-defined-policies) and its path made canonical.
func (c *config) routeOf(path string, m walked) (route, error) {
	r := route{path: m["path"].(string), deny: c.deny}
	r.match = lowerASCII(canonicalPath(r.path))
	if d, ok := m["deny"]; ok {
		var err error
		if r.deny, err = refusalOf(path+".deny", d.(walked), c.deny); err != nil {
			return r, err
		}
	}
	if ms, ok := m["methods"]; ok {
		for _, x := range ms.([]any) {
			r.methods = append(r.methods, x.(string))
		}
	}
	for j, x := range m["policies"].([]any) {
		p, ok := c.byName[x.(string)]
		if !ok {
			return r, bad(fmt.Sprintf("%s.policies[%d]", path, j), "no policy is named \"%s\"", x.(string))
		}
		r.policies = append(r.policies, p)
	}
	return r, nil
}

// refusalOf reads a deny, fail_deny or route deny over base (the
// top-level deny, for a route's; nil for the top level's, whose defaults
// the walker gave), with deny-json-with-json-body and
// deny-headers-are-extra. What a refusal sends is built here, once.
func refusalOf(path string, m walked, base *refusal) (*refusal, error) {
	r := &refusal{}
	if base != nil {
		*r = *base
	}
	if v, ok := m["status"]; ok {
		r.status = int(v.(int64))
	}
	if v, ok := m["body"]; ok {
		r.body = v.(string)
	}
	if v, ok := m["message"]; ok {
		r.text = []byte(v.(string))
	}
	if v, ok := m["content_type"]; ok {
		r.contentType = v.(string)
	}
	if v, ok := m["json"]; ok {
		if r.body != "json" {
			return nil, bad(path+".json", "json is sent only with body: json")
		}
		data, err := jsonText(jsonValue(v))
		if err != nil {
			return nil, bad(path+".json", "must be a JSON value other than null")
		}
		r.json = data
	} else if r.body == "json" && r.json == nil {
		return nil, bad(path+".json", "missing (body: json sends it)")
	}
	if v, ok := m["headers"]; ok {
		hs := v.(map[string]any)
		r.headers = make(http.Header, len(hs))
		// In name order, as the walker reads them: one message for one
		// document.
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			key := http.CanonicalHeaderKey(name)
			at := path + ".headers." + name
			if ownHeaders[key] {
				return nil, bad(at, "the integration sets this header itself")
			}
			if _, twice := r.headers[key]; twice {
				return nil, bad(at, "\"%s\" is given twice", name)
			}
			r.headers[key] = []string{hs[name].(string)}
		}
	}
	return r, nil
}

// ownHeaders are the headers the integration sets on a refusal itself,
// under net/http's canonical keys: a refusal's headers may not name them.
var ownHeaders = map[string]bool{
	hdrRateLimit: true, hdrPolicy: true, hdrDraftLimit: true, hdrDraftRemaining: true, hdrDraftReset: true,
	hdrLimit: true, hdrRemaining: true, hdrReset: true, hdrRetryAfter: true, "Content-Type": true, "Content-Length": true,
}

// jsonValue is a document's value as encoding/json writes it: a YAML
// mapping with keys that are not strings has them as text.
func jsonValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}
