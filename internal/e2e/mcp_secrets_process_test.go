package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"herd/agent/mcp/mcptest"
	"io"
	stdlog "log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The secrets of an HTTP MCP server's configuration: a token in its URL's
// path, an api_key in its query, a header value.
const (
	urlPathSecret   = "p4th-s3cret-4242"
	urlQuerySecret  = "qu3ry-s3cret-4242"
	urlHeaderSecret = "h3ader-s3cret-4242"
)

// secretsIn names each secret text holds, in any case, written or
// escaped, with the text around it.
func secretsIn(text string, secrets ...string) []string {
	var out []string
	low := strings.ToLower(text)
	for _, s := range secrets {
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if i := strings.Index(low, strings.ToLower(form)); i >= 0 {
				out = append(out, fmt.Sprintf("%s in …%s…", s, text[max(i-150, 0):min(i+len(form)+50, len(text))]))
				break
			}
		}
	}
	return out
}

// failingServer is a real MCP server (an echo tool) over HTTP or HTTPS
// that can be told to fail as servers do: refuse connections, answer 401
// or 500, answer HTML or JSON that is not MCP, or (HTTPS) present a
// certificate herd does not trust. Each failing answer quotes the request's
// URL and Authorization header, as careless servers do.
type failingServer struct {
	hs    *httptest.Server
	mode  atomic.Value // string; "" serves MCP
	cert  atomic.Pointer[tls.Certificate]
	other *tls.Certificate // signed by a CA herd does not trust
}

func newFailingServer(t *testing.T, trusted, untrusted *tls.Certificate) *failingServer {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	f := &failingServer{other: untrusted}
	f.mode.Store("")
	f.hs = serveMCP(t, s, func(mcp http.Handler) http.Handler {
		return mcptest.Failing(mcp, func() string { return f.mode.Load().(string) })
	})
	if trusted != nil {
		f.cert.Store(trusted)
		// Asked for each handshake: GetCertificate is not, for a client
		// that sends no server name (an IP address).
		f.hs.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{*f.cert.Load()}, NextProtos: []string{"http/1.1"}}, nil
		}}
		f.hs.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // herd's refused handshakes are the point
		f.hs.StartTLS()
	} else {
		f.hs.Start()
	}
	return f
}

// url is the server's address with a secret in its path and its query.
func (f *failingServer) url() string {
	return f.hs.URL + "/t/" + urlPathSecret + "/mcp?api_key=" + urlQuerySecret
}

// fail makes the server fail as mode says from now on.
func (f *failingServer) fail(mode string) {
	switch mode {
	case "refused":
		f.hs.CloseClientConnections()
		f.hs.Close()
	case "tls":
		f.cert.Store(f.other)
		f.hs.CloseClientConnections() // a new connection meets the new certificate
	default:
		f.mode.Store(mode)
	}
}

// testCA makes a CA and a certificate it signs for 127.0.0.1, and
// writes the CA's certificate to a file under dir.
func testCA(t *testing.T, dir, name string) (caFile string, leaf *tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, name+".pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// adminViews is everything an admin and an operator see of herd: the
// admin page, the MCP status, the metrics and the log.
func adminViews(t *testing.T, p *proc, admin *client) map[string]string {
	t.Helper()
	resp, err := admin.http.Get(p.url + "/admin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var status []byte
	admin.call("GET", "/api/admin/mcp", nil, (*rawJSON)(&status))
	resp, err = http.Get(p.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return map[string]string{"the admin page": string(page), "GET /api/admin/mcp": string(status), "the metrics": string(metrics), "the log": p.log.String()}
}

// rawJSON keeps a JSON answer as it came.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

// mcpDown waits until n MCP servers are down, each with a failed
// operation named prefix (connect, start) as its last error.
func (c *client) mcpDown(prefix string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Servers []struct {
				Name, State string
				LastError   string `json:"last_error"`
			} `json:"servers"`
		}
		c.call("GET", "/api/admin/mcp", nil, &st)
		down := 0
		for _, s := range st.Servers {
			if s.State != "connected" && strings.HasPrefix(s.LastError, prefix) {
				down++
			}
		}
		if down == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the MCP servers are not all down after a failed %s: %+v", prefix, st.Servers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var refOf = regexp.MustCompile(`ref ([0-9a-f]{8})\)`)

// HTTP MCP servers whose URLs hold secrets fail, after herd connected, in
// each way a server fails: refused connections, 401, 500, a certificate
// herd does not trust, an answer that is not MCP. The tool results the
// model reads, the answers, the stored events and the frames say what
// failed with the host and a reference, and no secret; nor do the admin
// page, GET /api/admin/mcp, the metrics or the log (docs/DESIGN.md §4).
func TestMCPFailuresKeepTheURLSecret(t *testing.T) {
	dir := t.TempDir()
	caFile, trusted := testCA(t, dir, "trusted")
	_, untrusted := testCA(t, dir, "untrusted")
	modes := []struct{ name, want string }{
		{"refused", "connection refused"},
		{"401", "HTTP 401 Unauthorized"},
		{"500", "HTTP 500 Internal Server Error"},
		{"tls", "TLS: its certificate is signed by an unknown authority"},
		{"html", "its answer is not MCP (neither JSON nor an event stream)"},
		{"json", "its answer is not valid MCP"},
	}
	servers := map[string]*failingServer{}
	var cfgs, lead []string
	for _, m := range modes {
		var f *failingServer
		if m.name == "tls" {
			f = newFailingServer(t, trusted, untrusted)
		} else {
			f = newFailingServer(t, nil, nil)
		}
		servers[m.name] = f
		name := "s" + m.name
		cfgs = append(cfgs, fmt.Sprintf("{name: %s, url: '%s', headers: {Authorization: 'Bearer %s'}, timeout_seconds: 5}", name, f.url(), urlHeaderSecret))
		lead = append(lead, "'mcp:"+name+"/*'")
	}
	p := startHerdWith(t, dir,
		"HERD_MCP_SERVERS=["+strings.Join(cfgs, ", ")+"]",
		"HERD_LEAD_TOOLS=["+strings.Join(lead, ", ")+"]",
		"SSL_CERT_FILE="+caFile,
	)
	admin := p.signIn()
	var th struct{ ID string }
	admin.call("POST", "/api/threads", map[string]string{"title": "secrets"}, &th)
	frames := watchFrames(t, p, admin, th.ID)
	answer := func(server string) string {
		got := admin.send(th.ID, "use s"+server+`/echo with {"text":"hi"}`)
		return got.Messages[len(got.Messages)-1].Content
	}
	for _, m := range modes {
		if a := answer(m.name); !strings.Contains(a, "echo: hi") {
			t.Fatalf("before the failure, s%s answered %q", m.name, a)
		}
	}

	// Each fails: a call fails; its session, ended, fails to connect
	// again. (A run is offered no tool of a server that is down, so what
	// a call reads of the server's state is left to agent/mcp's tests.)
	answers := map[string]string{}
	for _, m := range modes {
		servers[m.name].fail(m.name)
		answers[m.name] = answer(m.name)
	}
	for _, f := range servers {
		f.hs.CloseClientConnections()
	}
	admin.mcpDown("connect", len(modes))

	views := adminViews(t, p, admin)
	views["the model and the user"] = admin.stored(th.ID)
	views["the frames"] = frames.String()
	for name, text := range views {
		for _, l := range secretsIn(text, urlPathSecret, urlQuerySecret, urlHeaderSecret) {
			t.Errorf("%s shows %s", name, l)
		}
	}
	for _, m := range modes {
		host := strings.TrimPrefix(strings.TrimPrefix(servers[m.name].hs.URL, "http://"), "https://")
		a := answers[m.name]
		if !strings.Contains(a, "call echo ("+host+"): "+m.want) {
			t.Errorf("s%s: the answer is %q, want the failed call at %s: %q", m.name, a, host, m.want)
		}
		ref := refOf.FindStringSubmatch(a)
		if ref == nil || !strings.Contains(views["the admin page"], `data-ref="`+ref[1]+`"`) || !strings.Contains(views["the log"], "ref="+ref[1]) {
			t.Errorf("s%s: the answer %q has no reference the admin page and the log hold", m.name, a)
		}
		if !strings.Contains(views["the admin page"], "connect ("+host+"): "+m.want) {
			t.Errorf("s%s: the admin page does not say connecting failed: %q", m.name, m.want)
		}
	}
}

// A stdio MCP server (the everything server) that prints on stderr, is
// killed mid-call and fails to start again: the user and the model read
// "the server failed" with a reference the admin page and the log hold;
// the admin page has what it printed, without the values of its env
// (docs/DESIGN.md §4).
func TestMCPStderrIsForAdmins(t *testing.T) {
	bin := repoPath(t, everythingServer)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make mcp-test-server`: %v", everythingServer, err)
	}
	dir := t.TempDir()
	const token = "env-t0ken-4242"
	mark, pidFile := filepath.Join(dir, "broken"), filepath.Join(dir, "pid")
	script := `if [ -e "$MARK" ]; then echo "cannot start: the disk is gone, token $TOKEN" >&2; exit 1; fi; ` +
		`echo "starting with token $TOKEN" >&2; echo $$ > "$PIDFILE"; exec "$BIN" stdio`
	p := startHerdWith(t, dir,
		fmt.Sprintf("HERD_MCP_SERVERS=[{name: kid, command: sh, args: ['-c', '%s'], env: {TOKEN: %s, MARK: '%s', PIDFILE: '%s', BIN: '%s'}, timeout_seconds: 30}]", script, token, mark, pidFile, bin),
		"HERD_LEAD_TOOLS=['mcp:kid/*']",
	)
	admin := p.signIn()
	var th struct{ ID string }
	admin.call("POST", "/api/threads", map[string]string{"title": "stderr"}, &th)
	frames := watchFrames(t, p, admin, th.ID)
	admin.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": `use kid/trigger-long-running-operation with {"duration": 20, "steps": 20}`}, nil)
	if !frames.waitFor(`"tool_progress"`, 30*time.Second) {
		t.Fatalf("the call never made progress: %s", frames.String())
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	admin.waitIdle(th.ID)
	admin.mcpDown("start", 1)

	var got threadMessages
	admin.call("GET", "/api/threads/"+th.ID, nil, &got)
	answer := got.Messages[len(got.Messages)-1].Content
	user := admin.stored(th.ID) + "\n" + frames.String()
	for _, l := range secretsIn(user, "starting with token", "cannot start", "the disk is gone", token, "signal: killed") {
		t.Errorf("the user and the model read the server's stderr or process: %s", l)
	}
	views := adminViews(t, p, admin)
	ref := refOf.FindStringSubmatch(answer)
	if ref == nil || !strings.Contains(answer, "call trigger-long-running-operation: the server failed (ref ") {
		t.Fatalf("the answer is %q, want the server failed, with a reference", answer)
	}
	if !strings.Contains(views["the admin page"], `data-ref="`+ref[1]+`"`) || !strings.Contains(views["the log"], "ref="+ref[1]) {
		t.Errorf("the reference %s the user was given is not on the admin page and in the log", ref[1])
	}
	for _, want := range []string{"cannot start: the disk is gone, token [redacted]", "starting with token [redacted]"} {
		if !strings.Contains(views["the admin page"], want) {
			t.Errorf("the admin page lacks the server's stderr %q", want)
		}
	}
	for name, text := range views {
		for _, l := range secretsIn(text, token) {
			t.Errorf("%s shows the env value: %s", name, l)
		}
	}
}
