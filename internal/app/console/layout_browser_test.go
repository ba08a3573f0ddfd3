package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
)

// realCallID is a call id as agents' SDKs make them: "call_" and 24 hex.
func realCallID(t *testing.T) string { return "call_" + randomHex(t, 12) }

// realRunID is a run id as long as a ULID-named run's.
func realRunID(t *testing.T) string { return "run_01JF" + strings.ToUpper(randomHex(t, 11)) }

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// lose books a seat whose answer is lost: an indeterminate record with
// real-length ids.
func (s *system) lose(t *testing.T, tenant, flight string) events.Answer {
	t.Helper()
	a := s.call(t, tenant, realRunID(t), realCallID(t),
		fmt.Sprintf(`{"flight":%q,"seats":1,"request_id":%q,"fail_after_effect":true}`, flight, "req-"+randomHex(t, 8)))
	if a.Kind != events.KindIndeterminate {
		t.Fatalf("the lost booking: %+v", a)
	}
	return a
}

func signInShared(t *testing.T, s *system, b context.Context, name string) {
	t.Helper()
	step(t, b, "signing in",
		chromedp.Navigate(s.url+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.SendKeys(chromedp.CSS(`input[name=operator]`), name),
		chromedp.Click(chromedp.CSS(`body.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
	)
}

// box is an element's bounding box and the viewport's size.
type box struct {
	Left, Right, Top, Bottom float64
	VW, VH                   float64
	PageWidth                float64
	Text                     string
}

// boxes returns where each element of sel is, after scrolling the window
// vertically to it (the page may be taller than the window). Nothing is
// scrolled sideways: an element cut off by a scrolling ancestor (the records
// card) is reported as its visible part, so it counts as out of sight.
func boxes(t *testing.T, b context.Context, sel string) []box {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 30*time.Second)
	defer cancel()
	js := fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(function (e) {
		var r = e.getBoundingClientRect();
		if (r.top < 0 || r.bottom > window.innerHeight) {
			window.scrollBy(0, r.top - window.innerHeight / 2);
			r = e.getBoundingClientRect();
		}
		var left = r.left, right = r.right, top = r.top, bottom = r.bottom;
		for (var p = e.parentElement; p; p = p.parentElement) {
			var st = getComputedStyle(p);
			if (st.overflowX !== 'visible' || st.overflowY !== 'visible') {
				var c = p.getBoundingClientRect();
				// the part of e that p shows: beyond p's edges is cut off
				if (left < c.left || right > c.right) { right = Math.min(right, c.right); left = Math.max(left, c.left); if (right <= left) { left = right = 1e9; } }
				if (top < c.top || bottom > c.bottom) { bottom = Math.min(bottom, c.bottom); top = Math.max(top, c.top); }
			}
		}
		var cut = (right - left) < (r.right - r.left) - 0.5 || (bottom - top) < (r.bottom - r.top) - 0.5;
		return {Left: left, Right: cut ? 1e9 : right, Top: top, Bottom: bottom, VW: window.innerWidth, VH: window.innerHeight,
			PageWidth: document.documentElement.scrollWidth, Text: e.textContent};
	})`, sel)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]box](js))
	if err != nil {
		t.Fatalf("measuring %s: %v", sel, err)
	}
	return out
}

// TestBrowserActionsInView: at 1280×800 and 1440×900, with real-length ids,
// every Complete and Release button of the records table lies inside the
// window without scrolling sideways, and both work: Complete resolves, and
// Release asks first, then releases.
func TestBrowserActionsInView(t *testing.T) {
	for _, size := range []struct{ w, h int }{{1280, 800}, {1440, 900}} {
		t.Run(fmt.Sprintf("%dx%d", size.w, size.h), func(t *testing.T) {
			s := startSystem(t)
			b := newBrowserSized(t, size.w, size.h)
			signInShared(t, s, b, "alice")
			first, second := s.lose(t, "acme", "BA117"), s.lose(t, "acme", "LH400")
			step(t, b, "opening the records",
				chromedp.Navigate(s.url+"/?tenant=acme"),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+second.Key+`"]`)),
			)
			bs := boxes(t, b, `#records tbody button`)
			if len(bs) != 4 {
				t.Fatalf("%d buttons in the records table, want 4", len(bs))
			}
			for _, x := range bs {
				if x.Left < 0 || x.Right > x.VW || x.Top < 0 || x.Bottom > x.VH || x.PageWidth > x.VW {
					t.Errorf("button %q at x %.0f–%.0f, y %.0f–%.0f: outside the %.0f×%.0f window (page %.0f wide)",
						x.Text, x.Left, x.Right, x.Top, x.Bottom, x.VW, x.VH, x.PageWidth)
				}
			}
			row1, row2 := `tr[data-key="`+first.Key+`"]`, `tr[data-key="`+second.Key+`"]`
			step(t, b, "completing the first key",
				chromedp.SendKeys(chromedp.CSS(row1+` input[name=outcome]`), "PNR-K7Q2ZD"),
				chromedp.Click(chromedp.CSS(row1+` form.complete button`)),
				chromedp.WaitVisible(chromedp.CSS(`#flash`)),
			)
			if got := text(t, b, `#flash`); !strings.Contains(got, "Resolved "+first.Key[:12]) || !strings.Contains(got, "completed") {
				t.Fatalf("after Complete the page says %q", got)
			}
			step(t, b, "asking to release the second key",
				chromedp.Click(chromedp.CSS(row2+` form.release button`)),
				chromedp.WaitVisible(chromedp.CSS(`#confirm-release`)),
			)
			if got := text(t, b, `#confirm`); !strings.Contains(got, "run again") || !strings.Contains(got, "second effect") || !strings.Contains(got, second.CallID) {
				t.Errorf("the confirmation says %q: want what releasing allows, and the call", got)
			}
			if cb := boxes(t, b, `#confirm-release`); len(cb) != 1 || cb[0].Right > cb[0].VW || cb[0].Bottom > cb[0].VH {
				t.Errorf("the confirm button is out of sight: %+v", cb)
			}
			step(t, b, "confirming the release",
				chromedp.Click(chromedp.CSS(`#confirm-release`)),
				chromedp.WaitVisible(chromedp.CSS(`#flash`)),
			)
			if got := text(t, b, `#flash`); !strings.Contains(got, "released") {
				t.Fatalf("after confirming, the page says %q", got)
			}
			step(t, b, "seeing no record left", chromedp.WaitVisible(chromedp.CSS(`#records p.empty`)))
		})
	}
}

// TestBrowserLive: with a tenant's records open, a new indeterminate record
// appears in the table without a reload, and once it is resolved elsewhere
// its row goes and its feed item's "resolve…" link is replaced by the
// resolution; the feed filter hides a kind at once.
func TestBrowserLive(t *testing.T) {
	s := startSystem(t)
	b := newBrowserSized(t, 1280, 800)
	signInShared(t, s, b, "alice")
	step(t, b, "opening acme's empty records",
		chromedp.Navigate(s.url+"/?tenant=acme"),
		chromedp.WaitVisible(chromedp.CSS(`#records p.empty`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
	)
	lost := s.lose(t, "acme", "AF1280")
	row := `tr[data-key="` + lost.Key + `"]`
	item := `#feed li[data-kind=indeterminate][data-key="` + lost.Key + `"]`
	step(t, b, "waiting for the record to appear by itself",
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(item+` a.resolve`)),
	)
	other := s.lose(t, "globex", "KL1004") // another tenant's: not in acme's table
	step(t, b, "waiting for globex's event", chromedp.WaitVisible(chromedp.CSS(`#feed li[data-key="`+other.Key+`"]`)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.adm.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: lost.Key, Action: events.ActionComplete, Outcome: "PNR-1", Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	step(t, b, "waiting for the row to go and the link to be replaced",
		chromedp.WaitNotPresent(chromedp.CSS(row)),
		chromedp.WaitNotPresent(chromedp.CSS(item+` a.resolve`)),
		chromedp.WaitVisible(chromedp.CSS(item+` .settled`)),
	)
	if got := text(t, b, item+` .settled`); !strings.Contains(got, "complete by bob") {
		t.Errorf("the settled item says %q", got)
	}
	if n := len(boxes(t, b, `#records tbody tr`)); n != 0 {
		t.Errorf("%d rows left in acme's table, want none (globex's is not acme's)", n)
	}
	step(t, b, "hiding indeterminate items",
		chromedp.Click(chromedp.CSS(`#filter input[value=indeterminate]`)),
		chromedp.WaitNotVisible(chromedp.CSS(item)),
	)
	step(t, b, "showing them again",
		chromedp.Click(chromedp.CSS(`#filter input[value=indeterminate]`)),
		chromedp.WaitVisible(chromedp.CSS(item)),
	)
}
