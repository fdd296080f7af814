package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"herd/models"
	"herd/server/hub"
)

// titleUsageFrame reads frames until the usage.title frame and returns
// its data.
func titleUsageFrame(t *testing.T, u *user, th string) (json.RawMessage, wsFrame) {
	t.Helper()
	conn := u.watch(th)
	defer waitClients(t, u.a.hub, 0) // after the close below
	defer conn.Close()
	u.startRun(th, "Plan a trip")
	deadline := time.Now().Add(15 * time.Second)
	for {
		f, err := readFrame(conn, time.Until(deadline))
		if err != nil {
			t.Fatalf("no usage.title frame: %v", err)
		}
		if f.Type == hub.FrameTitleUsage {
			return f.Data, f
		}
	}
}

// TestTitleUsageFrame: the title call, its title used or not, is in the
// ledger as a call of the thread and of no run, under the herd model; open
// pages get its usage in one unsequenced usage.title frame, which the
// token gate empties; no run's totals count it.
func TestTitleUsageFrame(t *testing.T) {
	// "Plan a trip" is the first message's own title: the model's is not
	// used, so no rename brings the call to the page.
	a, _ := openaiTitleApp(t, "Plan a trip", 0)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("")
	data, f := titleUsageFrame(t, u, th)
	var d struct {
		Usage *models.UsageReport `json:"usage"`
	}
	if err := json.Unmarshal(data, &d); err != nil || f.Seq != nil || f.ThreadID != th {
		t.Fatalf("frame %+v (%v), want it unsequenced, of the thread", f, err)
	}
	if d.Usage == nil || d.Usage.Lead.TotalTokens != 76 || d.Usage.Total.Calls != 1 || d.Usage.ByModel["demo-fast"].TotalTokens != 76 || len(d.Usage.ByModel) != 1 {
		t.Errorf("the frame's usage is %+v, want the title call's 76 tokens under the lead and demo-fast", d.Usage)
	}
	a.waitIdle(th)
	a.srv.titles.Wait()
	if got := u.title(th); got != "Plan a trip" {
		t.Errorf("title %q", got)
	}
	per, err := a.store.UsageByRun(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	if title := per[""]; title.Lead.TotalTokens != 76 || len(per) != 2 {
		t.Errorf("the ledger per run is %+v: want the title call under no run, beside the run", per)
	}
	// Both calls bill the thread's owner: a budget counts the title too.
	if used, err := a.store.UsedTokens(context.Background(), u.id, time.Time{}, time.Now().AddDate(1, 0, 0)); err != nil || used != 596 {
		t.Errorf("ann used %d (%v), want the run's 520 and the title's 76", used, err)
	}
	if end := u.runEndUsage(th); end.Total.TotalTokens != 520 {
		t.Errorf("run.end counts %d tokens, want the run's own 520", end.Total.TotalTokens)
	}
	var usage threadUsageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, 200, &usage)
	if usage.Total.TotalTokens != 596 || usage.Lead.TotalTokens != 596 || usage.Replaced.Calls != 0 {
		t.Errorf("the usage API reads %+v, want 596 under the lead, nothing replaced", usage)
	}

	// With token figures off, the frame still comes, without them.
	if _, err := a.settings.SetTokenUsage(context.Background(), false, a.hub); err != nil {
		t.Fatal(err)
	}
	th2 := u.newThread("")
	data, _ = titleUsageFrame(t, u, th2)
	if string(data) != `{"usage":null}` {
		t.Errorf("under the token gate the frame's data is %s", data)
	}
}
