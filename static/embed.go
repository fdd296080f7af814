// Package static holds herd's browser assets: one stylesheet, small
// vanilla-JS modules (app.js, the entry point, and the modules it imports,
// one job each) and the icon. They are embedded so the binary is the
// whole app; the server serves FS under /static/ with content-hashed URLs.
package static

import "embed"

// FS is the embedded asset tree, its files at the root (app.css, *.js,
// favicon.svg).
//
//go:embed app.css *.js favicon.svg
var FS embed.FS
