package hub

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"herd/agent"
	"herd/models"
	"herd/server/render"
	"herd/server/render/rendertest"
)

// liveHarness drives a liveText by hand: a fake clock, every frame kept.
type liveHarness struct {
	t       *testing.T
	l       *liveText
	clock   time.Time
	frames  []aiHTMLFrame
	watched bool
	// page is what a page holds per message: the HTML it rebuilt from the
	// frames, as UTF-16 (JavaScript strings), and its version.
	page    map[string][]uint16
	version map[string]int
}

func newLiveHarness(t *testing.T, md *render.Markdown) *liveHarness {
	h := &liveHarness{t: t, clock: time.Unix(1e9, 0), watched: true, page: map[string][]uint16{}, version: map[string]int{}}
	h.l = newLiveText(md, func(_ string, f *frame) {
		var env struct{ Data aiHTMLFrame }
		if err := json.Unmarshal(payloadOf(f), &env); err != nil {
			t.Fatal(err)
		}
		h.frames = append(h.frames, env.Data)
		h.apply(env.Data)
	}, func(string) bool { return h.watched })
	h.l.now = func() time.Time { return h.clock }
	return h
}

// apply is static/markdown-live.js's rule: a whole frame replaces, a diff
// applies only on the version it follows.
func (h *liveHarness) apply(d aiHTMLFrame) {
	html := utf16.Encode([]rune(d.HTML))
	switch {
	case d.Keep == 0:
		h.page[d.MessageID] = html
	case h.version[d.MessageID] == d.Version-1:
		h.page[d.MessageID] = append(h.page[d.MessageID][:d.Keep:d.Keep], html...)
	default:
		return
	}
	h.version[d.MessageID] = d.Version
}

func (h *liveHarness) shown(id string) string { return string(utf16.Decode(h.page[id])) }

// TestLiveRender: while an answer streams, the page rebuilds from the
// frames exactly the HTML of the text so far (multi-byte characters
// included), at most once per liveMinGap, with a whole frame at the start
// and now and then, diffs between them.
func TestLiveRender(t *testing.T) {
	md := render.NewMarkdown()
	h := newLiveHarness(t, md)
	answer := "# Plan 🚀\n\nÉtapes :\n\n- one\n- two **bold**\n\n```go\nfunc main() {\n\tfmt.Println(\"日本\")\n}\n```\n\nDone — ok. " + strings.Repeat("More words 🙂 and more. ", 60)
	var text strings.Builder
	pieces := chunks(answer, 3)
	for _, chunk := range pieces {
		h.l.append("th", "run", "m1", chunk, false)
		text.WriteString(chunk)
		h.clock = h.clock.Add(20 * time.Millisecond)
		n := len(h.frames)
		h.l.renderDue()
		if len(h.frames) > n {
			if got, want := h.shown("m1"), md.Render(text.String()); got != want {
				t.Fatalf("frame %d: the page shows\n%q\nwant\n%q", len(h.frames), got, want)
			}
		}
	}
	h.clock = h.clock.Add(time.Second)
	h.l.renderDue()
	if got, want := h.shown("m1"), md.Render(answer); got != want {
		t.Errorf("the page shows\n%q\nwant the final render\n%q", got, want)
	}
	if !strings.Contains(h.shown("m1"), `<span class="nf">main</span>`) || !strings.Contains(h.shown("m1"), "<li>two <strong>bold</strong></li>") {
		t.Errorf("not rendered: %q", h.shown("m1"))
	}
	duration := time.Duration(len(pieces)) * 20 * time.Millisecond
	if most := int(duration/liveMinGap) + 2; len(h.frames) > most {
		t.Errorf("%d frames over %v, want at most %d (one per %v)", len(h.frames), duration, most, liveMinGap)
	}
	if duration < 2*liveFullAfter {
		t.Fatalf("the answer streams for %v: too short to see a second whole frame", duration)
	}
	diffs, wholes := 0, 0
	for _, f := range h.frames {
		if f.Keep > 0 {
			diffs++
		} else {
			wholes++
		}
	}
	if h.frames[0].Keep != 0 || wholes < 2 || diffs < len(h.frames)*3/4 {
		t.Errorf("%d frames: the first keeps %d, %d whole, %d diffs; want the first and some later ones whole, the rest diffs", len(h.frames), h.frames[0].Keep, wholes, diffs)
	}
}

// TestLiveRenderCatchesUp: a page that missed a frame (or joined late)
// ignores diffs until the next whole frame; a subscriber's resend makes the
// next frame whole at once.
func TestLiveRenderCatchesUp(t *testing.T) {
	md := render.NewMarkdown()
	h := newLiveHarness(t, md)
	step := func(s string) {
		h.l.append("th", "run", "m1", s, false)
		h.clock = h.clock.Add(time.Second)
		h.l.renderDue()
	}
	step("# Title\n\n")
	delete(h.page, "m1")
	h.version["m1"] = 0 // a page that joins now
	step("some text")
	if h.shown("m1") != "" {
		t.Errorf("a late page applied a diff: %q", h.shown("m1"))
	}
	h.l.resend("th")
	h.l.renderDue()
	step(" more")
	if got, want := h.shown("m1"), md.Render("# Title\n\nsome text more"); got != want {
		t.Errorf("after resend the page shows %q, want %q", got, want)
	}
}

// TestLiveRenderLifecycle: nothing is rendered for a thread nobody
// watches; an answer is forgotten when its message is saved or its run
// ends; an answer past liveMaxBytes stops being rendered.
func TestLiveRenderLifecycle(t *testing.T) {
	h := newLiveHarness(t, render.NewMarkdown())
	h.watched = false
	h.l.append("th", "run", "m1", "hello", false)
	if h.l.renderDue(); len(h.frames) != 0 {
		t.Errorf("%d frames for an unwatched thread", len(h.frames))
	}
	h.watched = true
	h.l.append("th", "run", "m1", " world", false)
	h.l.append("th", "run2", "m2", "other", false)
	h.l.renderDue()
	if h.shown("m1") != "<p>hello world</p>\n" {
		t.Errorf("shown %q", h.shown("m1"))
	}
	h.l.committed([]models.Record{{Message: &models.Message{ID: "m1", Type: agent.TypeAI}}})
	h.l.committed([]models.Record{{Event: &models.RunEvent{RunID: "run2", EventType: agent.RunEnd{}.EventType()}}})
	if n := len(h.l.answers); n != 0 {
		t.Errorf("%d answers held after their message was saved and their run ended", n)
	}
	h.l.append("th", "run", "m3", strings.Repeat("x", liveMaxBytes), false)
	h.l.append("th", "run", "m3", "y", false)
	n := len(h.frames)
	h.clock = h.clock.Add(time.Second)
	h.l.renderDue()
	if len(h.frames) != n || h.l.answers["m3"].text.Len() != 0 {
		t.Errorf("an answer over %d bytes: %d frames, %d bytes held, want none", liveMaxBytes, len(h.frames)-n, h.l.answers["m3"].text.Len())
	}
}

// TestLiveRenderIsInert: every frame of a streaming hostile answer, as the
// page rebuilds it, is as inert as the final render.
func TestLiveRenderIsInert(t *testing.T) {
	md := render.NewMarkdown()
	for i, src := range rendertest.XSS {
		h := newLiveHarness(t, md)
		id := "m" + string(rune('a'+i))
		for _, c := range chunks(src, 2) {
			h.l.append("th", "run", id, c, false)
			h.clock = h.clock.Add(liveMinGap)
			n := len(h.frames)
			h.l.renderDue()
			if len(h.frames) > n {
				rendertest.AssertInert(t, src, h.shown(id))
			}
		}
		if len(h.frames) == 0 {
			t.Errorf("no frame for %q", src)
		}
	}
}

// payloadOf is a frame's JSON, without its WebSocket header.
func payloadOf(f *frame) []byte {
	switch n := f.full[1] & 0x7f; n {
	case 126:
		return f.full[4:]
	case 127:
		return f.full[10:]
	default:
		return f.full[2:]
	}
}

// chunks cuts s into pieces of about n bytes, never inside a character.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// TestLiveRenderReset: a reset replaces what an instance held of an
// answer (a run resumed mid-answer says where it stands), so an instance
// that watched it before the restart does not show its text twice, and
// the next frame is whole.
func TestLiveRenderReset(t *testing.T) {
	h := newLiveHarness(t, render.NewMarkdown())
	h.l.append("th", "run", "m1", "hello", false)
	h.l.renderDue()
	h.clock = h.clock.Add(time.Second)
	h.l.append("th", "run", "m1", "hello", true)
	h.l.append("th", "run", "m1", " again", false)
	n := len(h.frames)
	h.l.renderDue()
	if h.shown("m1") != "<p>hello again</p>\n" {
		t.Errorf("shown %q after a reset, want the text once", h.shown("m1"))
	}
	if len(h.frames) != n+1 || h.frames[n].Keep != 0 {
		t.Errorf("the frame after a reset is not whole: %+v", h.frames[n:])
	}
}
