package agent

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// sent records a call's live frames.
type sent struct {
	mu       sync.Mutex
	progress []string
	at       []time.Time
	logs     [][]ToolLog
}

func (s *sent) output() *callOutput {
	return &callOutput{
		log: slog.New(slog.DiscardHandler),
		progress: func(text string) {
			s.mu.Lock()
			s.progress, s.at = append(s.progress, text), append(s.at, time.Now())
			s.mu.Unlock()
		},
		logs: func(lines []ToolLog) {
			s.mu.Lock()
			s.logs = append(s.logs, lines)
			s.mu.Unlock()
		},
	}
}

// A tool that reports progress as fast as it can costs at most ten
// frames a second, each with the latest value, and its final value is
// always shown, even when it came between two frames.
func TestProgressCoalesced(t *testing.T) {
	var s sent
	c := s.output()
	env := c.env(t.TempDir(), "u", "r")
	start := time.Now()
	n := 0
	for time.Since(start) < 600*time.Millisecond {
		n++
		env.Progress(fmt.Sprintf("spam: %d", n))
	}
	final := fmt.Sprintf("spam: %d", n+1)
	env.Progress(final)
	elapsed := time.Since(start)
	if out := c.finish(); out != nil {
		t.Errorf("progress alone left output %+v; want none (progress is never kept)", out)
	}
	env.Progress("after the end") // an abandoned call that goes on
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := int(elapsed/toolFrameEvery) + 2; len(s.progress) > max {
		t.Errorf("%d updates in %v made %d frames, want at most %d", n+1, elapsed, len(s.progress), max)
	}
	if len(s.progress) < 3 {
		t.Errorf("%d frames in %v: %q; want progress shown while it runs, not only at the end", len(s.progress), elapsed, s.progress)
	}
	if last := s.progress[len(s.progress)-1]; last != final {
		t.Errorf("last frame %q, want the final value %q", last, final)
	}
	// Every frame but the final one waits out the interval.
	for i := 1; i < len(s.at)-1; i++ {
		if gap := s.at[i].Sub(s.at[i-1]); gap < toolFrameEvery-5*time.Millisecond {
			t.Errorf("frames %d and %d %v apart, want at least %v", i-1, i, gap, toolFrameEvery)
		}
	}
	t.Logf("%d updates in %v: %d frames", n+1, elapsed.Round(time.Millisecond), len(s.progress))
}

// A call's log keeps its last maxToolLogs lines, each bounded, and says
// how many it dropped; live frames carry at most maxToolLogsFrame lines
// each, and the last line is always shown.
func TestLogLinesBounded(t *testing.T) {
	var s sent
	c := s.output()
	env := c.env(t.TempDir(), "u", "r")
	for i := 1; i <= 200; i++ {
		env.Log("info", fmt.Sprintf("line %d", i))
	}
	env.Log("error", strings.Repeat("x", 2000)+"\xff")
	out := c.finish()
	if out == nil || len(out.Logs) != maxToolLogs || out.LogsDropped != 201-maxToolLogs {
		t.Fatalf("output = %+v, want the last %d lines and %d dropped", out, maxToolLogs, 201-maxToolLogs)
	}
	if first := out.Logs[0].Text; first != "line 152" {
		t.Errorf("first kept line %q, want line 152", first)
	}
	last := out.Logs[len(out.Logs)-1]
	if last.Level != "error" || len([]rune(last.Text)) != maxToolLogText || !strings.HasSuffix(last.Text, "…") {
		t.Errorf("a long line kept as %s %d runes, want it cut to %d", last.Level, len([]rune(last.Text)), maxToolLogText)
	}
	if err := out.validate(); err != nil {
		t.Errorf("kept output invalid: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []ToolLog
	for _, f := range s.logs {
		if len(f) > maxToolLogsFrame {
			t.Errorf("a frame of %d lines, want at most %d", len(f), maxToolLogsFrame)
		}
		all = append(all, f...)
	}
	if len(all) == 0 || all[len(all)-1].Level != "error" {
		t.Errorf("the last line was not shown live (%d lines sent)", len(all))
	}
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Only png, jpeg, gif and webp images that are what they claim, and not
// over the size limit, are kept; they open only by the name Put gave,
// for their thread, with their type.
func TestToolImages(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tool-images")
	s := NewToolImages(root)
	thread, other := uuid.NewString(), uuid.NewString()
	pic := pngBytes(t)
	img, err := s.Put(thread, "image/png", pic)
	if err != nil || !toolImageName.MatchString(img.ID) || img.Bytes != len(pic) {
		t.Fatalf("Put = %+v, %v", img, err)
	}
	if again, _ := s.Put(thread, "image/png", pic); again.ID != img.ID {
		t.Errorf("the same image kept twice: %s and %s", img.ID, again.ID)
	}
	f, typ, err := s.Open(thread, img.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if typ != "image/png" || !bytes.Equal(got, pic) {
		t.Errorf("Open = %s, %d bytes; want image/png, %d", typ, len(got), len(pic))
	}
	refused := []struct{ name, mime, want string }{
		{"svg", "image/svg+xml", "not a type"},
		{"html as png", "image/png", "not a image/png image"},
		{"png as gif", "image/gif", "not a image/gif image"},
	}
	for _, r := range refused {
		data := pic
		if r.name == "html as png" || r.name == "svg" {
			data = []byte("<svg onload=alert(1)>")
		}
		if _, err := s.Put(thread, r.mime, data); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: err %v, want %q", r.name, err, r.want)
		}
	}
	big := append(append([]byte{}, pic...), make([]byte, MaxToolImageBytes)...)
	if _, err := s.Put(thread, "image/png", big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an image over the limit: err %v", err)
	}
	for _, name := range []string{"../" + thread + "/" + img.ID, strings.TrimSuffix(img.ID, ".png") + ".svg", "x.png", ""} {
		if _, _, err := s.Open(thread, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open(%q) = %v, want not found", name, err)
		}
	}
	if _, _, err := s.Open(other, img.ID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("another thread opened the image: %v", err)
	}
	if err := s.remove(thread); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(thread, img.ID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after remove: %v", err)
	}
}

// A call keeps what it may of its images, and says why about the rest.
func TestCallImages(t *testing.T) {
	c := &callOutput{threadID: uuid.NewString(), images: NewToolImages(t.TempDir()), log: slog.New(slog.DiscardHandler)}
	env := c.env(t.TempDir(), "u", "r")
	env.Image("image/png", pngBytes(t))
	env.Image("image/svg+xml", []byte("<svg/>"))
	for range maxToolImages {
		env.Image("image/png", pngBytes(t))
	}
	out := c.finish()
	if out == nil || len(out.Images) != maxToolImages+1 {
		t.Fatalf("output = %+v, want %d images, the last saying the limit", out, maxToolImages+1)
	}
	if out.Images[0].ID == "" || out.Images[1].ID != "" || !strings.Contains(out.Images[1].Omitted, "not a type") {
		t.Errorf("images = %+v", out.Images[:2])
	}
	if last := out.Images[maxToolImages]; !strings.Contains(last.Omitted, "limit") {
		t.Errorf("the image over the count = %+v", last)
	}
	if err := out.validate(); err != nil {
		t.Errorf("kept output invalid: %v", err)
	}
}

// Images an older herd kept under its old root (DATA_DIR/tool-images)
// are still served once the root has moved to the shared workspaces
// directory, new ones go to the new root only, and removing a thread's
// images removes them under both.
func TestToolImagesOlderRoot(t *testing.T) {
	dir := t.TempDir()
	oldRoot, newRoot := filepath.Join(dir, "tool-images"), filepath.Join(dir, "workspaces", ".tool-images")
	thread := uuid.NewString()
	old, err := NewToolImages(oldRoot).Put(thread, "image/png", pngBytes(t))
	if err != nil {
		t.Fatal(err)
	}
	s := NewToolImages(newRoot, oldRoot)
	f, typ, err := s.Open(thread, old.ID)
	if err != nil || typ != "image/png" {
		t.Fatalf("the older image: %v, %q", err, typ)
	}
	f.Close()
	pic := pngBytes(t)
	pic = append(pic[:len(pic):len(pic)], 0) // another image of the thread
	img, err := s.Put(thread, "image/png", pic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(newRoot, thread, img.ID)); err != nil {
		t.Errorf("a new image is not under the new root: %v", err)
	}
	if err := s.remove(thread); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old.ID, img.ID} {
		if _, _, err := s.Open(thread, id); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("image %s after remove: %v", id, err)
		}
	}
}
