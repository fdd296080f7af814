package demo

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // the image types herd shows a model that sees
	_ "image/jpeg"
	_ "image/png"
	pathpkg "path"
	"regexp"
	"slices"
	"strings"

	_ "golang.org/x/image/webp"

	"herd/agent"
	"herd/agent/tools"
)

// attached is one line of the note that follows a human message's text
// (agent.AttachedNote): a file of the workspace the message attached.
type attached struct {
	path, size, typ string
	remark          string // what the lead is told beside it; "" for a file that is there
}

var attachedLine = regexp.MustCompile(`^- (.+) \(([^()]*), ([^(),]*)\)(?:: (.*))?$`)

// lastHuman is the last human message of msgs; zero when there is none.
func lastHuman(msgs []agent.Message) agent.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Type == agent.TypeHuman {
			return msgs[i]
		}
	}
	return agent.Message{}
}

// splitNote cuts the note of attached files off a human message: the
// user's own text, which the demo's rules read, and the files.
func splitNote(content string) (string, []attached) {
	text, note, ok := strings.Cut(content, "\n\n"+agent.AttachedNote)
	if !ok {
		return content, nil
	}
	var files []attached
	for line := range strings.Lines(note) {
		if m := attachedLine.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			files = append(files, attached{path: m[1], size: m[2], typ: m[3], remark: m[4]})
		}
	}
	return text, files
}

// asksAboutAttached reports whether the user's text is about the files
// it attached: "summarise the attached file", "what is in the
// attachments?".
func asksAboutAttached(text string) bool {
	return strings.Contains(strings.ToLower(text), "attach")
}

// seen describes the images a message showed the model, one line each:
// "uploads/cat.png: a 1200×800 PNG image", as read from the bytes it got.
func seen(images []agent.Image) []string {
	out := make([]string, 0, len(images))
	for _, img := range images {
		cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil {
			out = append(out, fmt.Sprintf("%s: an image I could not read (%v)", img.Path, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s: a %d×%d %s image", img.Path, cfg.Width, cfg.Height, formatName(format)))
	}
	return out
}

func formatName(format string) string {
	if format == "webp" {
		return "WebP"
	}
	return strings.ToUpper(format)
}

// readAttached answers a message about its attached files: the images the
// model was shown are described, every other file there is handed to a
// subagent to read (one each, in parallel), and what cannot be read is
// said as the note says it.
func readAttached(files []attached, images []agent.Image, types []string) reply {
	kind := agent.SubagentGeneral
	if len(types) > 0 && !slices.Contains(types, agent.SubagentGeneral) {
		kind = types[0]
	}
	var r reply
	var notes []string
	for _, f := range files {
		switch {
		case slices.ContainsFunc(images, func(img agent.Image) bool { return img.Path == f.path }):
			// described from the image itself (seen)
		case f.remark != "":
			notes = append(notes, fmt.Sprintf("%s: %s", f.path, f.remark))
		default:
			r.calls = append(r.calls, newCall(agent.ToolTask, map[string]string{
				"description":   "Read " + f.path,
				"prompt":        fmt.Sprintf(readPrompt, f.path, f.size, f.typ),
				"subagent_type": kind,
			}))
		}
	}
	var b strings.Builder
	switch n := len(r.calls); {
	case n == 1:
		b.WriteString("I'll have a subagent read the attached file and summarise it.")
	case n > 1:
		fmt.Fprintf(&b, "I'll have %d subagents read the attached files in parallel and summarise them.", n)
	default:
		b.WriteString("Here is what I can tell of the attached files.")
	}
	if lines := append(seen(images), notes...); len(lines) > 0 {
		b.WriteString("\n\n- " + strings.Join(lines, "\n- "))
	}
	r.text = b.String()
	return r
}

// readPrompt asks a subagent to read one attached file: its path, size
// and type.
const readPrompt = "Read the attached file %s (%s, %s) with read_file and summarise it: its size, how many lines it has and how it begins."

var readRequest = regexp.MustCompile(`^Read the attached file (.+) \(([^()]*), ([^(),]*)\) with read_file`)

// readReply plays a subagent asked to read an attached file: read_file
// first; then, when write_file is offered, a Markdown summary written to
// summaries/ (summaryPath); then its answer, which names the file it wrote
// so the lead can cite it (leadAfterTools).
func readReply(m []string, msgs []agent.Message, offered map[string]bool, turn int) reply {
	path, size, typ := m[1], m[2], m[3]
	if !offered[tools.ReadFile] {
		return reply{text: fmt.Sprintf("I have no read_file tool, so I cannot read %s.", path)}
	}
	if turn == 1 {
		return reply{
			text:  fmt.Sprintf("Reading %s.", path),
			calls: []call{newCall(tools.ReadFile, map[string]string{"path": path})},
		}
	}
	// read_file was the first call, so its output is the first tool message.
	out := firstOf(msgs, agent.TypeTool)
	if rest, ok := strings.CutPrefix(out, "Error: "); ok {
		return reply{text: fmt.Sprintf("I could not read %s: %s", path, rest)}
	}
	lines, more := fileLines(out)
	count := fmt.Sprintf("%d lines", len(lines))
	switch {
	case more:
		count = fmt.Sprintf("more than %d lines", len(lines))
	case len(lines) == 1:
		count = "1 line"
	}
	head := lines[:min(3, len(lines))]
	text := fmt.Sprintf("%s is %s of %s in %s; it begins: %s.", path, size, typ, count, quoteLines(head))
	if !offered[tools.WriteFile] {
		return reply{text: text}
	}
	summary := summaryPath(path)
	if turn == 2 {
		return reply{
			text: fmt.Sprintf("Writing a summary to `%s`.", summary),
			calls: []call{newCall(tools.WriteFile, map[string]string{
				"path":    summary,
				"content": summaryFile(path, size, typ, count, head),
			})},
		}
	}
	if rest, ok := strings.CutPrefix(lastOf(msgs, agent.TypeTool), "Error: "); ok {
		return reply{text: fmt.Sprintf("%s I could not write %s: %s", text, summary, rest)}
	}
	return reply{text: fmt.Sprintf("%s Wrote `%s`.", text, summary)}
}

// summaryPath is where the summary of an attached file goes: summaries/
// and its base name, its extension swapped for .md.
func summaryPath(file string) string {
	base := pathpkg.Base(file)
	if name := strings.TrimSuffix(base, pathpkg.Ext(base)); name != "" {
		base = name
	}
	return "summaries/" + base + ".md"
}

// summaryFile is the Markdown summary of an attached file: its title,
// size, type, line count and first lines quoted.
func summaryFile(file, size, typ, count string, head []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n- Size: %s\n- Type: %s\n- Lines: %s\n", pathpkg.Base(file), size, typ, count)
	if len(head) > 0 {
		b.WriteString("\nIt begins:\n\n")
		for _, l := range head {
			b.WriteString("> " + clip(l, 120) + "\n")
		}
	}
	fmt.Fprintf(&b, "\nRead from `%s` by herd's offline demo model.\n", file)
	return b.String()
}

var numberedLine = regexp.MustCompile(`^ *[0-9]+\t`)

// fileLines takes the file's lines back out of read_file's output (each
// after its number and a tab) and whether it said more follow.
func fileLines(out string) (lines []string, more bool) {
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if m := numberedLine.FindString(line); m != "" {
			lines = append(lines, line[len(m):])
		} else if strings.HasPrefix(line, "[") {
			more = true
		}
	}
	return lines, more
}

// quoteLines quotes each line, cut short, joined by slashes.
func quoteLines(lines []string) string {
	if len(lines) == 0 {
		return "nothing (it is empty)"
	}
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = "“" + clip(l, 60) + "”"
	}
	return strings.Join(q, " / ")
}
