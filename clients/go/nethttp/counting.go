package nethttp

import (
	"bufio"
	"net"
	"net/http"

	librl "github.com/librl/librl/clients/go"
)

// Counting after the response (docs/http.md): `count: failed` refunds a
// request whose status is below 400, `count: succeeded` one whose status
// is 400 or above, when the handler writes its status and before the
// response goes out (a client's next request sees the refund).

// settle is the refund of an admitted request's count-after-response
// policies, given the status the handler wrote.
func (m *engine) settle(checks []check, status int) {
	var back []check
	for _, c := range checks {
		if c.p.count != "all" && (c.p.count == "failed") == (status < 400) {
			back = append(back, c)
		}
	}
	m.refund(back)
}

// counted is the checks a served request's exchange counted: all but the
// shadow policies' groups (one subject's shadow clauses) that denied.
func counted(checks []check, decisions []librl.Decision) []check {
	out := make([]check, 0, len(checks))
	for _, c := range checks {
		denied := false
		for i, o := range checks {
			denied = denied || (c.p.shadow && o.p.shadow && o.s.tag == c.s.tag && !decisions[i].Allowed)
		}
		if !denied {
			out = append(out, c)
		}
	}
	return out
}

// countsAfter: some policy counts only failed or only succeeded requests.
func countsAfter(checks []check) bool {
	for _, c := range checks {
		if c.p.count != "all" {
			return true
		}
	}
	return false
}

// refundWriter calls before once, with the status, when the handler
// writes it (WriteHeader, or the first Write or Flush).
type refundWriter struct {
	http.ResponseWriter
	before func(status int)
	done   bool
}

func (w *refundWriter) status(code int) {
	if !w.done {
		w.done = true
		w.before(code)
	}
}

func (w *refundWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.status(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refundWriter) Write(b []byte) (int, error) {
	w.status(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *refundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack passes a connection upgrade (WebSocket) through; the request
// counts as a 101 response.
func (w *refundWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	w.status(http.StatusSwitchingProtocols)
	return h.Hijack()
}

func (w *refundWriter) Flush() {
	w.status(http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
