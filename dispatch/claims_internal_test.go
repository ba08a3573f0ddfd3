package dispatch

import (
	"fmt"
	"testing"
)

// TestClaimBookVerdicts: a claim in this process's name may be withdrawn only
// when no call of the process asks for its key, holds it, or ended a lease on
// it without writing its end.
func TestClaimBookVerdicts(t *testing.T) {
	k := bookKey{"acme", "k"}
	tests := []struct {
		name string
		do   func(b *claimBook)
		want withdrawVerdict
	}{
		{"nothing known", func(*claimBook) {}, withdrawYes},
		{"a Claim in flight", func(b *claimBook) { b.asking(k) }, withdrawLater},
		{"a Claim refused", func(b *claimBook) { b.asking(k); b.answered(k, false) }, withdrawYes},
		{"a lease held", func(b *claimBook) { b.asking(k); b.answered(k, true) }, withdrawNever},
		{"a lease ended, its end written", func(b *claimBook) { b.asking(k); b.answered(k, true); b.ended(k, true) }, withdrawYes},
		{"a lease ended unwritten", func(b *claimBook) { b.asking(k); b.answered(k, true); b.ended(k, false) }, withdrawNever},
		{"a lease ended unwritten, the key claimed and ended again", func(b *claimBook) {
			b.asking(k)
			b.answered(k, true)
			b.ended(k, false)
			b.asking(k)
			b.answered(k, true)
			b.ended(k, true)
		}, withdrawNever},
		{"another key held", func(b *claimBook) { o := bookKey{"acme", "other"}; b.asking(o); b.answered(o, true) }, withdrawYes},
		{"the same digest held for another tenant", func(b *claimBook) { o := bookKey{"globex", "k"}; b.asking(o); b.answered(o, true) }, withdrawYes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b claimBook
			tt.do(&b)
			if got := b.mayWithdraw(k); got != tt.want {
				t.Errorf("mayWithdraw = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestClaimBookForgets: entries of keys with nothing left to know are dropped,
// so the book does not grow with the calls; a tainted key is kept.
func TestClaimBookForgets(t *testing.T) {
	var b claimBook
	for i := range 1000 {
		k := bookKey{"acme", fmt.Sprint(i)}
		b.asking(k)
		b.answered(k, i%2 == 0)
		if i%2 == 0 {
			b.ended(k, true)
		}
		if b.startSettling(k) {
			b.doneSettling(k)
		}
	}
	if n := len(b.keys); n != 0 {
		t.Fatalf("%d keys remembered after 1,000 calls that ended cleanly, want 0", n)
	}
	tainted := bookKey{"acme", "tainted"}
	b.asking(tainted)
	b.answered(tainted, true)
	b.ended(tainted, false)
	if n := len(b.keys); n != 1 || b.keys[tainted] == nil {
		t.Fatalf("keys remembered: %v, want only the tainted one", b.keys)
	}
}

// TestClaimBookBounds: no more than maxSettlers settlers run at once, and none
// starts once the book holds maxBookKeys keys.
func TestClaimBookBounds(t *testing.T) {
	var b claimBook
	for i := range maxSettlers {
		if !b.startSettling(bookKey{"acme", fmt.Sprint(i)}) {
			t.Fatalf("settler %d refused, the bound is %d", i+1, maxSettlers)
		}
	}
	extra := bookKey{"acme", "extra"}
	if b.startSettling(extra) {
		t.Fatalf("settler %d started, the bound is %d", maxSettlers+1, maxSettlers)
	}
	b.doneSettling(bookKey{"acme", "0"})
	if !b.startSettling(extra) {
		t.Fatal("a settler refused after one ended")
	}
	for i := range maxSettlers {
		b.doneSettling(bookKey{"acme", fmt.Sprint(i)})
	}
	b.doneSettling(extra)

	// Tainted keys fill the book: past maxBookKeys no settler starts.
	var full claimBook
	for i := range maxBookKeys {
		k := bookKey{"acme", fmt.Sprint(i)}
		full.asking(k)
		full.answered(k, true)
		full.ended(k, false)
	}
	if full.startSettling(bookKey{"acme", "new"}) {
		t.Fatalf("a settler started with %d keys in the book, the bound is %d", len(full.keys), maxBookKeys)
	}
}
