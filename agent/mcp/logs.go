package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// logLevel is the level herd asks a server that logs for: info and up,
// so debug chatter does not crowd a call's last lines.
const logLevel = "info"

// MCP 2026-07-28 deprecates logging (SEP-2577) but keeps it working for a
// year at least, and servers send it: herd reads log messages in its own
// type (logMessage) and names the two deprecated calls it still makes.

// logMessage is a notifications/message's params.
type logMessage struct {
	Level  string         `json:"level"`
	Logger string         `json:"logger,omitempty"`
	Data   any            `json:"data"`
	Meta   map[string]any `json:"_meta,omitempty"`
}

// watchLogs routes the server's log messages (notifications/message) to
// show while a call runs. MCP ties a log message to no request, so one
// goes to every call of the server in flight, unless it names one call
// by that call's progress token in its _meta. The returned func stops it.
func (srv *server) watchLogs(token string, show func(level, text string)) func() {
	srv.logMu.Lock()
	defer srv.logMu.Unlock()
	srv.nextLog++
	id := srv.nextLog
	if srv.logWatch == nil {
		srv.logWatch = map[uint64]logWatch{}
	}
	srv.logWatch[id] = logWatch{token: token, show: show}
	return func() {
		srv.logMu.Lock()
		delete(srv.logWatch, id)
		srv.logMu.Unlock()
	}
}

type logWatch struct {
	token string // the call's progress token, if it has one
	show  func(level, text string)
}

// onLog routes a notifications/message of the server (observe).
func (srv *server) onLog(p *logMessage) {
	text := logText(p)
	token := ""
	if t, ok := p.Meta["progressToken"]; ok && t != nil {
		token = fmt.Sprint(t)
	}
	srv.logMu.Lock()
	defer srv.logMu.Unlock()
	for _, w := range srv.logWatch {
		if token == "" || w.token == token {
			w.show(p.Level, text)
		}
	}
}

// logText is a log message on one line: its logger's name, then its data
// (a string as it is, anything else as JSON).
func logText(p *logMessage) string {
	var text string
	switch d := p.Data.(type) {
	case string:
		text = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			b = []byte(fmt.Sprint(d))
		}
		text = string(b)
	}
	if p.Logger != "" {
		text = p.Logger + ": " + text
	}
	return strings.Join(strings.Fields(text), " ")
}

// metaLogLevel is the _meta key that asks for a call's log messages
// under MCP 2026-07-28, which has no session to set a level on
// (sdk.MetaKeyLogLevel, named here because it is marked deprecated with
// the logging feature, which still works for at least a year).
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// askLogsOf asks for the call's log messages from logLevel up.
func askLogsOf(p *sdk.CallToolParams) {
	if p.Meta == nil {
		p.Meta = sdk.Meta{}
	}
	p.Meta[metaLogLevel] = logLevel
}

// askLogs asks a server that says it logs to send its log messages from
// logLevel up; without that, a server of an older MCP version sends none.
func (srv *server) askLogs(ctx context.Context, sess *sdk.ClientSession) {
	init := sess.InitializeResult()
	//lint:ignore SA1019 logging still works (see logMessage)
	if init == nil || init.Capabilities == nil || init.Capabilities.Logging == nil {
		return
	}
	//lint:ignore SA1019 logging still works (see logMessage)
	if err := sess.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: logLevel}); err != nil {
		srv.owner.opts.Logger.Warn("mcp server refused the log level", "mcp_server", srv.cfg.Name, "err", err)
	}
}
