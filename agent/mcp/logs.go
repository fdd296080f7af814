package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

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

// logGrace is how long after a call of one user's run ends a log line
// without an owner is still withheld from a call of another's: a line a
// server sends just after its answer to one call would otherwise reach
// the next caller alone in flight.
const logGrace = 2 * time.Second

// onLog routes a notifications/message of the server (observe). from is
// the call whose own HTTP response stream carried it, if any. MCP ties a
// log line to no request, so (docs/DESIGN.md §4):
//   - a line that names a call by its progress token in _meta goes to
//     that call;
//   - a line on a call's own response stream goes to that call;
//   - any other line has no owner: it goes to the calls in flight only
//     when all of them are of one user's one run and no call of another
//     user or run ended within logGrace; otherwise it reaches nobody and
//     is counted (LogLinesDropped). A line a server sends about one user's
//     call later than logGrace after it can still reach another user's
//     call alone in flight: servers should tie lines to their calls.
func (srv *server) onLog(p *logMessage, from *call) {
	text := logText(p)
	token := ""
	if t, ok := p.Meta["progressToken"]; ok && t != nil {
		token = fmt.Sprint(t)
	}
	srv.callMu.Lock()
	defer srv.callMu.Unlock()
	switch {
	case token != "":
		for _, c := range srv.calls {
			if c.token == token && c.show != nil {
				c.show(p.Level, text)
			}
		}
	case from != nil:
		if from.show != nil {
			from.show(p.Level, text)
		}
	default:
		srv.ownerless(p.Level, text)
	}
}

// ownerless hands a line without an owner to the calls in flight if they
// are all one user's one run (onLog). Called with callMu held.
func (srv *server) ownerless(level, text string) {
	if len(srv.calls) == 0 {
		return // nobody could be told: between calls, not a withheld line
	}
	owner := ""
	for _, c := range srv.calls {
		o := c.owner()
		if o == "" || (owner != "" && o != owner) {
			srv.dropped.Add(1)
			return
		}
		owner = o
	}
	now := time.Now()
	for o, at := range srv.ended {
		switch {
		case now.Sub(at) > logGrace:
			delete(srv.ended, o)
		case o != owner:
			srv.dropped.Add(1)
			return
		}
	}
	for _, c := range srv.calls {
		if c.show != nil {
			c.show(level, text)
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
func (srv *server) askLogs(ctx context.Context, sess *sdk.ClientSession, x *exchange) {
	init := sess.InitializeResult()
	//lint:ignore SA1019 logging still works (see logMessage)
	if init == nil || init.Capabilities == nil || init.Capabilities.Logging == nil {
		return
	}
	//lint:ignore SA1019 logging still works (see logMessage)
	if err := sess.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: logLevel}); err != nil {
		srv.owner.opts.Logger.Warn("mcp server refused the log level", "mcp_server", srv.cfg.Name, "err", srv.describe(ctx, err, x))
	}
}
