package server

import (
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"testing"

	"herd/static"
)

// TestBrowserStaticModules checks that the thread page loads every module
// of static/ through its relative imports, and that those plain URLs are
// revalidated (no-cache with the content hash as ETag, 304 when
// unchanged) while the hashed URL of the entry point stays immutable.
func TestBrowserStaticModules(t *testing.T) {
	a, b := openEmptyThread(t, "modules")

	loaded := evalAs[[]string](b, `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname).filter((p) => p.endsWith(".js"))`)
	modules, err := fs.Glob(static.FS, "*.js")
	if err != nil {
		t.Fatal(err)
	}
	// Modules of other pages, run by their pages' tests.
	elsewhere := map[string]string{"console.js": "the admin page's (TestBrowserConsoleModel)"}
	for _, name := range modules {
		if _, other := elsewhere[name]; !other && !slices.Contains(loaded, "/static/"+name) {
			t.Errorf("static/%s is not loaded by the thread page (loaded: %v)", name, loaded)
		}
		res := getStatic(t, a.http.URL+"/static/"+name, "")
		etag := res.Header.Get("ETag")
		if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-cache" || etag == "" {
			t.Errorf("GET /static/%s: status %d, Cache-Control %q, ETag %q; want 200, no-cache and an ETag",
				name, res.StatusCode, res.Header.Get("Cache-Control"), etag)
			continue
		}
		if res := getStatic(t, a.http.URL+"/static/"+name, etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("GET /static/%s with If-None-Match %s: status %d, want 304", name, etag, res.StatusCode)
		}
	}
	entry := evalAs[string](b, `document.querySelector('script[type="module"]').getAttribute("src")`)
	if !strings.HasPrefix(entry, "/static/app.js?v=") {
		t.Fatalf("entry script %q, want the hashed /static/app.js", entry)
	}
	if res := getStatic(t, a.http.URL+entry, ""); !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s: Cache-Control %q, want immutable", entry, res.Header.Get("Cache-Control"))
	}
}

// getStatic fetches url, with If-None-Match when etag is set, and closes the body.
func getStatic(t *testing.T, url, etag string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}
