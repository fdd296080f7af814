package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/tools"
)

// TestAttachedNoteIsNotTheUsersText: the note of attached files that
// follows a message is read as files, never as the user's list, so a
// message that attaches files but asks for something else is answered by
// the usual rules; a path with spaces and brackets reads whole.
func TestAttachedNoteIsNotTheUsersText(t *testing.T) {
	content := "Two jobs:\n- alpha\n- beta\n\n" + agent.AttachedNote +
		"\n- uploads/a b (1).csv (12 KB, text/plain)" +
		"\n- uploads/cat.png (3 KB, image/png): an image; this model cannot see images"
	text, files := splitNote(content)
	if text != "Two jobs:\n- alpha\n- beta" {
		t.Errorf("text %q", text)
	}
	want := []attached{
		{path: "uploads/a b (1).csv", size: "12 KB", typ: "text/plain"},
		{path: "uploads/cat.png", size: "3 KB", typ: "image/png", remark: "an image; this model cannot see images"},
	}
	if !slices.Equal(files, want) {
		t.Errorf("files %+v, want %+v", files, want)
	}
	r := lead([]agent.Message{{Type: agent.TypeSystem}, {Type: agent.TypeHuman, Content: content}}, []string{agent.SubagentGeneral}, nil, "Demo")
	if len(r.calls) != 2 {
		t.Errorf("%d task calls, want one per item of the user's list (2)", len(r.calls))
	}
}

// TestReadSubagentWritesSummary: the subagent that reads an attached file
// writes its summary to summaries/<name>.md when write_file is offered and
// names it in its answer; offered read_file alone, it answers as before
// and writes nothing.
func TestReadSubagentWritesSummary(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	all := tools.NewSet(tools.Workspace()...)
	text := "uploads/harvest notes.txt is 55 bytes of text/plain in 3 lines; it begins: “Apples: 3 crates” / “Pears: 2 crates” / “Plums: none this week”."
	for _, tt := range []struct {
		name    string
		set     *tools.Set
		turns   int
		answer  string
		summary string // the file's content; "" for none
	}{
		{
			name:   "with write_file",
			set:    all.Filter(&[]string{tools.Ls, tools.ReadFile, tools.WriteFile}, nil),
			turns:  3,
			answer: text + " Wrote `summaries/harvest notes.md`.",
			summary: "# harvest notes.txt\n\n- Size: 55 bytes\n- Type: text/plain\n- Lines: 3 lines\n\nIt begins:\n\n" +
				"> Apples: 3 crates\n> Pears: 2 crates\n> Plums: none this week\n\nRead from `uploads/harvest notes.txt` by herd's offline demo model.\n",
		},
		{
			name:   "read_file alone",
			set:    all.Filter(&[]string{tools.ReadFile}, nil),
			turns:  2,
			answer: text,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, "uploads"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "uploads", "harvest notes.txt"), []byte("Apples: 3 crates\nPears: 2 crates\nPlums: none this week\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			prompt := fmt.Sprintf(readPrompt, "uploads/harvest notes.txt", "55 bytes", "text/plain")
			resps := runSubagentIn(t, ws, New(agent.ModelConfig{Name: "demo-fast"}), prompt, tt.set)
			if len(resps) != tt.turns {
				t.Errorf("%d turns, want %d", len(resps), tt.turns)
			}
			if got := resps[len(resps)-1].Text; got != tt.answer {
				t.Errorf("answer %q, want %q", got, tt.answer)
			}
			got, err := os.ReadFile(filepath.Join(ws, "summaries", "harvest notes.md"))
			switch {
			case tt.summary == "" && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("summaries/harvest notes.md: %q, %v; want none", got, err)
			case tt.summary != "" && string(got) != tt.summary:
				t.Errorf("summaries/harvest notes.md %q (%v), want %q", got, err, tt.summary)
			}
		})
	}
}

func TestSummaryPath(t *testing.T) {
	for in, want := range map[string]string{
		"uploads/report.csv":        "summaries/report.md",
		"uploads/archive.tar.gz":    "summaries/archive.tar.md",
		"uploads/README":            "summaries/README.md",
		"uploads/.env":              "summaries/.env.md",
		"uploads/a b (1).csv":       "summaries/a b (1).md",
		"deep/er/notes.v2.markdown": "summaries/notes.v2.md",
	} {
		if got := summaryPath(in); got != want {
			t.Errorf("summaryPath(%q) = %q, want %q", in, got, want)
		}
	}
}
