package librl

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// durability: after each call that may write, WAIT replicas timeout on the
// same connection, so the call returns once that many replicas hold it.
type durability struct {
	replicas int
	timeout  time.Duration
}

// WithDurability returns a Limiter that follows every call that may write
// (not Peek, not Cost(0), not an RL.ALL whose every clause reads) with
// WAIT replicas timeout on the same connection, in one round trip. When
// fewer replicas acknowledge in time, the call returns its Decision
// together with a *DurabilityError (its message starts with NOTDURABLE, as
// the Rust client's error): the decision stands on the primary, but a
// failover now could lose it. replicas must be at least 1 and timeout at
// least 1 ms, in whole milliseconds: WAIT with 0 would block the
// connection until the replicas answer, however long.
func (l *Limiter) WithDurability(replicas int, timeout time.Duration) (*Limiter, error) {
	if replicas < 1 {
		return nil, argErr("WithDurability", "replicas must be at least 1, got %d", replicas)
	}
	if timeout < time.Millisecond || timeout%time.Millisecond != 0 {
		return nil, argErr("WithDurability", "the timeout must be a whole number of milliseconds, at least 1 ms "+
			"(WAIT with 0 waits forever), got %v", timeout)
	}
	out := *l
	out.durable = &durability{replicas: replicas, timeout: timeout}
	return &out, nil
}

func (l *Limiter) sendDurable(ctx context.Context, k call) (any, error) {
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	err := l.retrying(ctx, k.splittable(), func(ctx context.Context) error {
		var failed error // on the way to the node, not the call's own error
		if cmd, wait, failed = l.durableOnce(ctx, k); failed != nil {
			return failed
		}
		return cmd.Err()
	})
	if err != nil {
		return nil, &Error{Command: k.name, Err: err}
	}
	if err := wait.Err(); err != nil {
		return cmd.Val(), &Error{Command: "WAIT", Err: err}
	}
	if acked := wait.Val(); acked < int64(l.durable.replicas) {
		return cmd.Val(), &DurabilityError{Command: k.name, Wanted: l.durable.replicas, Acked: acked, Timeout: l.durable.timeout}
	}
	return cmd.Val(), nil
}

// durableOnce sends the call and WAIT once (following redirects in a
// cluster); failed is an error on the way to the node.
func (l *Limiter) durableOnce(ctx context.Context, k call) (cmd *redis.Cmd, wait *redis.IntCmd, failed error) {
	cmd = redis.NewCmd(ctx, k.argv...)
	cmd.SetFirstKeyPos(k.keyPos)
	timeout := l.durable.timeout.Milliseconds()
	wait = redis.NewIntCmd(ctx, "WAIT", strconv.Itoa(l.durable.replicas), strconv.FormatInt(timeout, 10))
	// Both on one connection: WAIT counts that connection's writes.
	run := func(c redis.Cmdable, asking bool) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if asking {
				_ = p.Process(ctx, redis.NewStatusCmd(ctx, "ASKING"))
			}
			_ = p.Process(ctx, cmd)
			_ = p.Process(ctx, wait)
			return nil
		})
		return err
	}
	if l.cluster == nil {
		_ = run(l.client, false)
		return cmd, wait, nil
	}
	return cmd, wait, l.clusterDurable(ctx, k, run, cmd)
}

// clusterDurable sends the pipeline to the primary owning the call's slot;
// a MOVED or ASK (a slot being moved) sends it again to the node named.
func (l *Limiter) clusterDurable(ctx context.Context, k call, run func(redis.Cmdable, bool) error, cmd *redis.Cmd) error {
	key, _ := k.argv[k.keyPos].(string)
	node, err := l.cluster.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	asking := false
	for attempt := 0; ; attempt++ {
		_ = run(node, asking)
		kind, addr := redirect(cmd.Err())
		if kind == "" || attempt >= 3 {
			return nil
		}
		if kind == "MOVED" {
			l.cluster.ReloadState(ctx)
		}
		asking = kind == "ASK"
		if node, err = l.primaryAt(ctx, addr); err != nil {
			return err
		}
	}
}

// primaryAt is the cluster client's connection to the primary at addr.
func (l *Limiter) primaryAt(ctx context.Context, addr string) (*redis.Client, error) {
	var found *redis.Client
	err := l.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			found = c
		}
		return nil
	})
	if err == nil && found == nil {
		err = errNoNode(addr)
	}
	return found, err
}

type errNoNode string

func (e errNoNode) Error() string {
	return "no primary at " + string(e) + " in the cluster client's map"
}
