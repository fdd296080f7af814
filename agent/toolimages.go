package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// MaxToolImageBytes bounds one image a tool returns; a larger one is
// left out of its call's output, with the reason.
const MaxToolImageBytes = 2 << 20

// toolImageTypes are the image types kept, by MIME type, with the file
// extension they are stored under. SVG is not among them: it is a
// document that can carry script, not a picture.
var toolImageTypes = map[string]string{
	"image/png":  "png",
	"image/jpeg": "jpg",
	"image/gif":  "gif",
	"image/webp": "webp",
}

// toolImageName is a stored image's file name: the hash of its bytes
// and its extension. Nothing else is ever opened.
var toolImageName = regexp.MustCompile(`^[0-9a-f]{64}\.(png|jpg|gif|webp)$`)

// ToolImages keeps the images tools return, one directory per thread
// under its root, each file named by the hash of its bytes (so the same
// image is kept once). The server serves them to the thread's owner
// (GET /api/threads/{id}/tool-images/{name}); a deleted thread's go with
// its workspace (RemoveWorkspace).
type ToolImages struct {
	root string
	// roots are root, then the roots an earlier herd kept images under:
	// read and removed, never written.
	roots []string
}

// NewToolImages keeps images under root, created on first use, and still
// finds those kept under the older roots.
func NewToolImages(root string, older ...string) *ToolImages {
	return &ToolImages{root: root, roots: append([]string{root}, older...)}
}

// errImage is an image a tool returned that is not kept.
var errImage = errors.New("image not kept")

// Put keeps data, declared as mimeType, for thread threadID. It keeps
// only an allowed type whose bytes are what they claim to be (sniffed as
// browsers would) and not over MaxToolImageBytes.
func (s *ToolImages) Put(threadID, mimeType string, data []byte) (ToolImage, error) {
	img := ToolImage{MIMEType: mimeType, Bytes: len(data)}
	ext, ok := toolImageTypes[mimeType]
	switch {
	case !ok:
		return img, fmt.Errorf("%w: %s is not a type herd shows (png, jpeg, gif, webp)", errImage, mimeType)
	case len(data) > MaxToolImageBytes:
		return img, fmt.Errorf("%w: %d bytes, over the %d byte limit", errImage, len(data), MaxToolImageBytes)
	case http.DetectContentType(data) != mimeType:
		return img, fmt.Errorf("%w: the bytes are not a %s image", errImage, mimeType)
	}
	if _, err := uuid.Parse(threadID); err != nil {
		return img, fmt.Errorf("%w: bad thread id", errImage)
	}
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:]) + "." + ext
	if err := s.write(threadID, name, data); err != nil {
		return img, err
	}
	img.ID = name
	return img, nil
}

// write stores the file through an os.Root on the thread's directory, by
// a temporary name renamed into place, so a reader never sees half of it.
func (s *ToolImages) write(threadID, name string, data []byte) error {
	dir, err := s.threadDir(threadID, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	if _, err := dir.Stat(name); err == nil {
		return nil
	}
	tmp := name + ".tmp-" + uuid.NewString()
	if err := dir.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("keep image: %w", err)
	}
	if err := dir.Rename(tmp, name); err != nil {
		_ = dir.Remove(tmp)
		return fmt.Errorf("keep image: %w", err)
	}
	return nil
}

func (s *ToolImages) threadDir(threadID string, create bool) (*os.Root, error) {
	return threadDir(s.root, threadID, create)
}

func threadDir(under, threadID string, create bool) (*os.Root, error) {
	if create {
		if err := os.MkdirAll(under, 0o700); err != nil {
			return nil, fmt.Errorf("keep image: %w", err)
		}
	}
	root, err := os.OpenRoot(under)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if create {
		if err := root.Mkdir(threadID, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("keep image: %w", err)
		}
	}
	return root.OpenRoot(threadID)
}

// Open opens image name of thread threadID, with its Content-Type; a
// name that is not one Put gives is fs.ErrNotExist.
func (s *ToolImages) Open(threadID, name string) (*os.File, string, error) {
	m := toolImageName.FindStringSubmatch(name)
	if m == nil || uuid.Validate(threadID) != nil {
		return nil, "", fs.ErrNotExist
	}
	f, err := s.open(threadID, name)
	if err != nil {
		return nil, "", err
	}
	for typ, ext := range toolImageTypes {
		if ext == m[1] {
			return f, typ, nil
		}
	}
	_ = f.Close()
	return nil, "", fs.ErrNotExist
}

// open opens a thread's image from the root, or else an older one.
func (s *ToolImages) open(threadID, name string) (*os.File, error) {
	var first error
	for _, under := range s.roots {
		dir, err := threadDir(under, threadID, false)
		if err == nil {
			var f *os.File
			f, err = dir.Open(name)
			_ = dir.Close()
			if err == nil {
				return f, nil
			}
		}
		if first == nil || errors.Is(first, fs.ErrNotExist) {
			first = err
		}
	}
	return nil, first
}

// remove deletes a thread's images, under every root; none is not an
// error.
func (s *ToolImages) remove(threadID string) error {
	for _, under := range s.roots {
		if err := removeUnder(under, threadID); err != nil {
			return err
		}
	}
	return nil
}

func removeUnder(under, threadID string) error {
	root, err := os.OpenRoot(under)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(threadID)
}

// imageNote is why an image is not shown, for the card.
func imageNote(err error) string {
	return strings.TrimPrefix(err.Error(), errImage.Error()+": ")
}
