package nethttp

import "time"

// Fail modes (docs/http.md, Fail modes): when Redis cannot answer within
// the timeout, fail: open passes the request without headers and fail:
// closed answers 503; the refunds that keep a refused request uncounted
// are the exchange's (decide.go).

// failed is the outcome the fail mode gives a request Redis did not
// answer for, logging it at most once every 10 seconds.
func (m *engine) failed(err error) Outcome {
	if m.c.failClosed {
		m.warnOnce("librl: Redis did not answer (" + err.Error() + "); refusing requests (fail: closed)")
		return FailClosed
	}
	m.warnOnce("librl: Redis did not answer (" + err.Error() + "); passing requests unlimited (fail: open)")
	return FailOpen
}

// warnOnce logs at most once every 10 seconds.
func (m *engine) warnOnce(msg string) {
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if now-last < int64(10*time.Second) || !m.lastWarn.CompareAndSwap(last, now) {
		return
	}
	m.log.Warn(msg)
}
