package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"

	"herd/agent/tools"
	"herd/models"
)

// MaxAttachments bounds the files one message may attach.
const MaxAttachments = 20

// maxAttachmentPath bounds an attachment's path, in bytes: PATH_MAX.
const maxAttachmentPath = 4096

// kwargAttachments is the additional_kwargs key of a human message's
// attachments (docs/API.md).
const kwargAttachments = "attachments"

// Attachment is a file of the thread's workspace that a human message
// attached, as it was when the message was sent: its workspace-relative
// path, size in bytes and MIME type, sniffed from its first bytes as
// browsers do (http.DetectContentType), never taken from its name.
type Attachment struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Type string `json:"type"`
}

// AttachmentError refuses one attachment of a message before anything is
// written: Index is its place in the list, Path what was sent, Reason why.
type AttachmentError struct {
	Index  int
	Path   string
	Reason string
}

func (e *AttachmentError) Error() string {
	if e.Index < 0 {
		return "attachments: " + e.Reason
	}
	return fmt.Sprintf("attachments[%d] %q: %s", e.Index, e.Path, e.Reason)
}

// Attachments checks the paths a message attaches in thread threadID's
// workspace and returns what the message keeps of each (its
// Attachment), in order, a path listed twice once. Each must be a clean
// workspace-relative path ("uploads/a.csv", no "..", no leading "/")
// naming a regular file that is reached without leaving the workspace,
// opened as read_file opens it (tools.OpenRegular: no symlink out, no
// FIFO, device or socket). It reads, never writes: a workspace not made
// yet has no files. The first path refused is an *AttachmentError.
func (rt *Runtime) Attachments(threadID string, paths []string) ([]Attachment, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if len(paths) > MaxAttachments {
		return nil, &AttachmentError{Index: -1, Reason: fmt.Sprintf("%d files; a message attaches at most %d", len(paths), MaxAttachments)}
	}
	root, err := openWorkspaceRoot(rt.wsRoot, threadID)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent: attachments: %w", err)
	}
	if root != nil {
		defer root.Close()
	}
	out := make([]Attachment, 0, len(paths))
	for i, p := range paths {
		if slices.ContainsFunc(out, func(a Attachment) bool { return a.Path == p }) {
			continue
		}
		a, reason := attachment(root, p)
		if reason != "" {
			return nil, &AttachmentError{Index: i, Path: p, Reason: reason}
		}
		out = append(out, a)
	}
	return out, nil
}

// openWorkspaceRoot opens thread threadID's workspace under wsRoot;
// fs.ErrNotExist when it was never made.
func openWorkspaceRoot(wsRoot, threadID string) (*os.Root, error) {
	dir, err := WorkspaceDir(wsRoot, threadID)
	if err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

// attachment is the record of path in root (nil: no workspace), or why
// it cannot be attached.
func attachment(root *os.Root, path string) (Attachment, string) {
	switch {
	case path == "":
		return Attachment{}, "an empty path"
	case len(path) > maxAttachmentPath:
		return Attachment{}, fmt.Sprintf("a path longer than %d bytes", maxAttachmentPath)
	case !fs.ValidPath(path):
		return Attachment{}, `not a clean path relative to the workspace, such as "uploads/report.csv"`
	case root == nil:
		return Attachment{}, "no such file in the thread's workspace"
	}
	f, err := tools.OpenRegular(root, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Attachment{}, "no such file in the thread's workspace"
	case errors.Is(err, tools.ErrOutsideWorkspace):
		return Attachment{}, "leads outside the thread's workspace (a symlink out)"
	case errors.Is(err, tools.ErrFileType):
		return Attachment{}, "not a regular file (a directory, FIFO, socket or device)"
	case err != nil:
		return Attachment{}, "cannot be read"
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Attachment{}, "cannot be read"
	}
	typ, err := sniff(f)
	if err != nil {
		return Attachment{}, "cannot be read"
	}
	return Attachment{Path: path, Size: info.Size(), Type: typ}, ""
}

// sniff is the MIME type of r's content, without its parameters
// ("text/plain", not "text/plain; charset=utf-8").
func sniff(r io.Reader) (string, error) {
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", err
	}
	typ := http.DetectContentType(head[:n])
	if mt, _, err := mime.ParseMediaType(typ); err == nil {
		typ = mt
	}
	return typ, nil
}

// AttachmentsOf reads the attachments a stored human message keeps
// (additional_kwargs.attachments); none for any other message, or
// kwargs that do not read.
func AttachmentsOf(m *models.Message) []Attachment {
	if m.Type != TypeHuman || len(m.AdditionalKwargs) == 0 {
		return nil
	}
	var kw struct {
		Attachments []Attachment `json:"attachments"`
	}
	if json.Unmarshal(m.AdditionalKwargs, &kw) != nil {
		return nil
	}
	return kw.Attachments
}

// humanKwargs is a human message's additional_kwargs: its attachments.
func humanKwargs(atts []Attachment) models.JSON {
	if len(atts) == 0 {
		return nil
	}
	return models.MustJSON(map[string]any{kwargAttachments: atts})
}

// AttachedNote heads the note that follows a human message's text as its
// model reads it: one line per attachment, "- path (size, type)", and
// after a colon what the model should know of it (the remarks below).
const AttachedNote = "Attached files (in the workspace):"

// The remarks of the note's lines.
const (
	remarkImage     = "the image follows"
	remarkBlind     = "an image; this model cannot see images"
	remarkNotShown  = "an image, not shown again (a request shows the latest %d)"
	remarkNoRoom    = "an image, not shown: the model's context window has no room for it"
	remarkBadImage  = "an image that %s; not shown"
	remarkOtherType = "an image of a type models are not shown"
	remarkGone      = "no longer in the workspace"
)

// present readies the replayed conversation for the run's model: each
// human message's attachments become a note after its text and, for a
// model that sees, image parts read again from the workspace: the newest
// of the conversation, maxImagesPerRequest at most and, with a known
// context_window, within half its prompt budget (an 8k window holds one
// large photo), so a run is not failed for its latest message's images.
// A file gone since, or an image that does not decode, is said so in the
// note. A resumed run rebuilds its history here as a new one does, so it
// is shown the images again.
func (r *run) present(msgs []Message) {
	var root *os.Root
	if slices.ContainsFunc(msgs, func(m Message) bool { return len(m.attached) > 0 }) {
		var err error
		if root, err = os.OpenRoot(r.workspace); err != nil {
			r.logger().Warn("open the workspace for attachments", "err", err)
		} else {
			defer root.Close()
		}
	}
	shown := shownImages{room: -1}
	if r.model.Config.ContextWindow > 0 {
		shown.room = windowOf(r.model.Config).budget() / 2
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if len(m.attached) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString(AttachedNote)
		for _, a := range m.attached {
			remark, img := r.attachedFile(root, a, &shown)
			fmt.Fprintf(&b, "\n- %s (%s, %s)", a.Path, byteSize(a.Size), a.Type)
			if remark != "" {
				b.WriteString(": " + remark)
			}
			if img != nil {
				m.Images = append(m.Images, *img)
			}
		}
		m.Content = strings.TrimRight(m.Content, "\n") + "\n\n" + b.String()
		m.attached = nil
	}
}

// attachedFile is the note's remark on attachment a and, for a model that
// sees, its image, counted in shown.
func (r *run) attachedFile(root *os.Root, a Attachment, shown *shownImages) (string, *Image) {
	if root == nil {
		return remarkGone, nil
	}
	isImage := strings.HasPrefix(a.Type, "image/")
	switch {
	case isImage && !seeable[a.Type]:
		return remarkOtherType, nil
	case isImage && !r.model.Config.Vision:
		return remarkBlind, nil
	case isImage && shown.n >= maxImagesPerRequest:
		return fmt.Sprintf(remarkNotShown, maxImagesPerRequest), nil
	case isImage:
		img, err := r.env.picture(r.ctx, root, a.Path)
		switch {
		case errors.Is(err, errGone):
			return remarkGone, nil
		case err != nil:
			return fmt.Sprintf(remarkBadImage, err), nil
		}
		t := imageTokens(img)
		if shown.room >= 0 && shown.tokens+t > shown.room {
			return remarkNoRoom, nil
		}
		shown.n, shown.tokens = shown.n+1, shown.tokens+t
		return remarkImage, &img
	}
	f, err := tools.OpenRegular(root, a.Path)
	if err != nil {
		return remarkGone, nil
	}
	_ = f.Close()
	return "", nil
}

// shownImages counts the images a request carries and their estimated
// tokens, against room (-1: no bound).
type shownImages struct{ n, tokens, room int }

// byteSize is n bytes as the note writes it: "812 bytes", "12 KB",
// "3.4 MB".
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", (n+1<<9)>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// maxDecodes bounds the images decoded at once across runs: a large one
// takes about 100 MB while it is (maxImagePixels).
const maxDecodes = 2

// picture reads an attached image (picture), maxDecodes at once; one
// waiting when ctx ends is not read.
func (env *runEnv) picture(ctx context.Context, root *os.Root, path string) (Image, error) {
	if env.decodes != nil {
		select {
		case env.decodes <- struct{}{}:
			defer func() { <-env.decodes }()
		case <-ctx.Done():
			return Image{}, fmt.Errorf("was not read (%w)", ctx.Err())
		}
	}
	return picture(root, path)
}
