package demo

import (
	"strings"
	"testing"
)

func TestPNRsAreDistinct(t *testing.T) {
	seen := make(map[string]uint32, 200_000)
	for n := uint32(1); n <= 200_000; n++ {
		p := pnr(n)
		if len(p) != 6 || strings.Trim(p, pnrAlphabet) != "" {
			t.Fatalf("pnr(%d) = %q", n, p)
		}
		if m, dup := seen[p]; dup {
			t.Fatalf("pnr(%d) = pnr(%d) = %q", n, m, p)
		}
		seen[p] = n
	}
}
