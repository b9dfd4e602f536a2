package librl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RESP2 for the pipelined connection (conn.go): commands as arrays of
// bulk strings, replies read into the values go-redis gives (int64,
// string, []any, nil), an error reply as a redis.Error.

// serverError is an error reply; it is a redis.Error, as go-redis's.
type serverError string

func (e serverError) Error() string { return string(e) }

// RedisError marks it as a redis.Error.
func (serverError) RedisError() {}

var _ redis.Error = serverError("")

// errProtocol: the server sent what RESP2 does not allow here.
var errProtocol = errors.New("librl: the pipelined connection read a malformed reply")

// appendCommand appends argv as a RESP array of bulk strings.
func appendCommand(b []byte, argv []any) []byte {
	b = strconv.AppendInt(append(b, '*'), int64(len(argv)), 10)
	b = append(b, '\r', '\n')
	for _, a := range argv {
		switch v := a.(type) {
		case string:
			b = appendBulk(b, v)
		case int64:
			b = appendBulk(b, strconv.FormatInt(v, 10))
		case int:
			b = appendBulk(b, strconv.Itoa(v))
		case []byte:
			b = appendBulk(b, string(v))
		default:
			b = appendBulk(b, fmt.Sprint(v))
		}
	}
	return b
}

func appendBulk(b []byte, s string) []byte {
	b = strconv.AppendInt(append(b, '$'), int64(len(s)), 10)
	b = append(append(b, '\r', '\n'), s...)
	return append(b, '\r', '\n')
}

// readLine reads a reply's first line: its type byte and its body,
// valid until the next read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	n := len(line)
	if n < 3 || line[n-2] != '\r' {
		return nil, errProtocol
	}
	return line[:n-2], nil
}

// readReply reads one reply, its first line already read. A nil bulk
// string or array at the top is redis.Nil, as go-redis returns it; an
// error reply is a serverError value (not an error return: the
// connection is fine).
func readReply(r *bufio.Reader, line []byte) (any, error) {
	v, err := readFrom(r, line)
	if err == nil && v == nil {
		return nil, redis.Nil
	}
	return v, err
}

func readValue(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	return readFrom(r, line)
}

func readFrom(r *bufio.Reader, line []byte) (any, error) {
	body := line[1:]
	switch line[0] {
	case ':':
		n, err := parseInt(body)
		if err != nil {
			return nil, err
		}
		return n, nil
	case '+':
		return string(body), nil
	case '-':
		return serverError(body), nil
	case '$':
		size, err := parseInt(body)
		if err != nil || size < -1 {
			return nil, errProtocol
		}
		if size == -1 {
			return nil, nil
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[size] != '\r' || buf[size+1] != '\n' {
			return nil, errProtocol
		}
		return string(buf[:size]), nil
	case '*':
		size, err := parseInt(body)
		if err != nil || size < -1 {
			return nil, errProtocol
		}
		if size == -1 {
			return nil, nil
		}
		arr := make([]any, size)
		for i := range arr {
			if arr[i], err = readValue(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, errProtocol
}

// allReply is RL.ALL's reply read without a value per integer: the two
// head integers and each clause's leading integers (at most seven: a
// limiter's six and a lease id), which is all allDecisionFrom reads.
// ints counts a row's leading integers (a row that has fewer than the
// decision needs is malformed, as in the generic reply). The first rows
// are held in the value itself, with no pointer into it, so that a copy
// is a plain copy and one on the stack stays there.
type allReply struct {
	head  [2]int64
	heads int
	n     int // rows
	small [2]allRow
	more  []allRow // the rows after small's
}

type allRow struct {
	v    [7]int64
	ints int
}

// row is the i-th row (i < n).
func (a *allReply) row(i int) *allRow {
	if i < len(a.small) {
		return &a.small[i]
	}
	return &a.more[i-len(a.small)]
}

func (a *allReply) add(row allRow) {
	if a.n < len(a.small) {
		a.small[a.n] = row
	} else {
		a.more = append(a.more, row)
	}
	a.n++
}

// readAll reads RL.ALL's reply, its first line already read: an array
// into an allReply, anything else (an error reply) as readReply does.
// Elements past what a decision reads are read and ignored, whatever they
// hold, as the generic reader's callers ignore them.
func readAll(r *bufio.Reader, line []byte) (any, error) {
	return readAllInto(r, line, &allReply{})
}

// readAllInto is readAll into dst (overwritten whole; its rows past
// small's in a slice of their own, never one a copy of dst still holds):
// the reply is dst itself when it is an array.
func readAllInto(r *bufio.Reader, line []byte, dst *allReply) (any, error) {
	if line[0] != '*' {
		return readReply(r, line)
	}
	size, err := parseInt(line[1:])
	if err != nil || size < -1 {
		return nil, errProtocol
	}
	if size == -1 {
		return nil, redis.Nil
	}
	*dst = allReply{}
	for i := range size {
		if i < 2 {
			if n, ok, err := readIntOrSkip(r); err != nil {
				return nil, err
			} else if ok && dst.heads == int(i) {
				dst.head[i], dst.heads = n, dst.heads+1
			}
			continue
		}
		row, err := readRow(r)
		if err != nil {
			return nil, err
		}
		dst.add(row)
	}
	return dst, nil
}

// readRow reads one clause's reply: up to seven leading integers kept.
func readRow(r *bufio.Reader) (allRow, error) {
	var row allRow
	line, err := readLine(r)
	if err != nil {
		return row, err
	}
	if line[0] != '*' {
		_, err := readFrom(r, line)
		return row, err
	}
	size, err := parseInt(line[1:])
	if err != nil || size < -1 {
		return row, errProtocol
	}
	for i := range size {
		n, ok, err := readIntOrSkip(r)
		if err != nil {
			return row, err
		}
		if ok && i < 7 && row.ints == int(i) {
			row.v[i], row.ints = n, row.ints+1
		}
	}
	return row, nil
}

// readIntOrSkip reads one value: an integer's value, or ok false for
// anything else, read whole and dropped.
func readIntOrSkip(r *bufio.Reader) (int64, bool, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, false, err
	}
	if line[0] == ':' {
		n, err := parseInt(line[1:])
		return n, err == nil, err
	}
	_, err = readFrom(r, line)
	return 0, false, err
}

// parseInt reads a RESP integer without allocating.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, errProtocol
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, errProtocol
		}
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<63-1-9)/10 {
			return 0, errProtocol
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}
