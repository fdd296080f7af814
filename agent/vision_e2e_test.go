package agent_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/anthropic/anthropictest"
	"herd/agent/internal/fake"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// humanPart is the user messages of a request as a test reads them off
// the wire: their text and their images, decoded (and checked as the API
// checks them).
type humanPart struct {
	text   string
	images []fake.Image
}

// wire is one provider behind its fake: the model pointed at it, and
// what each request's user messages carried.
type wire struct {
	model *agent.Model
	human func() []humanPart
	close func()
}

func openaiWire(t *testing.T, vision bool) wire {
	srv := openaitest.NewServer(t)
	srv.SetFallback(func(openaitest.ChatRequest) openaitest.Reply { return openaitest.Text("Seen.") })
	cfg := agent.ModelConfig{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "x", TimeoutSeconds: 10, MaxRetries: new(0), Vision: vision}
	p, err := openai.New(cfg, openai.WithHTTPClient(srv.Client()), openai.WithMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return wire{model: &agent.Model{Config: cfg, Provider: p}, close: srv.Close, human: func() []humanPart {
		var out []humanPart
		for _, r := range srv.Requests() {
			var part humanPart
			for _, m := range r.Chat.Messages {
				if m.Role == "user" {
					imgs, err := m.Images()
					if err != nil {
						t.Errorf("the fake refuses the images: %v", err)
					}
					part.text += m.Text() + "\n"
					part.images = append(part.images, imgs...)
				}
			}
			out = append(out, part)
		}
		return out
	}}
}

func anthropicWire(t *testing.T, vision bool) wire {
	srv := anthropictest.NewServer(t)
	srv.SetFallback(func(anthropictest.MessagesRequest) anthropictest.Reply { return anthropictest.Text("Seen.") })
	cfg := agent.ModelConfig{Name: "claude", Provider: "anthropic", Model: "claude-test", BaseURL: srv.URL(), APIKey: "sk-ant-vision-key", TimeoutSeconds: 10, MaxRetries: new(0), Vision: vision}
	p, err := anthropic.New(cfg, anthropic.WithHTTPClient(srv.Client()), anthropic.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return wire{model: &agent.Model{Config: cfg, Provider: p}, close: srv.Close, human: func() []humanPart {
		var out []humanPart
		for _, r := range srv.Requests() {
			var part humanPart
			for _, m := range r.Messages.Messages {
				if m.Role == "user" {
					imgs, err := m.Images()
					if err != nil {
						t.Errorf("the fake refuses the images: %v", err)
					}
					part.text += m.Text() + "\n"
					part.images = append(part.images, imgs...)
				}
			}
			out = append(out, part)
		}
		return out
	}}
}

func encodedPicture(t *testing.T, w, h int, asJPEG bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), 90, 255})
		}
	}
	var buf bytes.Buffer
	var err error
	if asJPEG {
		err = jpeg.Encode(&buf, img, nil)
	} else {
		err = png.Encode(&buf, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func put(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImagesOnTheWire: an attached image reaches a model configured
// vision: true as an image part of the human message, through the real
// OpenAI and Anthropic providers and their fakes (which check each part
// as the APIs do): a small PNG as it is, a large JPEG sized down to a
// long edge of 1568 px, in base64; the note lists every attachment. A
// model without vision gets the note only. A later run shows the images
// again, read from the workspace, and says which file is gone.
func TestImagesOnTheWire(t *testing.T) {
	for _, tt := range []struct {
		name   string
		wire   func(*testing.T, bool) wire
		vision bool
	}{
		{"openai vision", openaiWire, true},
		{"anthropic vision", anthropicWire, true},
		{"openai without vision", openaiWire, false},
		{"anthropic without vision", anthropicWire, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.wire(t, tt.vision)
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{w.model}})
			t.Cleanup(w.close) // before the harness's leak check
			cat := encodedPicture(t, 1200, 800, false)
			put(t, filepath.Join(h.Workspace(), "uploads", "cat.png"), cat)
			put(t, filepath.Join(h.Workspace(), "uploads", "photo.jpg"), encodedPicture(t, 3000, 2000, true))
			put(t, filepath.Join(h.Workspace(), "uploads", "notes.txt"), []byte("one\ntwo\n"))

			st := h.StartAttached("what do you see?", "uploads/cat.png", "uploads/photo.jpg", "uploads/notes.txt")
			h.Wait()
			if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
				t.Fatalf("run %s %q, want completed", r.Status, r.Error)
			}
			sent := w.human()
			if len(sent) != 1 {
				t.Fatalf("%d requests, want 1", len(sent))
			}
			remark := ": the image follows"
			if !tt.vision {
				remark = ": an image; this model cannot see images"
			}
			for _, line := range []string{
				"what do you see?\n\n" + agent.AttachedNote,
				"\n- uploads/cat.png (", ", image/png)" + remark,
				", image/jpeg)" + remark,
				"\n- uploads/notes.txt (8 bytes, text/plain)",
			} {
				if !strings.Contains(sent[0].text, line) {
					t.Errorf("the human message lacks %q:\n%s", line, sent[0].text)
				}
			}
			imgs := sent[0].images
			if !tt.vision {
				if len(imgs) != 0 {
					t.Errorf("a model without vision got %d images", len(imgs))
				}
				return
			}
			if len(imgs) != 2 {
				t.Fatalf("%d image parts, want 2", len(imgs))
			}
			if imgs[0].MIMEType != "image/png" || !bytes.Equal(imgs[0].Data, cat) {
				t.Errorf("cat.png reached the wire as %s of %d bytes, want the PNG as it is", imgs[0].MIMEType, len(imgs[0].Data))
			}
			if imgs[1].MIMEType != "image/jpeg" || imgs[1].Width != 1568 || imgs[1].Height != 1045 {
				t.Errorf("photo.jpg reached the wire as %s %d×%d, want a JPEG sized down to 1568×1045", imgs[1].MIMEType, imgs[1].Width, imgs[1].Height)
			}
			if n := base64.StdEncoding.EncodedLen(len(imgs[1].Data)); n > 5<<20 {
				t.Errorf("photo.jpg is %d bytes of base64, over 5 MB", n)
			}

			// The next run replays the thread: the images again, from the
			// workspace, and the file removed since said to be gone.
			if err := os.Remove(filepath.Join(h.Workspace(), "uploads", "photo.jpg")); err != nil {
				t.Fatal(err)
			}
			h.Run("and now?")
			sent = w.human()
			if len(sent) != 2 {
				t.Fatalf("%d requests, want 2", len(sent))
			}
			if again := sent[1].images; len(again) != 1 || !bytes.Equal(again[0].Data, cat) {
				t.Errorf("the later run sent %d images, want cat.png again", len(again))
			}
			if !strings.Contains(sent[1].text, "image/jpeg): no longer in the workspace") || !strings.Contains(sent[1].text, "and now?") {
				t.Errorf("the later run's user messages do not say photo.jpg is gone:\n%s", sent[1].text)
			}
		})
	}
}
