package librl

import (
	"bufio"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Under steady load the written calls' queue never empties: it must not
// keep the answered ones, nor grow with the calls ever made.
func TestWrittenCallsDoNotAccumulate(t *testing.T) {
	l := &link{}
	var in []*slot
	for range 3 {
		in = append(in, &slot{})
	}
	for round := range 10_000 {
		l.push(in, int64(round))
		// The reader answers all but the last one written.
		for l.head < len(l.sent)-1 {
			l.sent[l.head] = nil
			l.head++
		}
	}
	if len(l.sent) > 8 || cap(l.sent) > 16 {
		t.Fatalf("after 10,000 rounds sent holds %d (capacity %d), head %d", len(l.sent), cap(l.sent), l.head)
	}
	if s := l.sent[len(l.sent)-1]; s != in[2] || s.sentAt != 9_999 {
		t.Fatalf("the last call written is not the last in sent")
	}
}

// RL.ALL's reply read as an allReply gives the decision, or the error,
// that the generic reply gives, whatever the reply holds.
func TestAllReplyDecidesAsTheGenericReply(t *testing.T) {
	lease := []*leaseSpec{nil, {}}
	for _, c := range []struct {
		name, wire string
		leases     []*leaseSpec
	}{
		{"admitted", "*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n:7\r\n:0\r\n:1000000000\r\n:999999993\r\n:60000\r\n", nil},
		{"denied, a lease", "*4\r\n:0\r\n:-1\r\n*6\r\n:0\r\n:5\r\n:-1\r\n:5\r\n:0\r\n:900\r\n*7\r\n:1\r\n:1\r\n:0\r\n:2\r\n:1\r\n:0\r\n:42\r\n", lease},
		{"longer rows and replies", "*4\r\n:1\r\n:0\r\n*9\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:10\r\n:8\r\n$3\r\nnew\r\n*1\r\n:1\r\n$2\r\nxx\r\n", nil},
		{"three clauses", "*5\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:10\r\n*6\r\n:1\r\n:2\r\n:0\r\n:4\r\n:2\r\n:20\r\n*6\r\n:1\r\n:3\r\n:0\r\n:5\r\n:2\r\n:30\r\n", nil},
		{"a short row", "*3\r\n:1\r\n:0\r\n*5\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n", nil},
		{"a row without its lease", "*4\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:10\r\n*6\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:10\r\n", lease},
		{"a head that is not an integer", "*3\r\n+OK\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:10\r\n", nil},
		{"a row that is not an array", "*3\r\n:1\r\n:0\r\n:5\r\n", nil},
		{"no rows", "*2\r\n:1\r\n:0\r\n", nil},
		{"a string in a row", "*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n$1\r\n1\r\n:0\r\n:3\r\n:2\r\n:10\r\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			generic, gerr := decodeAll(t, c.wire, c.leases, readReply)
			fast, ferr := decodeAll(t, c.wire, c.leases, readAll)
			if (gerr == nil) != (ferr == nil) || !reflect.DeepEqual(generic, fast) {
				t.Fatalf("generic %+v, %v; allReply %+v, %v", generic, gerr, fast, ferr)
			}
		})
	}
	// An error reply stays the server's error; a nil one is redis.Nil.
	for _, wire := range []string{"-ERR wrong\r\n", "*-1\r\n"} {
		r := bufio.NewReader(strings.NewReader(wire))
		line, _ := readLine(r)
		fast, ferr := readAll(r, line)
		r = bufio.NewReader(strings.NewReader(wire))
		line, _ = readLine(r)
		generic, gerr := readReply(r, line)
		if !reflect.DeepEqual(fast, generic) || !errors.Is(ferr, gerr) && ferr != gerr {
			t.Fatalf("%q: allReply %#v, %v; generic %#v, %v", wire, fast, ferr, generic, gerr)
		}
	}
}

func decodeAll(t *testing.T, wire string, leases []*leaseSpec,
	read func(*bufio.Reader, []byte) (any, error)) (AllDecision, error) {
	t.Helper()
	r := bufio.NewReader(strings.NewReader(wire))
	line, err := readLine(r)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := read(r, line)
	if err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != 0 {
		t.Fatalf("%d bytes left unread", r.Buffered())
	}
	return allDecisionFrom(reply, leases)
}
