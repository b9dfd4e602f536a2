package librl

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waiting holds the client that sends the calls the server may hold (WAIT
// on RL.TOKEN and RL.CONCURRENT): a copy of the Limiter's client with a
// pool of its own and no read timeout but the call's. A held call keeps
// its connection busy until the reply: in the Limiter's own pool it would
// need a ReadTimeout longer than any wait, for every call, and enough
// waiters would leave no connection for the others. One waiting is shared
// by a Limiter and every Limiter derived from it.
type waiting struct {
	mu     sync.Mutex
	client redis.UniversalClient
	closed bool
}

// waitingClient is the client for a call the server may hold up to wait,
// and the context to send it with; ok is false when the Limiter's client
// is not one whose options the package can copy (a Ring, another
// UniversalClient), or after Close.
func (l *Limiter) waitingClient(ctx context.Context, wait time.Duration) (redis.UniversalClient, context.Context, context.CancelFunc, bool) {
	w := l.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil, nil, false
	}
	grace := l.readTimeout
	if w.client == nil {
		switch c := l.client.(type) {
		case *redis.ClusterClient:
			w.client = redis.NewClusterClient(clusterWaitOptions(c.Options()))
		case *redis.Client:
			w.client = redis.NewClient(waitOptions(c.Options()))
		default:
			return nil, nil, nil, false
		}
	}
	if grace <= 0 {
		grace = defaultGrace
	}
	// The server answers by the end of the wait; past it by the client's
	// own read timeout, the connection is given up.
	hold, cancel := context.WithTimeout(ctx, wait+grace)
	return w.client, hold, cancel, true
}

// defaultGrace is how long past its wait a held reply may take when the
// client's read timeout is unknown or off.
const defaultGrace = 5 * time.Second

// The waiting client's options: the given client's way to connect (address,
// dialer, credentials, TLS, database, protocol), and reads that wait as
// long as the call's context allows (ReadTimeout -1 is none; the context's
// deadline applies with ContextTimeoutEnabled), as do turns for a
// connection. Nothing else is copied: a client's options also carry its
// own state (push processors, caches) that a second client must not
// share. No retry: a held call resent after a lost reply could take a
// second lease.
func waitOptions(o *redis.Options) *redis.Options {
	return &redis.Options{
		Network: o.Network, Addr: o.Addr, ClientName: o.ClientName, Dialer: o.Dialer, OnConnect: o.OnConnect,
		Protocol: o.Protocol, Username: o.Username, Password: o.Password,
		CredentialsProvider: o.CredentialsProvider, CredentialsProviderContext: o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		DB:                           o.DB, TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, IdentitySuffix: o.IdentitySuffix, DisableIdentity: o.DisableIdentity,
		ReadTimeout: -1, ContextTimeoutEnabled: true, PoolTimeout: holdPoolTimeout, MaxRetries: -1,
	}
}

func clusterWaitOptions(o *redis.ClusterOptions) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs: o.Addrs, ClientName: o.ClientName, NewClient: o.NewClient, ClusterSlots: o.ClusterSlots,
		Dialer: o.Dialer, OnConnect: o.OnConnect, Protocol: o.Protocol, Username: o.Username, Password: o.Password,
		CredentialsProvider: o.CredentialsProvider, CredentialsProviderContext: o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		TLSConfig:                    o.TLSConfig, DialTimeout: o.DialTimeout, WriteTimeout: o.WriteTimeout, MaxRedirects: o.MaxRedirects,
		PoolSize: o.PoolSize, IdentitySuffix: o.IdentitySuffix, DisableIdentity: o.DisableIdentity,
		ReadTimeout: -1, ContextTimeoutEnabled: true, PoolTimeout: holdPoolTimeout, MaxRetries: -1,
	}
}

// holdPoolTimeout: a held call waits for a connection as long as its
// context allows, which is always shorter.
const holdPoolTimeout = 24 * time.Hour

// Close closes the connections the Limiter opened: its pipelined
// connection (WithPipelinedConnection; the calls under way on it fail)
// and those for calls the server holds (Wait on Token and Acquire),
// shared with every Limiter derived from it (WithDenialCache,
// WithDurability, WithTryAgainWait); not the
// client it was given, which stays the caller's to close. A Limiter that
// never sent a Wait has none. After Close, a call with Wait goes through
// the Limiter's client, within its ReadTimeout.
func (l *Limiter) Close() error {
	if l.conn != nil {
		l.conn.close()
	}
	w := l.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.client == nil {
		return nil
	}
	err := w.client.Close()
	w.client = nil
	return err
}
