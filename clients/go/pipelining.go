package librl

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// WithAutoPipelining returns a Limiter whose calls ride the client's
// shared auto-pipeliner (go-redis's AsyncAutoPipeline): the calls that
// concurrent goroutines make at the same moment go to Redis as one
// pipeline, one write and one read for many calls instead of one each,
// which costs the application a fraction of the CPU per call under load
// (docs/clients/go.md, Auto-pipelining). Each call still waits for its
// own reply and still ends at its context's deadline or cancellation
// (a call given up on this way may still run on the server, as a plain
// call whose reply was not read may). Calls the server may hold (Wait),
// calls waiting for replicas (WithDurability) and one-key calls split
// from a moving slot keep the client's own connections. The client must
// be a *redis.Client or a *redis.ClusterClient; a Ring has no
// auto-pipeliner and is refused with go-redis's error.
func (l *Limiter) WithAutoPipelining() (*Limiter, error) {
	ap, err := l.client.AsyncAutoPipeline()
	if err != nil {
		return nil, err
	}
	out := *l
	out.pipe = ap
	return &out, nil
}

// AutoPipelined reports whether the Limiter's calls ride the client's
// auto-pipeliner (WithAutoPipelining).
func (l *Limiter) AutoPipelined() bool { return l.pipe != nil }

// pipelined sends cmd through the auto-pipeliner and waits for its reply
// or the context's end, whichever comes first.
func (l *Limiter) pipelined(ctx context.Context, cmd *redis.Cmd) error {
	return l.pipe.Submit(ctx, cmd).WaitContext(ctx)
}

// WithPipelinedConnection returns a Limiter whose calls ride one
// connection of the package's own to a standalone server: the calls that
// concurrent goroutines make go out together, one write for all those
// queued since the last, and each reply is read straight into the
// caller's waiting slot, with no command object, goroutine or channel per
// call (docs/clients/go.md, A pipelined connection). It costs less CPU
// per call than the auto-pipeliner. The connection is dialled at the
// first call with the client's options (Network, Addr, Dialer, TLSConfig,
// DialTimeout, the credentials, DB, ClientName); when it fails (closed,
// reset, a reply later than the client's ReadTimeout) every call written
// or queued on it fails with that error and the next call dials again. A
// call that ends at its context's deadline may still run on the server:
// its reply is read and dropped. Calls the server may hold (Wait), calls
// waiting for replicas (WithDurability) and OverrideList keep the
// client's own connections. The client must be a *redis.Client without
// an OnConnect hook or a StreamingCredentialsProvider (a cluster:
// WithAutoPipelining). Close closes the connection.
func (l *Limiter) WithPipelinedConnection() (*Limiter, error) {
	c, ok := l.client.(*redis.Client)
	if !ok {
		return nil, errors.New("librl: WithPipelinedConnection needs a *redis.Client (a standalone server); for a cluster use WithAutoPipelining")
	}
	conn, err := newPipeConn(c)
	if err != nil {
		return nil, err
	}
	out := *l
	out.conn = conn
	return &out, nil
}

// PipelinedConnection reports whether the Limiter's calls ride a
// connection of its own (WithPipelinedConnection).
func (l *Limiter) PipelinedConnection() bool { return l.conn != nil }
