// Package static holds herd's browser assets: one stylesheet, one small
// vanilla-JS module and the icon. They are embedded so the binary is the
// whole app; the server serves FS under /static/ with content-hashed URLs.
package static

import "embed"

// FS is the embedded asset tree, its files at the root (app.css, app.js,
// favicon.svg).
//
//go:embed app.css app.js favicon.svg
var FS embed.FS
