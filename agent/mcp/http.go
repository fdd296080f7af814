package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpTransport talks to the configured URL only: every request carries
// the configured headers, a request for any other origin is refused, and
// no redirect is followed (docs/OPERATIONS.md, "MCP servers"). What each
// request meets is noted on its context's exchange, for herd's own
// account of a failure (failure.go).
func httpTransport(c ServerConfig, see func(context.Context, jsonrpc.Message)) (sdk.Transport, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, errors.New("the url does not parse")
	}
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{
		Transport: &pinned{scheme: u.Scheme, host: u.Host, headers: h, base: base, see: see},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the MCP server redirected; herd follows no redirect (set url to the final address)")
		},
	}
	return &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: client, MaxRetries: 2}, nil
}

// pinned is a RoundTripper for one origin that adds the server's headers.
type pinned struct {
	scheme, host string
	headers      http.Header
	base         *http.Transport
	// see is shown every message of an event stream, with the context of
	// the request it answers.
	see func(context.Context, jsonrpc.Message)
}

func (p *pinned) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchangeOf(req.Context())
	if !strings.EqualFold(req.URL.Scheme, p.scheme) || !strings.EqualFold(req.URL.Host, p.host) {
		err := fmt.Errorf("%w: %s://%s is not the configured MCP server address", errOtherOrigin, req.URL.Scheme, req.URL.Host)
		x.note(req, nil, err)
		return nil, err
	}
	req = req.Clone(req.Context())
	for k, v := range p.headers {
		req.Header[k] = v
	}
	resp, err := p.base.RoundTrip(req)
	x.note(req, resp, err)
	if err == nil && p.see != nil {
		ctx := req.Context()
		observeEvents(resp, func(m jsonrpc.Message) { p.see(ctx, m) })
	}
	return resp, err
}
