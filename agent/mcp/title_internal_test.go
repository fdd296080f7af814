package mcp

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolTitle: a tool reads as its server's title (else its configured
// name) › its own title (else annotations.title, else its name with
// underscores as spaces).
func TestToolTitle(t *testing.T) {
	srv := &server{cfg: ServerConfig{Name: "files"}}
	schema := map[string]any{"type": "object"}
	for _, c := range []struct {
		name, serverTitle string
		tool              *sdk.Tool
		want              string
	}{
		{"titles", "Files", &sdk.Tool{Name: "list_directory", Title: "List directory", InputSchema: schema}, "Files › List directory"},
		{"annotations", "", &sdk.Tool{Name: "list_directory", Annotations: &sdk.ToolAnnotations{Title: "List a folder"}, InputSchema: schema}, "files › List a folder"},
		{"title over annotations", "", &sdk.Tool{Name: "x", Title: "Own", Annotations: &sdk.ToolAnnotations{Title: "Annotated"}, InputSchema: schema}, "files › Own"},
		{"names", " ", &sdk.Tool{Name: "read__text_file", InputSchema: schema}, "files › read text file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, err := srv.adaptOne(c.tool, c.serverTitle)
			if err != nil {
				t.Fatal(err)
			}
			if got := tool.Title(); got != c.want {
				t.Errorf("Title() = %q, want %q", got, c.want)
			}
		})
	}
}
