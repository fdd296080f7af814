package agent

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decodes GIF; PNG and JPEG register with their encoders
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // decodes WebP, which the stdlib does not

	"herd/agent/tools"
)

// The bounds of an image sent to a model that sees (docs/DESIGN.md §3).
// One set serves both providers: Anthropic's are the tighter (a long edge
// of 1568 px before it scales down itself, 5 MB of base64 per image);
// OpenAI's high detail scales to 2048 px and takes 20 MB, so an image
// within Anthropic's loses nothing OpenAI would have kept but pixels it
// would have scaled away.
const (
	maxImageEdge = 1568
	// maxImageBytes bounds the encoded image so that its base64 is at
	// most 5 MiB.
	maxImageBytes = 5 << 20 / 4 * 3
	// maxImagePixels bounds what is decoded at all: 24 million pixels
	// (6000×4000) take about 96 MB as RGBA; a larger picture, or a
	// decompression bomb, is noted, not decoded.
	maxImagePixels = 24_000_000
	// maxImageFile bounds the bytes read of an image file.
	maxImageFile = 32 << 20
	// maxImagesPerRequest bounds the images one request carries: the
	// newest of the conversation; Anthropic takes 100 at most.
	maxImagesPerRequest = 20
	// jpegQuality is the quality of an image re-encoded as JPEG.
	jpegQuality = 85
)

// Image is a picture a human message shows a model that sees
// (ModelConfig.Vision), encoded within the bounds above.
type Image struct {
	Path     string // the workspace path the message's note names it by
	MIMEType string // image/png, image/jpeg, image/gif or image/webp
	Data     []byte
	// Width and Height are Data's, in pixels.
	Width, Height int
}

// seeable are the image types a model is shown: never SVG, a document
// that can carry script rather than a picture.
var seeable = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// errGone is an attached file that is no longer in the workspace.
var errGone = errors.New("no longer in the workspace")

// errUndecodable is an image that is not shown: what it holds cannot be
// decoded, or not within the bounds.
var errUndecodable = errors.New("could not be decoded")

// picture reads the image a message attached from the workspace root and
// readies it for a model: as it is when within the bounds, else scaled
// down and encoded again. A file gone or replaced since is errGone or
// errUndecodable.
func picture(root *os.Root, path string) (Image, error) {
	f, err := tools.OpenRegular(root, path)
	if err != nil {
		return Image{}, errGone
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxImageFile+1))
	switch {
	case err != nil:
		return Image{}, errGone
	case len(data) > maxImageFile:
		return Image{}, fmt.Errorf("%w: over %d MB", errUndecodable, maxImageFile>>20)
	}
	typ := http.DetectContentType(data)
	if !seeable[typ] {
		return Image{}, fmt.Errorf("%w: its bytes are %s now", errUndecodable, typ)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("%w as %s", errUndecodable, typ)
	}
	if cfg.Width*cfg.Height > maxImagePixels {
		return Image{}, fmt.Errorf("%w: %d×%d pixels, over %d million", errUndecodable, cfg.Width, cfg.Height, maxImagePixels/1_000_000)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("%w as %s", errUndecodable, typ)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if max(w, h) <= maxImageEdge && len(data) <= maxImageBytes {
		return Image{Path: path, MIMEType: typ, Data: data, Width: w, Height: h}, nil
	}
	out, err := sizeDown(img, typ)
	if err != nil {
		return Image{}, err
	}
	out.Path = path
	return out, nil
}

// sizeDown scales img to a long edge of maxImageEdge at most and encodes
// it within maxImageBytes: as PNG when it came as PNG or GIF (drawings,
// screenshots, transparency), else, or when the PNG is too large, as
// JPEG; a JPEG still too large is scaled down by a quarter at a time.
func sizeDown(img image.Image, typ string) (Image, error) {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	scale := min(1, float64(maxImageEdge)/float64(max(w, h)))
	asPNG := typ == "image/png" || typ == "image/gif"
	for range 8 {
		dw, dh := max(1, int(float64(w)*scale+0.5)), max(1, int(float64(h)*scale+0.5))
		var buf bytes.Buffer
		mimeType := "image/jpeg"
		if asPNG {
			mimeType = "image/png"
			if err := png.Encode(&buf, scaled(img, dw, dh, false)); err != nil {
				return Image{}, fmt.Errorf("%w: %v", errUndecodable, err)
			}
		} else if err := jpeg.Encode(&buf, scaled(img, dw, dh, true), &jpeg.Options{Quality: jpegQuality}); err != nil {
			return Image{}, fmt.Errorf("%w: %v", errUndecodable, err)
		}
		if buf.Len() <= maxImageBytes {
			return Image{MIMEType: mimeType, Data: buf.Bytes(), Width: dw, Height: dh}, nil
		}
		if asPNG {
			asPNG = false
			continue
		}
		scale *= 0.75
	}
	return Image{}, fmt.Errorf("%w: no smaller encoding fits %d MB", errUndecodable, maxImageBytes>>20)
}

// scaled is img resampled to w×h (Catmull-Rom: sharp, without the
// ringing of Lanczos at these ratios); opaque lays it on white first, as
// JPEG has no transparency.
func scaled(img image.Image, w, h int, opaque bool) image.Image {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	op := draw.Src
	if opaque {
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		op = draw.Over
	}
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, img.Bounds(), op, nil)
	return dst
}
