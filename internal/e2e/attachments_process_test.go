package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttachedFileSummarised: with the real binary and its default demo
// models (vision on), files put in a thread's workspace (as the upload
// route will) are attached to a run: the message keeps them, the lead
// hands the CSV to a subagent whose card reads it with read_file and
// writes summaries/report.md, the answer summarises it and names that file, and the image the lead was shown is described.
func TestAttachedFileSummarised(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_MODELS_0_LATENCY_MS=0", "HERD_MODELS_0_CHUNK_MS=0")
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "files"}, &th)
	uploads := filepath.Join(dir, "workspaces", th.ID, "uploads")
	if err := os.MkdirAll(uploads, 0o755); err != nil {
		t.Fatal(err)
	}
	csv := "fruit,qty\napples,3\npears,5\nplums,7\nfigs,11\n"
	if err := os.WriteFile(filepath.Join(uploads, "report.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 1200, 800))
	for x := range 1200 {
		img.SetNRGBA(x, 400, color.NRGBA{200, 30, 30, 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(uploads, "cat.png"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]any{
		"content": "Summarise the attached file", "attachments": []string{"uploads/report.csv", "uploads/cat.png"},
	}, nil)
	c.waitIdle(th.ID)

	var state struct {
		Messages []struct {
			Type    string          `json:"type"`
			Content string          `json:"content"`
			Kwargs  json.RawMessage `json:"additional_kwargs"`
		} `json:"messages"`
		Tasks []struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
			Result string `json:"result"`
		} `json:"tasks"`
	}
	c.call("GET", "/api/threads/"+th.ID, nil, &state)
	if len(state.Messages) == 0 || state.Messages[0].Type != "human" {
		t.Fatalf("messages %+v", state.Messages)
	}
	var kw struct {
		Attachments []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			Type string `json:"type"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(state.Messages[0].Kwargs, &kw); err != nil || len(kw.Attachments) != 2 ||
		kw.Attachments[0].Path != "uploads/report.csv" || kw.Attachments[0].Size != int64(len(csv)) || kw.Attachments[1].Type != "image/png" {
		t.Errorf("the message keeps %s, want both files with size and type", state.Messages[0].Kwargs)
	}
	if len(state.Tasks) != 1 || state.Tasks[0].Status != "completed" {
		t.Fatalf("cards %+v, want one completed read\n%s", state.Tasks, p.log.String())
	}
	var steps struct {
		Events []struct {
			Content json.RawMessage `json:"content"`
		} `json:"events"`
	}
	c.call("GET", "/api/threads/"+th.ID+"/events?event_types=subagent.step&task_id="+state.Tasks[0].TaskID, nil, &steps)
	read := false
	for _, e := range steps.Events {
		read = read || strings.Contains(string(e.Content), `"read_file"`) && strings.Contains(string(e.Content), "uploads/report.csv")
	}
	if !read {
		t.Errorf("the card's steps show no read_file of uploads/report.csv: %+v", steps.Events)
	}
	var said strings.Builder
	for _, m := range state.Messages {
		if m.Type == "ai" {
			said.WriteString(m.Content + "\n")
		}
	}
	for _, want := range []string{
		fmt.Sprintf("uploads/report.csv is %d bytes of text/plain in 5 lines; it begins: “fruit,qty” / “apples,3” / “pears,5”.", len(csv)),
		"Wrote `summaries/report.md`.",
		"uploads/cat.png: a 1200×800 PNG image",
	} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the lead's messages lack %q:\n%s", want, said.String())
		}
	}
}
