package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// idleThreads is how many threads the idle sockets watch between them.
const idleThreads = 100

// raiseFileLimit lifts this process's open-file limit to its hard limit;
// herd, started afterwards, inherits it. Each idle socket costs one
// descriptor here and one in herd.
func raiseFileLimit(need int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return err
		}
	}
	if int(l.Cur) < need {
		return fmt.Errorf("open files: hard limit %d, need %d (raise it with ulimit -Hn)", l.Cur, need)
	}
	return nil
}

// idleFigures is what an idle run measures of herd.
type idleFigures struct {
	sockets             int
	rssBefore, rssAfter int64 // VmRSS with no socket, and with all connected
	peak                int64 // VmHWM at the end
	goroutines          float64
	connect, reach      time.Duration // to connect them all; for one frame to reach all
}

// idle holds o.idle WebSocket clients open on idleThreads threads without
// any run, lets herd settle, and measures its resident memory per socket.
// Then it proves every socket is live: the admin flips the token switch,
// which reaches every client as a settings frame.
func idle(ctx context.Context, o options, h *herd) error {
	threads, err := openThreads(h, idleThreads)
	if err != nil {
		return err
	}
	f := idleFigures{sockets: o.idle}
	if f.rssBefore, err = settledRSS(ctx, h); err != nil {
		return err
	}
	var settings sync.WaitGroup
	settings.Add(o.idle)
	conns, dialed, err := dialIdle(ctx, h, threads, o.idle, settings.Done)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool { v, _ := h.metric("herd_ws_clients"); return int(v) == o.idle }); err != nil {
		return fmt.Errorf("herd does not count %d clients: %w", o.idle, err)
	}
	f.connect = dialed
	if f.rssAfter, err = settledRSS(ctx, h); err != nil {
		return err
	}
	f.goroutines, _ = h.metric("go_goroutines")
	t0 := time.Now()
	if err := h.call("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": true}, nil); err != nil {
		return err
	}
	reached := make(chan struct{})
	go func() { settings.Wait(); close(reached) }()
	select {
	case <-reached:
		f.reach = time.Since(t0)
	case <-ctx.Done():
		return errors.New("the settings frame did not reach every idle client")
	}
	f.peak, _ = h.peakRSS()
	f.print()
	if per := f.perSocket(); o.idleBar > 0 && f.rssAfter > o.idleBar {
		return fmt.Errorf("RSS %.1f MB with %d idle sockets (%.1f KB each) over the bar of %.0f MB",
			mb(f.rssAfter), f.sockets, float64(per)/1024, mb(o.idleBar))
	}
	return nil
}

// dialIdle opens n sockets, spread over threads, a few dozen handshakes
// at a time. Each socket's reader calls settled once, on its first
// settings frame.
func dialIdle(ctx context.Context, h *herd, threads []string, n int, settled func()) ([]*websocket.Conn, time.Duration, error) {
	// The driver holds its own n sockets: small buffers keep it light.
	d := websocket.Dialer{ReadBufferSize: 512, WriteBufferSize: 512, HandshakeTimeout: 30 * time.Second}
	hdr := http.Header{"Authorization": {"Bearer " + h.tok}}
	base := "ws" + strings.TrimPrefix(h.url, "http")
	conns := make([]*websocket.Conn, n)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil || ctx.Err() != nil {
					return
				}
				url := fmt.Sprintf("%s/api/threads/%s/stream", base, threads[i%len(threads)])
				c, resp, err := d.DialContext(ctx, url, hdr)
				if resp != nil && resp.Body != nil {
					resp.Body.Close()
				}
				if err != nil {
					err = fmt.Errorf("socket %d: %w", i, err)
					failed.CompareAndSwap(nil, &err)
					return
				}
				conns[i] = c
				go readIdle(c, settled)
			}
		})
	}
	wg.Wait()
	var open []*websocket.Conn
	for _, c := range conns {
		if c != nil {
			open = append(open, c)
		}
	}
	if err := failed.Load(); err != nil {
		return open, 0, *err
	}
	return open, time.Since(t0), ctx.Err()
}

// readIdle reads until the socket closes, counting its first settings
// frame.
func readIdle(c *websocket.Conn, settled func()) {
	var once sync.Once
	for {
		_, raw, err := c.ReadMessage()
		if err != nil {
			return
		}
		if bytes.Contains(raw[:min(len(raw), 40)], []byte(`"type":"settings"`)) {
			once.Do(settled)
		}
	}
}

// settledRSS reads herd's resident memory once it has stopped changing
// by more than 1% over a second: the handshakes' garbage collected, the
// goroutines parked.
func settledRSS(ctx context.Context, h *herd) (int64, error) {
	prev, err := h.memory("VmRSS")
	if err != nil {
		return 0, err
	}
	for range 30 {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		cur, err := h.memory("VmRSS")
		if err != nil {
			return 0, err
		}
		if d := cur - prev; d < cur/100 && -d < cur/100 {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

func (f idleFigures) perSocket() int64 { return (f.rssAfter - f.rssBefore) / int64(f.sockets) }

func (f idleFigures) print() {
	fmt.Printf("idle sockets: %d on %d threads, connected in %v\n", f.sockets, idleThreads, f.connect.Round(time.Millisecond))
	fmt.Printf("RSS: %.1f MB before, %.1f MB with them (%.1f KB a socket), peak %.1f MB\n",
		mb(f.rssBefore), mb(f.rssAfter), float64(f.perSocket())/1024, mb(f.peak))
	fmt.Printf("goroutines: %.0f; the token switch reached every socket in %v\n", f.goroutines, f.reach.Round(time.Millisecond))
}
