// Package static holds herd's browser assets: one stylesheet, small
// vanilla-JS modules (app.js, the entry point, and the modules it imports,
// one job each) and the icon. They are embedded so the binary is the
// whole app. The server serves FS under /static/: pages link the entry
// points by content-hashed URLs (cached for good), and modules import each
// other by plain URL, served no-cache with the content hash as ETag.
package static

import "embed"

// FS is the embedded asset tree, its files at the root (app.css, *.js,
// favicon.svg, and the web app manifest with its PNG icons, made from
// favicon.svg).
//
//go:embed app.css *.js favicon.svg icon-*.png manifest.webmanifest katex
var FS embed.FS
