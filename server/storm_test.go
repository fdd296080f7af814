package server

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestReconnectStorm cuts every client of a busy thread at once; all of
// them reconnect together with their last seq. The run is not stalled,
// and every client ends with exactly the thread's records.
func TestReconnectStorm(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 40, 1)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("storm")
	const clients = 60

	type state struct {
		mu   sync.Mutex
		seqs []int64
		last int64
	}
	states := make([]*state, clients)
	var wg sync.WaitGroup
	connect := func(i int) *websocket.Conn {
		st := states[i]
		st.mu.Lock()
		after := st.last
		st.mu.Unlock()
		conn, err := u.dial(th, after)
		if err != nil {
			t.Errorf("client %d: dial: %v", i, err)
			return nil
		}
		return conn
	}
	read := func(i int, conn *websocket.Conn) {
		st := states[i]
		for {
			_, raw, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var f struct {
				Seq *int64 `json:"seq"`
			}
			if json.Unmarshal(raw, &f) != nil || f.Seq == nil {
				continue
			}
			st.mu.Lock()
			if *f.Seq > st.last {
				st.seqs = append(st.seqs, *f.Seq)
				st.last = *f.Seq
			} else {
				t.Errorf("client %d: seq %d after %d (duplicate or out of order)", i, *f.Seq, st.last)
			}
			st.mu.Unlock()
		}
	}
	for i := range clients {
		states[i] = &state{}
		conn := connect(i)
		wg.Go(func() { read(i, conn); conn.Close() })
	}
	waitClients(t, a.hub, clients)

	start := time.Now()
	u.startRun(th, "Check:\n- one\n- two\n- three\n- four")
	// The run's own time, taken when it ends: the test's 60 redials below
	// are the clients' work, and on a loaded machine they may still be
	// going when the run is long over.
	took := make(chan time.Duration, 1)
	go func() {
		_ = a.rt.Wait(t.Context(), th)
		took <- time.Since(start)
	}()
	time.Sleep(300 * time.Millisecond) // mid-run
	a.dropAll()
	wg.Wait()
	for i := range clients {
		conn := connect(i)
		if conn == nil {
			continue
		}
		wg.Go(func() { read(i, conn); conn.Close() })
	}
	a.waitIdle(th)
	runTook := <-took
	t.Logf("the clients were back %v after the run's start", time.Since(start))

	last, _ := a.store.LastSeq(t.Context(), th)
	deadline := time.Now().Add(10 * time.Second)
	for _, st := range states {
		for {
			st.mu.Lock()
			got := st.last
			st.mu.Unlock()
			if got >= last || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	a.dropAll()
	wg.Wait()
	want := make([]int64, last)
	for i := range want {
		want[i] = int64(i + 1)
	}
	for i, st := range states {
		if !slices.Equal(st.seqs, want) {
			t.Errorf("client %d received %d records (last %d), the thread has %d", i, len(st.seqs), st.last, last)
		}
	}
	// The same run without a storm takes about this long; a stalled run
	// would take the write timeout or more.
	if runTook > 8*time.Second {
		t.Errorf("the run took %v under the reconnect storm", runTook)
	}
	t.Logf("run with a %d-client reconnect storm: %v, %d records each", clients, runTook, last)
}
