package views

import "testing"

// TestFileSize: the sizes a chip shows; static/format.js fileSize is
// held to the same by TestBrowserAttach.
func TestFileSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KB"}, {1075, "1.0 KB"}, {1076, "1.1 KB"},
		{1<<20 - 52, "1023.9 KB"}, {1<<20 - 51, "1.0 MB"}, {1<<20 - 1, "1.0 MB"}, {1 << 20, "1.0 MB"}, {5<<20 + 52429, "5.1 MB"}, {3 << 30, "3072.0 MB"},
	} {
		if got := FileSize(c.n); got != c.want {
			t.Errorf("FileSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
