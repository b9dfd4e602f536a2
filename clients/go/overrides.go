package librl

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// OverrideSet is RL.OVERRIDE SET: stores an override of limit per window
// at okey, replacing any (options Burst, TTL). It clears the Limiter's
// denial cache: the new limit may admit calls that were denied.
func (l *Limiter) OverrideSet(ctx context.Context, okey string, limit int64, window time.Duration, opts ...Option) error {
	const where = "OverrideSet"
	o, err := collect(where, overrideSetOK, opts)
	if err != nil {
		return err
	}
	w, err := durationArg(where, "window", window, false)
	if err != nil {
		return err
	}
	argv := []any{"RL.OVERRIDE", "SET", okey, intArg(limit), w}
	if o.has(optBurst) {
		argv = append(argv, "BURST", intArg(o.burst))
	}
	if o.has(optTTL) {
		ttl, err := durationArg(where, "TTL()", o.ttl, false)
		if err != nil {
			return err
		}
		argv = append(argv, "TTL", ttl)
	}
	_, err = l.send(ctx, overrideCall("SET", argv, []string{okey}, effectClearAll, true), nil)
	return err
}

// OverrideGet is RL.OVERRIDE GET: the override at okey, or nil.
func (l *Limiter) OverrideGet(ctx context.Context, okey string) (*OverrideValues, error) {
	reply, err := l.send(ctx, overrideCall("GET", []any{"RL.OVERRIDE", "GET", okey}, []string{okey}, effectNone, false), nil)
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	if reply == nil {
		return nil, nil
	}
	v, err := ints("RL.OVERRIDE GET", reply, 4)
	if err != nil {
		return nil, err
	}
	o := overrideFrom(v)
	return &o, nil
}

// OverrideDel is RL.OVERRIDE DEL: deletes the overrides at okeys and says
// how many existed. In a cluster the keys are grouped by slot, one command
// per slot. It clears the Limiter's denial cache.
func (l *Limiter) OverrideDel(ctx context.Context, okeys ...string) (int64, error) {
	if len(okeys) == 0 {
		return 0, argErr("OverrideDel", "needs at least one okey")
	}
	groups := [][]string{okeys}
	if l.cluster != nil {
		groups = groups[:0]
		index := map[int]int{}
		for _, k := range okeys {
			s := Slot(k)
			i, ok := index[s]
			if !ok {
				i = len(groups)
				index[s] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], k)
		}
	}
	var deleted int64
	for _, g := range groups {
		argv := []any{"RL.OVERRIDE", "DEL"}
		for _, k := range g {
			argv = append(argv, k)
		}
		reply, err := l.send(ctx, overrideCall("DEL", argv, g, effectClearAll, true), nil)
		if err != nil && reply == nil {
			return deleted, err
		}
		n, ok := reply.(int64)
		if !ok {
			return deleted, &Error{Command: "RL.OVERRIDE DEL", Err: replyError("RL.OVERRIDE DEL", reply)}
		}
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

func overrideCall(sub string, argv []any, keys []string, eff effect, writes bool) call {
	return call{name: "RL.OVERRIDE " + sub, argv: argv, keyPos: 2, keys: keys, effect: eff, writes: writes}
}

// OverrideList is one step of RL.OVERRIDE LIST (SCAN's cursor contract)
// over a standalone server's overrides: start with cursor 0, stop when the
// returned cursor is 0. Options Match, Count. Cursors belong to one node:
// with a cluster use OverrideListNode or OverrideScan.
func (l *Limiter) OverrideList(ctx context.Context, cursor uint64, opts ...Option) (uint64, []OverrideEntry, error) {
	if l.cluster != nil {
		return 0, nil, argErr("OverrideList", "a cluster's overrides are listed per node: use OverrideListNode or OverrideScan")
	}
	return overrideList(ctx, l.client, cursor, opts)
}

// OverrideListNode is OverrideList on one node of a cluster (one of the
// clients ClusterClient.ForEachMaster hands out).
func (l *Limiter) OverrideListNode(ctx context.Context, node *redis.Client, cursor uint64, opts ...Option) (uint64, []OverrideEntry, error) {
	return overrideList(ctx, node, cursor, opts)
}

// OverrideScan lists every override of the server, or of every primary of
// a cluster (SCAN's contract: an override present the whole time is listed
// at least once).
func (l *Limiter) OverrideScan(ctx context.Context, opts ...Option) ([]OverrideEntry, error) {
	scan := func(ctx context.Context, c processor) ([]OverrideEntry, error) {
		var all []OverrideEntry
		var cursor uint64
		for {
			next, page, err := overrideList(ctx, c, cursor, opts)
			if err != nil {
				return nil, err
			}
			all = append(all, page...)
			if cursor = next; cursor == 0 {
				return all, nil
			}
		}
	}
	if l.cluster == nil {
		return scan(ctx, l.client)
	}
	var mu sync.Mutex
	var all []OverrideEntry
	err := l.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		page, err := scan(ctx, node)
		mu.Lock()
		all = append(all, page...)
		mu.Unlock()
		return err
	})
	return all, err
}

// processor is what sends one command: a client, a cluster's node.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

func overrideList(ctx context.Context, c processor, cursor uint64, opts []Option) (uint64, []OverrideEntry, error) {
	const where = "OverrideList"
	o, err := collect(where, overrideLsOK, opts)
	if err != nil {
		return 0, nil, err
	}
	argv := []any{"RL.OVERRIDE", "LIST", strconv.FormatUint(cursor, 10)}
	if o.has(optMatch) {
		argv = append(argv, "MATCH", o.match)
	}
	if o.has(optCount) {
		argv = append(argv, "COUNT", intArg(o.count))
	}
	cmd := redis.NewCmd(ctx, argv...)
	if err := c.Process(ctx, cmd); err != nil {
		return 0, nil, &Error{Command: "RL.OVERRIDE LIST", Err: err}
	}
	return parseList(cmd.Val())
}

func parseList(reply any) (uint64, []OverrideEntry, error) {
	bad := &Error{Command: "RL.OVERRIDE LIST", Err: replyError("RL.OVERRIDE LIST", reply)}
	arr, ok := reply.([]any)
	if !ok || len(arr) < 2 {
		return 0, nil, bad
	}
	var next uint64
	switch c := arr[0].(type) {
	case int64:
		next = uint64(c)
	case string:
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			return 0, nil, bad
		}
		next = n
	default:
		return 0, nil, bad
	}
	items, ok := arr[1].([]any)
	if !ok {
		return 0, nil, bad
	}
	out := make([]OverrideEntry, 0, len(items))
	for _, it := range items {
		row, ok := it.([]any)
		if !ok || len(row) < 5 {
			return 0, nil, bad
		}
		key, ok := row[0].(string)
		if !ok {
			return 0, nil, bad
		}
		v, err := ints("RL.OVERRIDE LIST", row[1:], 4)
		if err != nil {
			return 0, nil, bad
		}
		out = append(out, OverrideEntry{Key: key, OverrideValues: overrideFrom(v)})
	}
	return next, out, nil
}
