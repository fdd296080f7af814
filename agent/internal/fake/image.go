package fake

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/gif" // the image types the APIs take
	_ "image/jpeg"
	_ "image/png"
	"net/http"

	_ "golang.org/x/image/webp"
)

// Image is an image part of a request, decoded.
type Image struct {
	MIMEType string // as the request declared it
	Data     []byte
	// Width and Height are the decoded image's, in pixels.
	Width, Height int
}

// ImageTypes are the image types both APIs take.
var ImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// DecodeImage reads an image part as the APIs check one: base64 that
// decodes, whole, to an image of the type declared, one of ImageTypes.
func DecodeImage(mimeType, b64 string) (Image, error) {
	if !ImageTypes[mimeType] {
		return Image{}, fmt.Errorf("unsupported image type %q", mimeType)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Image{}, fmt.Errorf("invalid base64 image data: %w", err)
	}
	if got := http.DetectContentType(data); got != mimeType {
		return Image{}, fmt.Errorf("image does not match the provided media type %s (its bytes are %s)", mimeType, got)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("could not process image: %w", err)
	}
	return Image{MIMEType: mimeType, Data: data, Width: img.Bounds().Dx(), Height: img.Bounds().Dy()}, nil
}
