// Package static holds herd's browser assets: one stylesheet, two small
// vanilla-JS modules (app.js and the cards.js it imports) and the icon.
// They are embedded so the binary is the whole app; the server serves FS
// under /static/ with content-hashed URLs.
package static

import "embed"

// FS is the embedded asset tree, its files at the root (app.css, app.js,
// cards.js, favicon.svg).
//
//go:embed app.css app.js cards.js favicon.svg
var FS embed.FS
