package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent/tools"
)

// Tool is one tool of an MCP server as agents see it.
type Tool struct {
	srv    *server
	name   string // the server's own name for it
	title  string // server › tool, as people read them (Title)
	spec   tools.Spec
	schema *jsonschema.Resolved
	// repeatable: the server annotates the tool read-only or idempotent.
	repeatable bool
}

// Repeatable reports whether the server says the tool only reads, or
// may be called again with the same effect (its annotations'
// readOnlyHint or idempotentHint): after a restart such a call is made
// again, any other is not (tools.Repeatable).
func (t *Tool) Repeatable() bool { return t.repeatable }

// Title is the tool as people read it: its server's title (the
// initialize result's serverInfo.title) or name, › and the tool's title
// (title, else annotations.title) or its name with underscores as spaces.
func (t *Tool) Title() string { return t.title }

// Spec is the tool with the schema its server publishes.
func (t *Tool) Spec() tools.Spec { return t.spec }

// MCP names the tool's server and the server's name for it, for tools
// lists (mcp:<server>/<tool>).
func (t *Tool) MCP() (server, tool string) { return t.srv.cfg.Name, t.name }

// Run checks args against the published schema, then calls the tool on
// the server's current session within the server's timeout. A cancelled
// or timed-out call ends at once; the SDK tells the server with
// notifications/cancelled. The server's own answers (a tool error, a
// JSON-RPC error) are returned as errors, for the model to read; a
// failure of the server or its transport only as herd tells it to users
// (failure.go).
func (t *Tool) Run(ctx context.Context, env tools.Env, args json.RawMessage) (string, error) {
	in, err := t.check(args)
	if err != nil {
		return "", err
	}
	sess, err := t.srv.session()
	if err != nil {
		return "", err
	}
	params := &sdk.CallToolParams{Name: t.name, Arguments: in}
	c := &call{user: env.User, run: env.Run, show: env.Log, http: &exchange{}}
	if env.Progress != nil {
		c.token = t.srv.owner.watchProgress(t.name, env.Progress)
		defer t.srv.owner.progress.Delete(c.token)
		params.SetProgressToken(c.token)
	}
	if env.Log != nil {
		askLogsOf(params)
	}
	defer t.srv.begin(c)()
	cctx, cancel := context.WithTimeout(withCall(ctx, c), t.srv.cfg.timeout())
	defer cancel()
	res, err := sess.CallTool(cctx, params)
	switch {
	case ctx.Err() != nil:
		return "", context.Cause(ctx)
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("the MCP server %s did not finish %s within %ds (its timeout_seconds); the call was cancelled", t.srv.cfg.Name, t.name, t.srv.cfg.TimeoutSeconds)
	case err != nil:
		return "", t.failed(cctx, err, c.http)
	}
	out := render(res, t.srv.owner.opts.OutputLimit)
	if env.Image != nil {
		showImages(res, env.Image)
	}
	if res.IsError {
		if out == "" {
			out = "the tool reported an error without a message"
		}
		return "", errors.New(out)
	}
	return out, nil
}

// failed is the error the model reads for a call that ended in err: the
// server's JSON-RPC error answer, without the server's secrets should it
// echo one; or a failure of the server or its transport, recorded and
// logged for admins under the reference the model and the user are given.
func (t *Tool) failed(ctx context.Context, err error, x *exchange) error {
	var answer *jsonrpc.Error
	if trouble, _ := x.result(); trouble == "" && errors.As(err, &answer) {
		return fmt.Errorf("the MCP server %s answered the call with an error: %s", t.srv.cfg.Name, t.srv.redact(answer.Message))
	}
	f := t.srv.fault(ctx, "call "+t.name, err, x)
	return fmt.Errorf("the MCP server %s failed: %s", t.srv.cfg.Name, f.public)
}

// check decodes args (empty or null read as {}) and validates them
// against the tool's schema.
func (t *Tool) check(args json.RawMessage) (map[string]any, error) {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return nil, fmt.Errorf("%w: arguments must be a JSON object", tools.ErrBadArgs)
	}
	if err := t.schema.Validate(in); err != nil {
		return nil, fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
	}
	return in, nil
}

// adapt turns the server's tools into Tools: those the server's allow-
// and deny-lists keep, whose schema herd can resolve and whose model name
// no earlier tool took. skipped says why the others are left out.
func (srv *server) adapt(list []*sdk.Tool, serverTitle string) (out []*Tool, skipped []string) {
	taken := map[string]bool{}
	for _, st := range list {
		if (srv.cfg.Tools != nil && !slices.Contains(*srv.cfg.Tools, st.Name)) || slices.Contains(srv.cfg.DisallowedTools, st.Name) {
			continue
		}
		t, err := srv.adaptOne(st, serverTitle)
		if err == nil && taken[t.spec.Name] {
			err = fmt.Errorf("its model name %s is taken by another of the server's tools", t.spec.Name)
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", st.Name, err))
			continue
		}
		taken[t.spec.Name] = true
		out = append(out, t)
	}
	return out, skipped
}

func (srv *server) adaptOne(st *sdk.Tool, serverTitle string) (*Tool, error) {
	raw, err := json.Marshal(st.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	// No loader: a schema that refers to another document is not fetched.
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	desc := st.Description
	if desc == "" {
		desc = st.Title
	}
	a := st.Annotations
	title := st.Title
	if title == "" && a != nil {
		title = a.Title
	}
	if title == "" {
		title = strings.Join(strings.FieldsFunc(st.Name, func(r rune) bool { return r == '_' }), " ")
	}
	return &Tool{
		srv:        srv,
		name:       st.Name,
		title:      cmp.Or(strings.TrimSpace(serverTitle), srv.cfg.Name) + " › " + strings.TrimSpace(title),
		spec:       tools.Spec{Name: ModelName(srv.cfg.Name, st.Name), Description: desc, Parameters: raw},
		schema:     resolved,
		repeatable: a != nil && (a.ReadOnlyHint || a.IdempotentHint),
	}, nil
}
