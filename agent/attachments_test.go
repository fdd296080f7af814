package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"herd/agent/tools"
)

// pngOf is a w×h PNG, a gradient (compresses well) or, noisy, random
// pixels (compresses not at all).
func pngOf(t testing.TB, w, h int, noisy bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, testPicture(w, h, noisy)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegOf(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, testPicture(w, h, false), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testPicture(w, h int, noisy bool) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			c := color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, 255}
			if noisy {
				c = color.NRGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAttachments: a message attaches regular files of its thread's
// workspace only, each refused path said apart (its index, path and
// why), and nothing is written, not even the workspace; a kept file
// records its size and the type its bytes say, not its name.
func TestAttachments(t *testing.T) {
	wsRoot := t.TempDir()
	rt := &Runtime{runEnv: runEnv{wsRoot: wsRoot}}
	thread := uuid.NewString()
	ws := filepath.Join(wsRoot, thread)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), []byte("secret\n"))
	writeFile(t, filepath.Join(ws, "uploads", "report.csv"), []byte("name,qty\napples,3\n"))
	writeFile(t, filepath.Join(ws, "uploads", "cat.txt"), pngOf(t, 4, 3, false)) // a PNG, whatever its name
	writeFile(t, filepath.Join(ws, "uploads", "page.png"), []byte("<html><script>alert(1)</script></html>"))
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "uploads", "leak.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "uploads", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := rt.Attachments(thread, []string{"uploads/report.csv", "uploads/cat.txt", "uploads/page.png", "uploads/report.csv"})
	want := []Attachment{
		{Path: "uploads/report.csv", Size: 18, Type: "text/plain"},
		{Path: "uploads/cat.txt", Size: int64(len(pngOf(t, 4, 3, false))), Type: "image/png"},
		{Path: "uploads/page.png", Size: 38, Type: "text/html"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Attachments = %+v, %v; want %+v", got, err, want)
	}

	for _, c := range []struct {
		name  string
		paths []string
		index int
		want  string
	}{
		{"traversal", []string{"uploads/report.csv", "../" + thread + "/uploads/report.csv"}, 1, "not a clean path"},
		{"absolute", []string{"/etc/passwd"}, 0, "not a clean path"},
		{"dot dot inside", []string{"uploads/../uploads/report.csv"}, 0, "not a clean path"},
		{"trailing slash", []string{"uploads/"}, 0, "not a clean path"},
		{"empty", []string{""}, 0, "an empty path"},
		{"missing", []string{"uploads/none.csv"}, 0, "no such file"},
		{"symlink out", []string{"uploads/leak.csv"}, 0, "outside the thread's workspace"},
		{"through a linked folder", []string{"out/secret.txt"}, 0, "outside the thread's workspace"},
		{"fifo", []string{"uploads/pipe"}, 0, "not a regular file"},
		{"directory", []string{"uploads"}, 0, "not a regular file"},
		{"too many", slices.Repeat([]string{"uploads/report.csv"}, MaxAttachments+1), -1, "at most 20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rt.Attachments(thread, c.paths)
			var ae *AttachmentError
			if !errors.As(err, &ae) || got != nil {
				t.Fatalf("Attachments(%q) = %v, %v; want an AttachmentError", c.paths, got, err)
			}
			if ae.Index != c.index || !strings.Contains(ae.Error(), c.want) {
				t.Errorf("error %q (index %d), want index %d and %q", ae, ae.Index, c.index, c.want)
			}
		})
	}

	fresh := uuid.NewString()
	if _, err := rt.Attachments(fresh, []string{"uploads/report.csv"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a thread without a workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wsRoot, fresh)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("checking attachments made the workspace: %v", err)
	}
}

// presentRun is a run whose model sees (or not), on workspace ws, for
// present alone.
func presentRun(ws string, vision bool) *run {
	env := &runEnv{log: slog.New(slog.DiscardHandler), decodes: make(chan struct{}, maxDecodes)}
	r := &run{env: env, workspace: ws, ctx: context.Background(), model: &Model{Config: ModelConfig{Name: "m", Vision: vision}}}
	r.sink = env.newSink(owner{threadID: "thread"}, "run")
	return r
}

// TestPresent: the note names every attached file with its size and type
// and says what the model gets of it; a model that sees gets each image
// as a part, the original when within the bounds, else sized down; an
// image that does not decode, one gone since and one past the request's
// image cap are noted, not sent.
func TestPresent(t *testing.T) {
	ws := t.TempDir()
	cat := pngOf(t, 1200, 800, false)
	writeFile(t, filepath.Join(ws, "uploads", "cat.png"), cat)
	writeFile(t, filepath.Join(ws, "uploads", "wide.jpg"), jpegOf(t, 3000, 1000))
	writeFile(t, filepath.Join(ws, "uploads", "broken.png"), append(pngOf(t, 8, 8, false)[:40:40], "not the rest of a png"...))
	writeFile(t, filepath.Join(ws, "uploads", "a.csv"), []byte("x\n"))
	atts := []Attachment{
		{Path: "uploads/cat.png", Size: int64(len(cat)), Type: "image/png"},
		{Path: "uploads/wide.jpg", Size: 300_000, Type: "image/jpeg"},
		{Path: "uploads/broken.png", Size: 61, Type: "image/png"},
		{Path: "uploads/a.csv", Size: 2, Type: "text/plain"},
		{Path: "uploads/gone.csv", Size: 3 << 20, Type: "text/plain"},
		{Path: "uploads/logo.svg", Size: 900, Type: "image/svg+xml"},
	}
	note := func(remarks ...string) string {
		lines := []string{"look\n\n" + AttachedNote}
		sizes := []string{byteSize(int64(len(cat))), "293 KB", "61 bytes", "2 bytes", "3.0 MB", "900 bytes"}
		for i, a := range atts {
			line := fmt.Sprintf("- %s (%s, %s)", a.Path, sizes[i], a.Type)
			if remarks[i] != "" {
				line += ": " + remarks[i]
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}

	msgs := []Message{{Type: TypeSystem, Content: "sys"}, {Type: TypeHuman, Content: "look\n", attached: atts}}
	presentRun(ws, true).present(msgs)
	m := msgs[1]
	if want := note(remarkImage, remarkImage, "an image that could not be decoded as image/png; not shown", "", remarkGone, remarkOtherType); m.Content != want {
		t.Errorf("note:\n%s\nwant:\n%s", m.Content, want)
	}
	if len(m.Images) != 2 {
		t.Fatalf("%d images, want 2", len(m.Images))
	}
	if img := m.Images[0]; img.Path != "uploads/cat.png" || img.MIMEType != "image/png" || !bytes.Equal(img.Data, cat) || img.Width != 1200 || img.Height != 800 {
		t.Errorf("cat.png sent as %s %d×%d (%d bytes), want the file as it is", img.MIMEType, img.Width, img.Height, len(img.Data))
	}
	if img := m.Images[1]; img.Path != "uploads/wide.jpg" || img.MIMEType != "image/jpeg" || img.Width != 1568 || img.Height != 523 {
		t.Errorf("wide.jpg sent as %s %d×%d, want a JPEG of 1568×523", img.MIMEType, img.Width, img.Height)
	} else if cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != 1568 {
		t.Errorf("wide.jpg's bytes: %+v, %v", cfg, err)
	}

	blind := []Message{{Type: TypeHuman, Content: "look\n", attached: atts}}
	presentRun(ws, false).present(blind)
	if want := note(remarkBlind, remarkBlind, remarkBlind, "", remarkGone, remarkOtherType); blind[0].Content != want || blind[0].Images != nil {
		t.Errorf("a model that cannot see: %q with %d images, want\n%s", blind[0].Content, len(blind[0].Images), want)
	}
}

// TestPresentImageCap: a request carries the newest maxImagesPerRequest
// images of the conversation; older ones are noted, not sent again.
func TestPresentImageCap(t *testing.T) {
	ws := t.TempDir()
	var older, newer []Attachment
	for i := range maxImagesPerRequest + 2 {
		p := fmt.Sprintf("uploads/%02d.png", i)
		writeFile(t, filepath.Join(ws, p), pngOf(t, 2, 2, false))
		a := Attachment{Path: p, Size: 70, Type: "image/png"}
		if i < 4 {
			older = append(older, a)
		} else {
			newer = append(newer, a)
		}
	}
	msgs := []Message{{Type: TypeHuman, Content: "first", attached: older}, {Type: TypeAI, Content: "ok"}, {Type: TypeHuman, Content: "second", attached: newer}}
	presentRun(ws, true).present(msgs)
	if n := len(msgs[2].Images); n != len(newer) {
		t.Errorf("the latest message carries %d images, want %d", n, len(newer))
	}
	if n := len(msgs[0].Images); n != maxImagesPerRequest-len(newer) {
		t.Errorf("the earlier one carries %d, want %d", n, maxImagesPerRequest-len(newer))
	}
	if c := strings.Count(msgs[0].Content, "not shown again"); c != 2 {
		t.Errorf("%d images noted as not shown again, want 2:\n%s", c, msgs[0].Content)
	}
}

// TestPresentWithinTheWindow: with a known context_window the images of a
// request take half its prompt budget at most, the newest first, so an 8k
// window (the demo's) holds two 1200×800 images and the third is noted.
func TestPresentWithinTheWindow(t *testing.T) {
	ws := t.TempDir()
	var atts []Attachment
	for i := range 3 {
		p := fmt.Sprintf("uploads/%d.png", i)
		writeFile(t, filepath.Join(ws, p), pngOf(t, 1200, 800, false))
		atts = append(atts, Attachment{Path: p, Size: 9000, Type: "image/png"})
	}
	r := presentRun(ws, true)
	r.model.Config.ContextWindow = 8192
	msgs := []Message{{Type: TypeHuman, Content: "first", attached: atts[:1]}, {Type: TypeAI, Content: "ok"}, {Type: TypeHuman, Content: "then", attached: atts[1:]}}
	r.present(msgs)
	if len(msgs[2].Images) != 2 || len(msgs[0].Images) != 0 || !strings.Contains(msgs[0].Content, remarkNoRoom) {
		t.Errorf("images %d and %d, want the latest message's 2 and the earlier one's noted:\n%s", len(msgs[2].Images), len(msgs[0].Images), msgs[0].Content)
	}
}

// TestPictureSizedDown: an image over the byte bound though within the
// edge is encoded again within it; one over the pixel bound is not
// decoded at all.
func TestPictureSizedDown(t *testing.T) {
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	noisy := pngOf(t, 1400, 1400, true) // random pixels: a PNG over the bound
	if len(noisy) <= maxImageBytes {
		t.Fatalf("the fixture is %d bytes, not over %d", len(noisy), maxImageBytes)
	}
	writeFile(t, filepath.Join(ws, "noisy.png"), noisy)
	img, err := picture(root, "noisy.png")
	if err != nil || img.MIMEType != "image/jpeg" || len(img.Data) > maxImageBytes || img.Width != 1400 {
		t.Errorf("noisy.png: %s %d×%d, %d bytes, %v; want a JPEG within %d bytes", img.MIMEType, img.Width, img.Height, len(img.Data), err, maxImageBytes)
	}

	// A PNG header claiming 10000×10000 pixels: refused before decoding.
	var huge bytes.Buffer
	if err := png.Encode(&huge, image.NewGray(image.Rect(0, 0, 10000, 10000))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "huge.png"), huge.Bytes())
	if _, err := picture(root, "huge.png"); !errors.Is(err, errUndecodable) || !strings.Contains(err.Error(), "10000×10000") {
		t.Errorf("huge.png: %v, want refused by its size", err)
	}
}

// TestResumedLeadSeesTheImagesAgain: a run resumed after a restart
// rebuilds its lead's history from the thread's messages (docs/DESIGN.md
// §11), and its model is shown the attached image again, read anew from
// the workspace.
func TestResumedLeadSeesTheImagesAgain(t *testing.T) {
	var mu sync.Mutex
	var seen [][]Image // the images of the human message of each call
	record := func(req Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range req.Messages {
			if m.Type == TypeHuman {
				seen = append(seen, m.Images)
				return
			}
		}
	}
	inFlight := make(chan struct{})
	first := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		record(req)
		if usedTurns(req) == 0 {
			return reply("", nil, ToolCall{ID: "c1", Name: "ls", Args: json.RawMessage(`{"path":"."}`)}), nil
		}
		close(inFlight)
		<-ctx.Done() // in flight when the process stops
		return Response{}, ctx.Err()
	})
	vision := func(p Provider) *Model {
		m := model("eyes", p)
		m.Config.Vision = true
		return m
	}
	h := newHarness(t, harnessConfig{models: []*Model{vision(first)}})
	cat := pngOf(t, 640, 480, false)
	writeFile(t, filepath.Join(h.rt.wsRoot, h.thread, "uploads", "cat.png"), cat)
	atts, err := h.rt.Attachments(h.thread, []string{"uploads/cat.png"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.Start(context.Background(), StartRequest{ThreadID: h.thread, UserID: "u1", Content: "what is this?", Attachments: atts}); err != nil {
		t.Fatal(err)
	}
	<-inFlight // the call after the tool's result
	if _, err := h.rt.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		record(req)
		return reply("a cat", nil), nil
	})
	rt, err := New(Options{Models: []*Model{vision(second)}, Subagents: defaultSubagents(), WorkspaceRoot: h.rt.wsRoot,
		Tools: tools.Workspace(), Journal: h.writer, History: h.store, Claims: h.store, Resume: ResumeConfig{Enabled: true, MaxResumes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	runs, err := h.store.RunningRuns(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("running runs %v, %v", runs, err)
	}
	if resumed, _, err := rt.Continue(context.Background(), h.store, runs, ResumeRestart); err != nil || resumed != 1 {
		t.Fatalf("resumed %d, %v", resumed, err)
	}
	if err := rt.Wait(context.Background(), h.thread); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d calls, want 2 before the restart and 1 after", len(seen))
	}
	for i, imgs := range seen {
		if len(imgs) != 1 || imgs[0].Path != "uploads/cat.png" || !bytes.Equal(imgs[0].Data, cat) {
			t.Errorf("call %d was shown %d images, want uploads/cat.png", i+1, len(imgs))
		}
	}
}
