// Package testserver starts real servers with librl loaded for the Go
// tests: standalone, with a replica, or as a 3-primary Redis Cluster, on
// free loopback ports, each killed when its test ends (and, through the
// kernel's parent-death signal, if the test binary dies first).
//
// Environment, as the Makefile exports it: LIBRL_MODULE (the module),
// REDIS8_SERVER, VALKEY8_SERVER and VALKEY_SERVER, each defaulting to
// where scripts/servers.env (which the Makefile reads too) says the install
// script puts it; Debian's redis-server 7.0 is found on PATH.
package testserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Flavor names one of the four servers every test runs on.
type Flavor struct {
	Name string
	env  string // the variable naming its binary; "" for redis-server on PATH
}

// Flavors: Redis 7.0, Redis 8, Valkey 8 and Valkey 9.
var Flavors = []Flavor{
	{"redis7", ""},
	{"redis8", "REDIS8_SERVER"},
	{"valkey8", "VALKEY8_SERVER"},
	{"valkey9", "VALKEY_SERVER"},
}

// ByName is the flavor called name.
func ByName(name string) Flavor {
	for _, f := range Flavors {
		if f.Name == name {
			return f
		}
	}
	panic("testserver: no flavor " + name)
}

func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// installed is where scripts/servers.env, the one list of the server
// binaries' paths, says the variable's binary is, relative to the root.
func installed(t testing.TB, variable string) string {
	t.Helper()
	file := filepath.Join(root(), "scripts", "servers.env")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		name, path, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && !strings.HasPrefix(name, "#") && strings.TrimSpace(name) == variable {
			return strings.TrimSpace(path)
		}
	}
	t.Fatalf("%s does not name %s", file, variable)
	return ""
}

// Binary is the server binary of f: its variable when set, else where
// scripts/servers.env puts it; the test fails when it is missing.
func (f Flavor) Binary(t testing.TB) string {
	t.Helper()
	path, hint := "redis-server", "scripts/install-deps.sh test installs it"
	if f.env != "" {
		hint += ", or set " + f.env
		path = os.Getenv(f.env)
		if path == "" {
			path = filepath.Join(root(), installed(t, f.env))
		}
	}
	found, err := exec.LookPath(path)
	if err != nil {
		t.Fatalf("%s server %s is missing (%s): %v", f.Name, path, hint, err)
	}
	return found
}

// Module is the librl module the servers load.
func Module(t testing.TB) string {
	t.Helper()
	m := os.Getenv("LIBRL_MODULE")
	if m == "" {
		m = filepath.Join(root(), "target", "release", "librl.so")
	}
	if _, err := os.Stat(m); err != nil {
		t.Fatalf("the module %s is missing: cargo build --release --locked", m)
	}
	return m
}

var (
	portsMu sync.Mutex
	handed  = map[int]bool{}
)

func bindable(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// FreePort is a loopback port nobody listens on (for a cluster node, its
// bus port, 10000 above, too).
func FreePort(t testing.TB, cluster bool) int {
	t.Helper()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		portsMu.Lock()
		taken := handed[port]
		if !taken && (!cluster || (port <= 55535 && bindable(port+10000))) {
			handed[port] = true
			portsMu.Unlock()
			return port
		}
		portsMu.Unlock()
	}
	t.Fatal("no free port")
	return 0
}

// Server is one server process with librl loaded.
type Server struct {
	Flavor Flavor
	Port   int
	Dir    string
	cmd    *exec.Cmd
	t      testing.TB
	client *redis.Client
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Client is the test's go-redis client of this server (one, reused),
// closed with the test.
func (s *Server) Client() *redis.Client {
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{Addr: s.Addr()})
		s.t.Cleanup(func() { _ = s.client.Close() })
	}
	return s.client
}

// Start starts a standalone server of flavor f, with extra arguments.
func Start(t testing.TB, f Flavor, extra ...string) *Server {
	t.Helper()
	s := spawn(t, f, false, extra...)
	s.WaitReady()
	return s
}

func spawn(t testing.TB, f Flavor, cluster bool, extra ...string) *Server {
	t.Helper()
	bin := f.Binary(t)
	module := Module(t)
	s := &Server{Flavor: f, Port: FreePort(t, cluster), Dir: t.TempDir(), t: t}
	args := []string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir, "--logfile", "server.log", "--loadmodule", module,
	}
	if cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
	}
	s.cmd = exec.Command(bin, append(args, extra...)...)
	// Killed with the test binary even if it dies without cleaning up.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// WaitReady waits until the server answers PING (15 s at most).
func (s *Server) WaitReady() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return
		} else if time.Now().After(deadline) {
			s.t.Fatalf("%s on %d never answered: %v\n%s", s.Flavor.Name, s.Port, err, s.LogTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LogTail is the end of the server's log, for failure messages.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop kills the server (a test may stop it early: "Redis goes down").
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// StartReplica starts a replica of primary and waits until it is in sync.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	// The primary's default waits 5 s for more replicas before a diskless sync.
	must(t, primary.Client().ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err())
	r := Start(t, primary.Flavor, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	c := r.Client()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never synced: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is three primaries owning slots 0-5460, 5461-10922 and
// 10923-16383.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
}

var ranges = [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}

// StartCluster forms a 3-primary cluster of flavor f.
func StartCluster(t testing.TB, f Flavor) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for range ranges {
		c.Nodes = append(c.Nodes, spawn(t, f, true))
	}
	ctx := context.Background()
	for i, n := range c.Nodes {
		n.WaitReady()
		// Distinct epochs from the start, as redis-cli --cluster create
		// sets them: otherwise the nodes resolve their equal epochs by
		// gossip while a test moves a slot, and a late bump can hand the
		// slot back to its old owner.
		must(t, n.Client().Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err())
		must(t, n.Client().Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err())
	}
	first := c.Nodes[0].Client()
	for _, n := range c.Nodes[1:] {
		must(t, first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port).Err())
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.settled() {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never reached cluster_state:ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) settled() bool {
	for _, n := range c.Nodes {
		cl := n.Client()
		info, err := cl.ClusterInfo(context.Background()).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			return false
		}
		slots, err := cl.ClusterSlots(context.Background()).Result()
		if err != nil || len(slots) != 3 {
			return false
		}
	}
	return true
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Client is a new go-redis cluster client, closed with the test.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// ResetStats runs CONFIG RESETSTAT on every node.
func (c *Cluster) ResetStats() {
	for _, n := range c.Nodes {
		must(c.t, n.Client().ConfigResetStat(context.Background()).Err())
	}
}

// Stats sums over every node: "getkeys" (COMMAND GETKEYS and
// GETKEYSANDFLAGS calls), "moved", "ask" and "tryagain" (those errors
// replied), and the
// calls of each command by its commandstats name ("rl.fixed").
func (c *Cluster) Stats() map[string]int64 {
	out := map[string]int64{"getkeys": 0, "moved": 0, "ask": 0, "tryagain": 0}
	for _, n := range c.Nodes {
		cl := n.Client()
		for _, section := range []string{"commandstats", "errorstats"} {
			info, err := cl.Info(context.Background(), section).Result()
			must(c.t, err)
			for _, line := range strings.Split(info, "\n") {
				name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
				if !ok {
					continue
				}
				switch {
				case strings.HasPrefix(name, "cmdstat_"):
					calls := field(fields, "calls")
					cmd := strings.ToLower(strings.TrimPrefix(name, "cmdstat_"))
					if cmd == "command|getkeys" || cmd == "command|getkeysandflags" {
						out["getkeys"] += calls
					} else {
						out[cmd] += calls
					}
				case name == "errorstat_MOVED":
					out["moved"] += field(fields, "count")
				case name == "errorstat_ASK":
					out["ask"] += field(fields, "count")
				case name == "errorstat_TRYAGAIN":
					out["tryagain"] += field(fields, "count")
				}
			}
		}
	}
	return out
}

func field(fields, name string) int64 {
	for _, kv := range strings.Split(fields, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// Owner is the node owning slot.
func (c *Cluster) Owner(slot int) *Server {
	slots, err := c.Nodes[0].Client().ClusterSlots(context.Background()).Result()
	must(c.t, err)
	for _, s := range slots {
		if int(s.Start) <= slot && slot <= int(s.End) {
			for _, n := range c.Nodes {
				if n.Addr() == s.Nodes[0].Addr {
					return n
				}
			}
		}
	}
	c.t.Fatalf("no owner of slot %d", slot)
	return nil
}

// FillSlot makes n RL.FIXED keys under the hash tag tag (pipelined to
// the owner of its slot), so that moving the slot key by key takes
// seconds (docs/contributing.md, Calls while a slot moves).
func (c *Cluster) FillSlot(tag string, slot, n int) {
	ctx := context.Background()
	pipe := c.Owner(slot).Client().Pipeline()
	for i := range n {
		pipe.Do(ctx, "RL.FIXED", fmt.Sprintf("%s:fill:%d", tag, i), 10, "1h")
	}
	_, err := pipe.Exec(ctx)
	must(c.t, err)
}

// Elsewhere is a node that does not own slot: where to move it.
func (c *Cluster) Elsewhere(slot int) *Server {
	if home := c.Owner(slot); home != c.Nodes[0] {
		return c.Nodes[0]
	}
	return c.Nodes[1]
}

// MoveSlot reshards slot to target as redis-cli --cluster does:
// IMPORTING/MIGRATING, MIGRATE every key, SETSLOT NODE on every node.
func (c *Cluster) MoveSlot(slot int, target *Server) {
	c.MigrateSlot(slot, target, 100, 0)
}

// MigrateSlot is MoveSlot migrating batch keys per MIGRATE with a pause
// after each: a slot holding thousands of keys then takes seconds to move,
// as it does in production, and calls in the slot meet it half moved. It
// returns how long the slot was half moved (from MIGRATING to the
// target's SETSLOT NODE).
func (c *Cluster) MigrateSlot(slot int, target *Server, batch int, pause time.Duration) (halfMoved time.Duration) {
	ctx := context.Background()
	source := c.Owner(slot)
	if source == target {
		c.t.Fatalf("slot %d is already on %s", slot, target.Addr())
	}
	id := func(s *Server) string {
		v, err := s.Client().Do(ctx, "CLUSTER", "MYID").Text()
		must(c.t, err)
		return v
	}
	src, dst := source.Client(), target.Client()
	must(c.t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(source)).Err())
	must(c.t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(target)).Err())
	opened := time.Now()
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		must(c.t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", target.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		// A batch whose keys all expired since they were listed replies NOKEY, not an error.
		must(c.t, src.Do(ctx, args...).Err())
		time.Sleep(pause)
	}
	targetID := id(target)
	halfMoved = time.Since(opened)
	for _, n := range append([]*Server{target, source}, c.others(source, target)...) {
		must(c.t, n.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", targetID).Err())
	}
	c.waitForOwner(slot, target)
	return halfMoved
}

// MigrateSlotAtomically moves slot to target with Valkey 9's CLUSTER
// MIGRATESLOTS (the source serves the slot until the target takes it
// whole), and returns once every node names the target as its owner.
func (c *Cluster) MigrateSlotAtomically(slot int, target *Server) {
	ctx := context.Background()
	targetID, err := target.Client().Do(ctx, "CLUSTER", "MYID").Text()
	must(c.t, err)
	must(c.t, c.Owner(slot).Client().Do(ctx, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", targetID).Err())
	c.waitForOwner(slot, target)
}

// waitForOwner waits until every node names target as the owner of slot.
func (c *Cluster) waitForOwner(slot int, target *Server) {
	ctx := context.Background()
	// Return only once every node names the target as the owner: a node
	// still catching up through gossip would bounce a call between owners
	// until go-redis runs out of redirects and returns the MOVED.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for ownerSeenBy(ctx, n, slot) != target.Addr() {
			if time.Now().After(deadline) {
				c.t.Fatalf("slot %d: %s still names %s as its owner", slot, n.Addr(), ownerSeenBy(ctx, n, slot))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// OpenMigration marks slot as migrating from its owner to target, moving
// no key, as a resharding that stopped half-way leaves it; the returned
// function marks it stable again on both nodes.
func (c *Cluster) OpenMigration(slot int, target *Server) (abort func()) {
	ctx := context.Background()
	source := c.Owner(slot)
	myID := func(s *Server) string {
		v, err := s.Client().Do(ctx, "CLUSTER", "MYID").Text()
		must(c.t, err)
		return v
	}
	must(c.t, target.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", myID(source)).Err())
	must(c.t, source.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", myID(target)).Err())
	return func() {
		for _, n := range []*Server{source, target} {
			must(c.t, n.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err())
		}
	}
}

// ownerSeenBy is the address node n's CLUSTER SLOTS gives for slot ("" if none).
func ownerSeenBy(ctx context.Context, n *Server, slot int) string {
	slots, err := n.Client().ClusterSlots(ctx).Result()
	if err != nil {
		return ""
	}
	for _, s := range slots {
		if int(s.Start) <= slot && slot <= int(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	return ""
}

func (c *Cluster) others(a, b *Server) []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if n != a && n != b {
			out = append(out, n)
		}
	}
	return out
}

// String names the cluster for messages.
func (c *Cluster) String() string { return fmt.Sprint(c.Addrs()) }
