package nethttp_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/librl/librl/clients/go/internal/exampleapp"
	"github.com/librl/librl/clients/go/internal/testserver"
	"github.com/librl/librl/clients/go/nethttp"
)

// The conformance suite (conformance/README.md): every case over real
// HTTP, standalone and on a real 3-primary cluster; the standalone and
// hang cases again with the checks through go-redis's auto-pipeliner
// (nethttp.AutoPipelining), and the standalone, hang and down cases with
// them over the package's own pipelined connection
// (nethttp.PipelinedConnection).

type conformanceCase struct {
	Name         string            `json:"name"`
	Rule         string            `json:"rule"`
	Redis        string            `json:"redis"`
	Requires     []string          `json:"requires"`
	Config       json.RawMessage   `json:"config"`
	StartupError *string           `json:"startup_error"`
	CrossField   string            `json:"cross_field"`
	Steps        []json.RawMessage `json:"steps"`
}

type step struct {
	Request      *request        `json:"request"`
	Parallel     []parallelStep  `json:"parallel"`
	Repeat       int             `json:"repeat"`
	Expect       json.RawMessage `json:"expect"`
	SleepMS      int             `json:"sleep_ms"`
	Redis        []string        `json:"redis"`
	RedisPauseMS int             `json:"redis_pause_ms"`
	Check        string          `json:"check"`
	// WithinMS: the step's requests together take at most this long.
	WithinMS int `json:"within_ms"`
	// RedisHang: a hang case's Redis comes back (false) or hangs again.
	RedisHang *bool `json:"redis_hang"`
	// Reload: the configuration the app reloads, expecting "reloaded" or
	// {"error": "<path>"}.
	Reload json.RawMessage `json:"reload"`
}

// parallelStep is one request of a parallel step, sent after_ms after
// the step began.
type parallelStep struct {
	Request *request        `json:"request"`
	Expect  json.RawMessage `json:"expect"`
	AfterMS int             `json:"after_ms"`
}

type request struct {
	Method  string                     `json:"method"`
	Path    json.RawMessage            `json:"path"`
	Headers map[string]json.RawMessage `json:"headers"`
	Body    *string                    `json:"body"`
	Chunked bool                       `json:"chunked"`
	// DisconnectAfterMS closes the connection that long after sending, unread.
	DisconnectAfterMS *int `json:"disconnect_after_ms"`
}

type expectation struct {
	Status      int                        `json:"status"`
	Headers     map[string]json.RawMessage `json:"headers"`
	Absent      []string                   `json:"absent"`
	ContentType string                     `json:"content_type"`
	Body        map[string]json.RawMessage `json:"body"`
	BodyText    *string                    `json:"body_text"`
	// Failed: the handler failed: a 500, or the connection closed unanswered.
	Failed bool `json:"failed"`
	// ElapsedMS: a matcher on the time to the whole response read.
	ElapsedMS json.RawMessage `json:"elapsed_ms"`
}

func casesDir() string {
	_, file, _, _ := runtimeCaller()
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "conformance", "cases")
}

func loadCases(t *testing.T) []conformanceCase {
	files, err := filepath.Glob(filepath.Join(casesDir(), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases in %s (%v)", casesDir(), err)
	}
	var all []conformanceCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Cases []conformanceCase `json:"cases"`
		}
		// Strict: a field of the case format this runner does not know
		// fails here, rather than being skipped.
		if err := strictDecode(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, doc.Cases...)
	}
	return all
}

// pendingCases are the cases conformance/pending.json lists for go: not
// passed yet, reported as PENDING instead of run.
func pendingCases(t *testing.T) map[string]bool {
	data, err := os.ReadFile(filepath.Join(casesDir(), "..", "pending.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases map[string][]string `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("conformance/pending.json: %v", err)
	}
	out := map[string]bool{}
	for _, name := range doc.Cases["go"] {
		out[name] = true
	}
	return out
}

// What this integration lacks: nothing a case requires today.
var lacks = map[string]bool{}

func TestConformance(t *testing.T) {
	cases := loadCases(t)
	pending := pendingCases(t)
	flavor := testserver.ByName("valkey9")
	need := map[string]bool{}
	for _, c := range cases {
		need[c.Redis] = true
	}
	var standalone *testserver.Server
	var cluster *testserver.Cluster
	if need[""] || need["standalone"] || need["hang"] {
		standalone = testserver.Start(t, flavor)
	}
	if need["cluster"] {
		cluster = testserver.StartCluster(t, flavor)
	}
	// Every case runs where it says; the standalone ones on the cluster too.
	type run struct {
		name  string
		c     conformanceCase
		redis string
		via   nethttp.Option // how the checks reach Redis; nil: the client's own Process
	}
	var runs []run
	for _, c := range cases {
		runs = append(runs, run{c.Name, c, c.Redis, nil})
		if (c.Redis == "" || c.Redis == "standalone") && c.StartupError == nil {
			runs = append(runs, run{c.Name + "/on-a-cluster", c, "cluster", nil})
			need["cluster"] = true
		}
		if (c.Redis == "" || c.Redis == "standalone" || c.Redis == "hang") && c.StartupError == nil {
			runs = append(runs, run{c.Name + "/auto-pipelined", c, c.Redis, nethttp.AutoPipelining()})
		}
		if (c.Redis == "" || c.Redis == "standalone" || c.Redis == "hang" || c.Redis == "down") && c.StartupError == nil {
			runs = append(runs, run{c.Name + "/pipelined-connection", c, c.Redis, nethttp.PipelinedConnection()})
		}
	}
	if need["cluster"] && cluster == nil {
		cluster = testserver.StartCluster(t, flavor)
	}
	for _, r := range runs {
		c := r.c
		t.Run(r.name, func(t *testing.T) {
			if pending[c.Name] {
				t.Skip("PENDING: conformance/pending.json")
			}
			for _, r := range c.Requires {
				if lacks[r] {
					t.Skipf("needs %q, which the Go integration does not have", r)
				}
			}
			if c.StartupError != nil {
				_, err := nethttp.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nethttp.Bytes(c.Config),
					nethttp.Register(exampleapp.Resolvers))
				if err == nil || !strings.Contains(err.Error(), *c.StartupError) {
					t.Fatalf("start-up error %v, want one naming %q", err, *c.StartupError)
				}
				return
			}
			var env *redisEnv
			switch r.redis {
			case "", "standalone":
				env = standaloneEnv(t, standalone)
			case "cluster":
				env = clusterEnv(t, cluster)
			case "down":
				env = downEnv(t)
			case "hang":
				env = hangEnv(t, standalone)
			default:
				t.Fatalf("unknown redis %q", r.redis)
			}
			runCase(t, c, env, r.via)
		})
	}
}

// redisEnv is the Redis a case runs against: the app's client, and the
// runner's own access to every primary.
type redisEnv struct {
	app       redis.UniversalClient
	primaries []*redis.Client
	cluster   *redis.ClusterClient // the runner's, for routing redis steps
	hang      *hangProxy           // a hang case's listener
}

// standaloneEnv's client ends a call at its context's deadline, so the
// middleware runs fail: open exchanges on the request's goroutine; the
// cluster's does not, so the same cases run the other way there.
func standaloneEnv(t *testing.T, s *testserver.Server) *redisEnv {
	app := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = app.Close() })
	return &redisEnv{app: app, primaries: []*redis.Client{s.Client()}}
}

func clusterEnv(t *testing.T, c *testserver.Cluster) *redisEnv {
	app := c.Client()
	runner := c.Client()
	env := &redisEnv{app: app, cluster: runner}
	for _, n := range c.Nodes {
		env.primaries = append(env.primaries, n.Client())
	}
	return env
}

// hangEnv's app talks to a hangProxy in front of the real server; the
// runner's own commands go to the server.
//
// Cleanups run last-registered first: the app's client is closed after
// the proxy has closed its connections. Closed first, an auto-pipelined
// client would wait out go-redis's 30 s close backstop for the call still
// hanging on the proxy.
func hangEnv(t *testing.T, s *testserver.Server) *redisEnv {
	var app *redis.Client
	t.Cleanup(func() { _ = app.Close() })
	p := startHangProxy(t, s.Addr())
	app = redis.NewClient(&redis.Options{Addr: p.addr(), ContextTimeoutEnabled: true})
	return &redisEnv{app: app, primaries: []*redis.Client{s.Client()}, hang: p}
}

func downEnv(t *testing.T) *redisEnv {
	port := testserver.FreePort(t, false)
	app := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	t.Cleanup(func() { _ = app.Close() })
	return &redisEnv{app: app}
}

func runCase(t *testing.T, c conformanceCase, env *redisEnv, via nethttp.Option) {
	ctx := context.Background()
	for _, p := range env.primaries {
		if err := p.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
	}
	opts := []nethttp.Option{nethttp.Logger(quietLogger()), nethttp.Register(exampleapp.Resolvers)}
	if via != nil {
		opts = append(opts, via)
	}
	mw, err := nethttp.New(env.app, nethttp.Bytes(c.Config), opts...)
	if err != nil {
		t.Fatalf("start-up: %v", err)
	}
	defer func() { _ = mw.Close() }()
	srv := httptest.NewServer(exampleapp.Handler(mw))
	defer srv.Close()
	client := srv.Client()
	// A paused Redis answers the exchanges the app gave up on once the pause
	// ends, and the app then refunds them: let that happen before the next
	// case flushes, or the late calls would land in its data.
	var pausedUntil time.Time
	defer func() {
		if !pausedUntil.IsZero() {
			time.Sleep(time.Until(pausedUntil) + 300*time.Millisecond)
		}
	}()
	for i, raw := range c.Steps {
		var s step
		if err := strictDecode(raw, &s); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %s, step %d: %s", c.Name, i, fmt.Sprintf(format, args...))
		}
		switch {
		case s.Request != nil:
			n := max(s.Repeat, 1)
			start := time.Now()
			for k := range n {
				if msg := doRequest(client, srv.URL, s.Request, s.Expect); msg != "" {
					fail("request %d of %d: %s", k+1, n, msg)
				}
			}
			if took := time.Since(start); s.WithinMS > 0 && took > time.Duration(s.WithinMS)*time.Millisecond {
				fail("%d requests took %v, more than %d ms", n, took, s.WithinMS)
			}
		case s.Reload != nil:
			var want any
			if err := json.Unmarshal(s.Expect, &want); err != nil {
				fail("reload's expect: %v", err)
			}
			err := mw.Reload(nethttp.Bytes(s.Reload))
			switch w := want.(type) {
			case string:
				if w != "reloaded" || err != nil {
					fail("reload: %v, want %q", err, w)
				}
			case map[string]any:
				path, _ := w["error"].(string)
				if err == nil || path == "" || !strings.Contains(err.Error(), path) {
					fail("reload: %v, want an error naming %q", err, path)
				}
			default:
				fail("reload's expect %s", s.Expect)
			}
		case s.RedisHang != nil:
			if env.hang == nil {
				fail("redis_hang in a case whose redis is not hang")
			}
			env.hang.setHanging(*s.RedisHang)
		case s.Parallel != nil:
			if msg := doParallel(client, srv.URL, s.Parallel); msg != "" {
				fail("%s", msg)
			}
		case s.SleepMS > 0:
			time.Sleep(time.Duration(s.SleepMS) * time.Millisecond)
		case s.Redis != nil:
			got := env.do(ctx, s.Redis)
			if msg := match(s.Expect, got); msg != "" {
				fail("%v replied %#v: %s", s.Redis, got, msg)
			}
		case s.RedisPauseMS > 0:
			pausedUntil = time.Now().Add(time.Duration(s.RedisPauseMS) * time.Millisecond)
			for _, p := range env.primaries {
				if err := p.Do(ctx, "CLIENT", "PAUSE", s.RedisPauseMS, "ALL").Err(); err != nil {
					fail("CLIENT PAUSE: %v", err)
				}
			}
		case s.Check == "every_key_expires":
			for _, p := range env.primaries {
				keys, err := p.Keys(ctx, "*").Result()
				if err != nil {
					fail("KEYS: %v", err)
				}
				for _, k := range keys {
					// Override keys are the operator's (a case's RL.OVERRIDE SET
					// step): docs/http.md, Keys, "nothing the integration writes
					// lives forever".
					if p.Do(ctx, "RL.OVERRIDE", "GET", k).Err() == nil {
						continue
					}
					if ttl, err := p.Do(ctx, "PTTL", k).Int64(); err != nil || ttl <= 0 {
						fail("key %s has no expiry (PTTL %d, %v)", k, ttl, err)
					}
				}
			}
		default:
			fail("unknown step %s", raw)
		}
	}
}

// do sends a command to Redis directly (in a cluster, to the primary
// owning its first key) and returns the reply, nil for a nil reply, or
// the error's text.
func (env *redisEnv) do(ctx context.Context, words []string) any {
	args := make([]any, len(words))
	for i, w := range words {
		args[i] = w
	}
	var c *redis.Client
	if env.cluster == nil {
		c = env.primaries[0]
	} else {
		pos := 1
		if name := strings.ToUpper(words[0]); name == "RL.ALL" || name == "RL.OVERRIDE" {
			pos = 2
		}
		if len(words) <= pos {
			return env.everyPrimary(ctx, args)
		}
		var err error
		if c, err = env.cluster.MasterForKey(ctx, words[pos]); err != nil {
			return err.Error()
		}
	}
	v, err := c.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		return err.Error()
	}
	return v
}

// everyPrimary sends a keyless command (DBSIZE) to every primary; integer
// replies are summed.
func (env *redisEnv) everyPrimary(ctx context.Context, args []any) any {
	var sum int64
	for _, p := range env.primaries {
		v, err := p.Do(ctx, args...).Result()
		if err != nil {
			return err.Error()
		}
		n, ok := v.(int64)
		if !ok {
			return v
		}
		sum += n
	}
	return sum
}

// doParallel sends the requests at once, each after its after_ms, and
// checks each once all have answered.
func doParallel(client *http.Client, base string, steps []parallelStep) string {
	msgs := make([]string, len(steps))
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(time.Duration(s.AfterMS) * time.Millisecond)))
			if s.Request == nil {
				msgs[i] = "not a request"
				return
			}
			msgs[i] = doRequest(client, base, s.Request, s.Expect)
		}()
	}
	wg.Wait()
	var out []string
	for i, m := range msgs {
		if m != "" {
			out = append(out, fmt.Sprintf("request %d: %s", i, m))
		}
	}
	return strings.Join(out, " | ")
}

func doRequest(client *http.Client, base string, r *request, rawExpect json.RawMessage) string {
	method := r.Method
	if method == "" {
		method = "GET"
	}
	var body io.Reader
	if r.Body != nil {
		body = strings.NewReader(*r.Body)
		if r.Chunked {
			body = io.MultiReader(body) // an unknown length: sent chunked
		}
	}
	path, err := caseBytes(r.Path)
	if err != nil {
		return "path: " + err.Error()
	}
	req, err := http.NewRequest(method, base, body)
	if err != nil {
		return err.Error()
	}
	// The path's bytes as the case writes them, on the request line as
	// they are (url.Parse would escape some, and clean none).
	req.URL.Path, req.URL.RawPath = "", ""
	req.URL.Opaque = path
	if strings.HasPrefix(path, "//") {
		// An opaque //x is written scheme:host-relative; a path of that
		// form goes through the URL's path, which keeps it as it is.
		req.URL.Opaque, req.URL.Path = "", path
	}
	if r.Body != nil && !r.Chunked {
		req.ContentLength = int64(len(*r.Body))
	}
	for name, raw := range r.Headers {
		lines, err := headerLines(raw)
		if err != nil {
			return fmt.Sprintf("header %s: %v", name, err)
		}
		for _, v := range lines {
			req.Header.Add(name, v)
		}
	}
	if r.DisconnectAfterMS != nil {
		// Sent, then the connection closed unread: the request's context
		// ends, and the transport closes its connection.
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*r.DisconnectAfterMS)*time.Millisecond)
		defer cancel()
		if resp, err := client.Do(req.WithContext(ctx)); err == nil {
			resp.Body.Close() // an early answer is not read either: the step expects nothing
		}
		return ""
	}
	var e expectation
	if len(rawExpect) > 0 {
		if err := strictDecode(rawExpect, &e); err != nil {
			return err.Error()
		}
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if e.Failed {
			return "" // the handler failed: the connection closed unanswered
		}
		return err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	elapsed := time.Since(start).Milliseconds()
	if len(rawExpect) == 0 {
		return ""
	}
	if e.ElapsedMS != nil {
		if msg := match(e.ElapsedMS, elapsed); msg != "" {
			return fmt.Sprintf("elapsed ms: %s", msg)
		}
	}
	where := fmt.Sprintf("%s %q -> %d %v %q", method, path, resp.StatusCode, resp.Header, data)
	if e.Failed && resp.StatusCode != http.StatusInternalServerError {
		return fmt.Sprintf("status %d, want a failed handler's 500 or no response (%s)", resp.StatusCode, where)
	}
	if e.Status != 0 && resp.StatusCode != e.Status {
		return fmt.Sprintf("status %d, want %d (%s)", resp.StatusCode, e.Status, where)
	}
	for name, want := range e.Headers {
		got, ok := resp.Header[http.CanonicalHeaderKey(name)]
		if !ok {
			return fmt.Sprintf("header %s missing (%s)", name, where)
		}
		if msg := match(want, strings.Join(got, ", ")); msg != "" {
			return fmt.Sprintf("header %s: %s (%s)", name, msg, where)
		}
	}
	for _, name := range e.Absent {
		if v := resp.Header.Get(name); v != "" {
			return fmt.Sprintf("header %s present: %q (%s)", name, v, where)
		}
	}
	if e.ContentType != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), e.ContentType) {
		return fmt.Sprintf("content type %q, want %q (%s)", resp.Header.Get("Content-Type"), e.ContentType, where)
	}
	if e.BodyText != nil && string(data) != *e.BodyText {
		return fmt.Sprintf("body %q, want %q", data, *e.BodyText)
	}
	if e.Body != nil {
		var got map[string]any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil {
			return fmt.Sprintf("body is not JSON: %q", data)
		}
		for k, want := range e.Body {
			v, ok := got[k]
			if !ok {
				return fmt.Sprintf("body has no %q: %s", k, data)
			}
			if msg := match(want, v); msg != "" {
				return fmt.Sprintf("body %q: %s (%s)", k, msg, data)
			}
		}
	}
	return ""
}

// strictDecode reads JSON with numbers as json.Number, refusing fields
// the target does not have.
func strictDecode(data []byte, into any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// caseBytes is a string's UTF-8 bytes, or {"hex": "..."}'s bytes
// (conformance/README.md, Steps).
func caseBytes(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var h struct {
		Hex *string `json:"hex"`
	}
	if err := strictDecode(raw, &h); err != nil || h.Hex == nil {
		return "", fmt.Errorf("%s is neither a string nor {\"hex\": ...}", raw)
	}
	b, err := hex.DecodeString(*h.Hex)
	return string(b), err
}

// headerLines is a header's value in a case: one line (a string or
// bytes), or a list of them, one line each.
func headerLines(raw json.RawMessage) ([]string, error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		list = []json.RawMessage{raw}
	}
	lines := make([]string, len(list))
	for i, one := range list {
		v, err := caseBytes(one)
		if err != nil {
			return nil, err
		}
		lines[i] = v
	}
	return lines, nil
}

// match compares a value with an expectation: equal, or a matcher
// ({"range": [lo, hi]}, {"re": "..."}, {"any": true}), arrays element by
// element. "" when it matches.
func match(raw json.RawMessage, got any) string {
	var want any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		return err.Error()
	}
	return matchValue(want, got)
}

func matchValue(want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		if _, ok := w["any"]; ok {
			return ""
		}
		if r, ok := w["range"].([]any); ok && len(r) == 2 {
			n, ok := integer(got)
			lo, _ := integer(r[0])
			hi, _ := integer(r[1])
			if !ok || n < lo || n > hi {
				return fmt.Sprintf("%#v is not in [%d, %d]", got, lo, hi)
			}
			return ""
		}
		if re, ok := w["re"].(string); ok {
			s, ok := got.(string)
			if !ok || !regexp.MustCompile("^(?:"+re+")$").MatchString(s) {
				return fmt.Sprintf("%#v does not match /%s/", got, re)
			}
			return ""
		}
		return fmt.Sprintf("unknown matcher %v", w)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%#v is not an array of %d", got, len(w))
		}
		for i := range w {
			if msg := matchValue(w[i], g[i]); msg != "" {
				return fmt.Sprintf("[%d]: %s", i, msg)
			}
		}
		return ""
	case json.Number:
		n, ok := integer(got)
		wn, _ := w.Int64()
		if !ok || n != wn {
			return fmt.Sprintf("%#v, want %s", got, w)
		}
		return ""
	case nil:
		if got != nil {
			return fmt.Sprintf("%#v, want null", got)
		}
		return ""
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%#v, want %#v", got, want)
		}
		return ""
	}
}

func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}
