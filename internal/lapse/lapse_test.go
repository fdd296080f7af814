package lapse

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herd/internal/testclock"
)

// TestLapseLogsEachChangeOnce: a lapse of 300 failures over 150 s logs
// its first failure, a count each minute and its end, five lines; a
// success with no lapse logs nothing; a failure a minute after the last
// of a lapse nobody ended starts a new one.
func TestLapseLogsEachChangeOnce(t *testing.T) {
	var buf bytes.Buffer
	clock := testclock.New()
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), "the part lost its connection")
	l.now = clock.Now
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}

	if l.End("working again") {
		t.Error("End without a lapse reported one")
	}
	for range 300 {
		l.Fail(errors.New("connection refused"), "part", "listener")
		clock.Advance(500 * time.Millisecond)
	}
	if !l.End("working again", "part", "listener") {
		t.Error("End after 300 failures reported no lapse")
	}
	got := lines()
	want := []string{
		`level=WARN msg="the part lost its connection" part=listener err="connection refused"`,
		`level=WARN msg="the part lost its connection" part=listener still_failing_for=1m0s failures=121 err="connection refused"`,
		`level=WARN msg="the part lost its connection" part=listener still_failing_for=2m0s failures=241 err="connection refused"`,
		`level=INFO msg="working again" part=listener after=2m30s failures=300`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("line %d:\n got %s\nwant …%s", i, got[i], want[i])
		}
	}
	if l.End("working again") || len(lines()) != 0 {
		t.Error("a second End logged or reported a lapse")
	}

	l.Fail(errors.New("refused"))
	clock.Advance(30 * time.Second)
	l.Fail(errors.New("refused"))
	clock.Advance(Every)
	l.Fail(errors.New("refused again"))
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], `err="refused again"`) || strings.Contains(got[1], "failures") {
		t.Errorf("a failure a minute after a lapse's last: want a new lapse's first line, got\n%s", strings.Join(got, "\n"))
	}
}
