package demo

import (
	"slices"
	"testing"

	"herd/agent"
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
