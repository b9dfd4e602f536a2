package nethttp

import (
	"strings"
	"testing"
)

// What the vectors (conformance/vectors/paths.json) cannot say: the
// canonical path takes time linear in the path however deep its encoding
// (a quadratic one would let 2^16 layers of %25 cost seconds).
func TestCanonicalPathIsLinearInDeepEncodings(t *testing.T) {
	if got := canonicalPath("/%" + strings.Repeat("25", 1<<16) + "41"); got != "/A" {
		t.Fatalf("%q", got)
	}
}

// A path already canonical and in lower case is used as it is.
func TestCanonicalPathAllocatesNothingForACanonicalPath(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = canonicalPath("/api/v1/items") }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
