package librl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The package's own pipelined connection (WithPipelinedConnection,
// docs/clients/go.md, A pipelined connection): one connection to a
// standalone server, on which every caller's command is queued; a writer
// goroutine sends all the commands queued since its last write in one
// write, and a reader goroutine hands each reply to its caller, in order.
// A call costs its caller one wakeup and no goroutine, channel or command
// object of its own; a batch costs one write and one read.

// pipeConn is the connection, dialled again when it failed.
type pipeConn struct {
	opt *redis.Options
	mu  sync.Mutex
	cur *link // nil before the first call and after a failure
	// dialing: closed when the dial under way ends (nil: none).
	dialing chan struct{}
	dialErr error
	closed  bool
}

// errConnClosed: Limiter.Close closed the connection.
var errConnClosed = errors.New("librl: the pipelined connection is closed")

// newPipeConn checks that the client's options are ones the connection
// can honour.
func newPipeConn(c *redis.Client) (*pipeConn, error) {
	o := c.Options()
	switch {
	case o.OnConnect != nil:
		return nil, errors.New("librl: WithPipelinedConnection: the client has an OnConnect hook, which runs on go-redis's connections only")
	case o.StreamingCredentialsProvider != nil:
		return nil, errors.New("librl: WithPipelinedConnection: the client has a StreamingCredentialsProvider, which re-authenticates go-redis's connections only")
	}
	return &pipeConn{opt: o}, nil
}

// link is one connection's life: from its dial to its first failure.
type link struct {
	nc   net.Conn
	rd   *bufio.Reader
	wake chan struct{} // the writer's: calls are queued
	mu   sync.Mutex
	// out: the commands queued since the last write; queued: their slots.
	out    []byte
	queued []*slot
	// woken: the writer was woken and has not taken the queue yet.
	woken bool
	// sent: the slots of the commands written, oldest first from head.
	sent []*slot
	head int
	// err: the link failed; every call on it fails with it.
	err error
	// timeout: how long a written command's reply may take before the
	// connection is taken for dead (the client's ReadTimeout; 0: never).
	timeout time.Duration
	// expiry ends the calls whose deadline passed (expire), armed for
	// the earliest deadline of the calls waiting: one timer for every
	// call, instead of a context and a timer each (Limiter.WithTimeout).
	expiry *time.Timer
	// armed: the deadline expiry is set for (Unix ns; 0: not armed).
	armed int64
}

// slot is one call's reply, handed from the reader to the caller.
type slot struct {
	done  chan struct{}
	reply any
	err   error
	// state: slotWaiting, then slotDone (the reader delivered) or
	// slotGone (the caller left at its context's end: the reader drops
	// the reply).
	state atomic.Int32
	// sentAt: when the writer sent the command (Unix ns).
	sentAt int64
	// all: the command is RL.ALL, whose reply is read into rep.
	all bool
	rep allReply
	// deadline: when the call ends if not answered (Unix ns; 0: never).
	deadline int64
}

const (
	slotWaiting int32 = iota
	slotDone
	slotGone
	// slotExpired: its deadline passed; the caller is told so and leaves,
	// the reader drops the reply.
	slotExpired
)

var slots = sync.Pool{New: func() any { return &slot{done: make(chan struct{}, 1)} }}

// do sends argv and waits for its reply, the context's end or the
// deadline (Unix ns; 0: none), whichever comes first. A call given up
// this way may still run on the server; its reply is read and dropped,
// and the connection stays in use. An RL.ALL reply (all) is read into
// into, and the reply is then filledInto: nothing is allocated for it.
func (c *pipeConn) do(ctx context.Context, argv []any, all bool, deadline int64, into *allReply) (any, error) {
	l, err := c.link(ctx, deadline)
	if err != nil {
		return nil, err
	}
	s := slots.Get().(*slot)
	s.all, s.deadline = all, deadline
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		slots.Put(s)
		return nil, err
	}
	l.out = appendCommand(l.out, argv)
	l.queued = append(l.queued, s)
	if !l.woken {
		l.woken = true
		// Under the lock: fail closes the channel under it.
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	if deadline != 0 && (l.armed == 0 || deadline < l.armed) {
		l.arm(deadline)
	}
	l.mu.Unlock()
	if done := ctx.Done(); done == nil {
		<-s.done
	} else {
		select {
		case <-s.done:
		case <-done:
			if s.state.CompareAndSwap(slotWaiting, slotGone) {
				return nil, ctx.Err()
			}
			<-s.done // delivered or expired meanwhile
		}
	}
	if s.state.Load() == slotExpired {
		// Still in the link's lists: never reused.
		return nil, context.DeadlineExceeded
	}
	reply, err := s.reply, s.err
	if r, ok := reply.(*allReply); ok && r == &s.rep {
		*into = s.rep
		reply = filledInto
	}
	s.reply, s.err = nil, nil
	s.state.Store(slotWaiting)
	slots.Put(s)
	return reply, err
}

// arm sets the expiry timer for deadline (under l.mu).
func (l *link) arm(deadline int64) {
	l.armed = deadline
	l.expiry.Reset(time.Duration(deadline - time.Now().UnixNano()))
}

// expire ends the calls whose deadline passed, written or still queued,
// and arms the timer for the earliest deadline left.
func (l *link) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = 0
	if l.err != nil {
		return
	}
	now, next := time.Now().UnixNano(), int64(0)
	for _, list := range [2][]*slot{l.sent[l.head:], l.queued} {
		for _, s := range list {
			if s == nil || s.deadline == 0 || s.state.Load() != slotWaiting {
				continue
			}
			if s.deadline <= now {
				if s.state.CompareAndSwap(slotWaiting, slotExpired) {
					s.done <- struct{}{}
				}
			} else if next == 0 || s.deadline < next {
				next = s.deadline
			}
		}
	}
	if next != 0 {
		l.arm(next)
	}
}

// deliver hands a reply to its caller, or drops it if the caller left.
func (s *slot) deliver(reply any, err error) {
	s.reply, s.err = reply, err
	if s.state.CompareAndSwap(slotWaiting, slotDone) {
		s.done <- struct{}{}
	}
}

// awaitDial waits for a dial under way to end, or for the caller's context
// or deadline (a nil timeout: none) to end first.
func awaitDial(ctx context.Context, dialing <-chan struct{}, timeout <-chan time.Time) error {
	select {
	case <-dialing:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout:
		return context.DeadlineExceeded
	}
}

// link is the connection to send on, dialled if there is none; callers
// arriving during a dial wait for it, or for their context's end or their
// deadline (Unix ns; 0: none).
func (c *pipeConn) link(ctx context.Context, deadline int64) (*link, error) {
	c.mu.Lock()
	if l := c.cur; l != nil && !c.closed {
		c.mu.Unlock()
		return l, nil
	}
	var timeout <-chan time.Time
	if deadline != 0 {
		t := time.NewTimer(time.Duration(deadline - time.Now().UnixNano()))
		defer t.Stop()
		timeout = t.C
	}
	for {
		if c.closed {
			c.mu.Unlock()
			return nil, errConnClosed
		}
		if c.cur != nil {
			l := c.cur
			c.mu.Unlock()
			return l, nil
		}
		if c.dialing == nil {
			break
		}
		dialing := c.dialing
		c.mu.Unlock()
		if err := awaitDial(ctx, dialing, timeout); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.cur == nil && c.dialErr != nil {
			err := c.dialErr
			c.mu.Unlock()
			return nil, err
		}
	}
	dialing := make(chan struct{})
	c.dialing, c.dialErr = dialing, nil
	c.mu.Unlock()
	// The dial goes on if this caller leaves: the next callers use it.
	go c.dial(dialing)
	if err := awaitDial(ctx, dialing, timeout); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		if c.dialErr != nil {
			return nil, c.dialErr
		}
		return nil, errConnClosed
	}
	return c.cur, nil
}

// dial opens a connection as go-redis would (its Dialer, TLS, AUTH,
// SELECT, CLIENT SETNAME), within DialTimeout, and starts its goroutines.
func (c *pipeConn) dial(dialing chan struct{}) {
	l, err := c.open()
	c.mu.Lock()
	if err == nil && c.closed {
		_ = l.nc.Close()
		err = errConnClosed
	}
	if err == nil {
		c.cur = l
		go l.write()
		go l.read(c)
		if l.timeout > 0 {
			go l.watch()
		}
	}
	c.dialing, c.dialErr = nil, err
	c.mu.Unlock()
	close(dialing)
}

func (c *pipeConn) open() (*link, error) {
	o := c.opt
	ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout)
	defer cancel()
	dialer := o.Dialer
	if dialer == nil {
		dialer = redis.NewDialer(o)
	}
	nc, err := dialer(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(o.DialTimeout))
	r := bufio.NewReaderSize(nc, 16<<10)
	var hello [][]any
	user, pass := o.Username, o.Password
	switch {
	case o.CredentialsProviderContext != nil:
		if user, pass, err = o.CredentialsProviderContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
	case o.CredentialsProvider != nil:
		user, pass = o.CredentialsProvider()
	}
	switch {
	case user != "" && pass != "":
		hello = append(hello, []any{"AUTH", user, pass})
	case pass != "":
		hello = append(hello, []any{"AUTH", pass})
	}
	if o.DB != 0 {
		hello = append(hello, []any{"SELECT", strconv.Itoa(o.DB)})
	}
	if o.ClientName != "" {
		hello = append(hello, []any{"CLIENT", "SETNAME", o.ClientName})
	}
	var out []byte
	for _, argv := range hello {
		out = appendCommand(out, argv)
	}
	if len(out) > 0 {
		if _, err := nc.Write(out); err != nil {
			_ = nc.Close()
			return nil, err
		}
		for _, argv := range hello {
			line, err := readLine(r)
			var reply any
			if err == nil {
				reply, err = readReply(r, line)
			}
			if err == nil {
				// %v, not %w: a refused handshake is the connection's
				// failure (the breaker counts it), not an answer to a call.
				if e, ok := reply.(error); ok {
					err = fmt.Errorf("librl: the pipelined connection's %s: %v", argv[0], e)
				}
			}
			if err != nil {
				_ = nc.Close()
				return nil, err
			}
		}
	}
	_ = nc.SetDeadline(time.Time{})
	timeout := o.ReadTimeout
	if timeout < 0 {
		timeout = 0
	}
	l := &link{nc: nc, rd: r, wake: make(chan struct{}, 1), timeout: timeout}
	l.expiry = time.AfterFunc(time.Hour, l.expire)
	l.expiry.Stop()
	return l, nil
}

// write sends every command queued since the last write in one write.
func (l *link) write() {
	var spare []byte
	for range l.wake {
		// Let the goroutines that are ready to run queue their calls
		// first: one write for all of them, not one each.
		runtime.Gosched()
		l.mu.Lock()
		if l.err != nil {
			l.mu.Unlock()
			return
		}
		out := l.out
		l.out = spare[:0]
		l.push(l.queued, time.Now().UnixNano())
		clear(l.queued)
		l.queued = l.queued[:0]
		l.woken = false
		l.mu.Unlock()
		if len(out) == 0 {
			spare = out
			continue
		}
		if _, err := l.nc.Write(out); err != nil {
			l.fail(err)
			return
		}
		spare = out
	}
}

// push appends the slots of the commands written at now to sent (under
// l.mu). The slots already answered are dropped from its front first once
// they are half of it: under steady load sent never empties, and would
// otherwise grow for ever.
func (l *link) push(written []*slot, now int64) {
	for _, s := range written {
		s.sentAt = now
	}
	if l.head > 0 && l.head >= len(l.sent)/2 {
		n := copy(l.sent, l.sent[l.head:])
		clear(l.sent[n:])
		l.sent, l.head = l.sent[:n], 0
	}
	l.sent = append(l.sent, written...)
}

// read hands each reply to the oldest caller waiting, until the
// connection fails; then the next call dials again.
func (l *link) read(c *pipeConn) {
	for {
		// The reply's first line (the wait for it), then its caller,
		// whose call says how to read the rest.
		line, err := readLine(l.rd)
		if err != nil {
			l.fail(err)
			c.mu.Lock()
			if c.cur == l {
				c.cur = nil
			}
			c.mu.Unlock()
			return
		}
		l.mu.Lock()
		if l.head == len(l.sent) {
			l.mu.Unlock()
			l.fail(errors.New("librl: the pipelined connection got a reply to no call"))
			continue // the read fails next, the connection being closed
		}
		s := l.sent[l.head]
		l.sent[l.head] = nil
		l.head++
		if l.head == len(l.sent) {
			l.sent, l.head = l.sent[:0], 0
		}
		l.mu.Unlock()
		var reply any
		if s.all {
			// Into the slot, whose caller copies it out: a reply read
			// for a caller gone or expired is dropped with its slot.
			reply, err = readAllInto(l.rd, line, &s.rep)
		} else {
			reply, err = readReply(l.rd, line)
		}
		if err != nil {
			// The rest of the stream cannot be trusted.
			s.deliver(nil, err)
			l.fail(err)
			continue // the next read fails, the connection being closed
		}
		if e, ok := reply.(serverError); ok {
			s.deliver(nil, e)
		} else {
			s.deliver(reply, nil)
		}
	}
}

// watch takes the connection for dead when the oldest call written has
// waited longer than the client's ReadTimeout for its reply.
func (l *link) watch() {
	tick := time.NewTicker(max(l.timeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for range tick.C {
		l.mu.Lock()
		failed := l.err != nil
		stale := !failed && l.head < len(l.sent) && time.Now().UnixNano()-l.sent[l.head].sentAt > int64(l.timeout)
		l.mu.Unlock()
		if failed {
			return
		}
		if stale {
			l.fail(fmt.Errorf("librl: the pipelined connection: no reply within the client's ReadTimeout (%v)", l.timeout))
			return
		}
	}
}

// fail closes the connection and fails every call queued or written on
// it with err (the first failure's).
func (l *link) fail(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	waiting := append(l.sent[l.head:], l.queued...)
	l.sent, l.queued, l.head = nil, nil, 0
	close(l.wake)
	l.expiry.Stop()
	l.mu.Unlock()
	_ = l.nc.Close()
	for _, s := range waiting {
		s.deliver(nil, err)
	}
}

// close fails the calls under way and closes the connection for good.
func (c *pipeConn) close() {
	c.mu.Lock()
	c.closed = true
	l := c.cur
	c.cur = nil
	c.mu.Unlock()
	if l != nil {
		l.fail(errConnClosed)
	}
}
