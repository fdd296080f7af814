package views

import "testing"

// TestRunEndAndEdit renders where a run ended and the Edit of a message:
// a failure's notice, its error as detail and Retry on the latest run;
// Regenerate alone on the latest answer; an incomplete answer's note; the
// Edit button with the message's text.
func TestRunEndAndEdit(t *testing.T) {
	tests := []struct {
		name string
		m    MessageView
		want string
	}{
		{
			name: "failed, latest",
			m:    MessageView{Type: TypeRunEnd, End: &RunEndView{Seq: 5, RunID: "r1", Status: "failed", Notice: "The model server stopped answering (timeout after 120 s).", Error: "llm provider: gpt: timed out", Latest: true}},
			want: `<div class="run-end run-end-failed" id="run-end-r1" data-seq="5" data-run-id="r1" data-status="failed"><p class="run-notice" role="note"><strong class="run-notice-text">The model server stopped answering (timeout after 120 s).</strong></p><button type="button" class="run-retry button-secondary" data-run-id="r1">Retry</button> <details class="run-error"><summary>Details</summary> <code class="run-error-text">llm provider: gpt: timed out</code></details></div>`,
		},
		{
			name: "failed, latest, no Retry can help",
			m:    MessageView{Type: TypeRunEnd, End: &RunEndView{Seq: 8, RunID: "r4", Status: "failed", Notice: "The key is wrong.", Error: "HTTP 401", ErrorKind: "auth", NoRetry: true, Latest: true}},
			want: `<div class="run-end run-end-failed" id="run-end-r4" data-seq="8" data-run-id="r4" data-status="failed" data-error-kind="auth"><p class="run-notice" role="note"><strong class="run-notice-text">The key is wrong.</strong></p><details class="run-error"><summary>Details</summary> <code class="run-error-text">HTTP 401</code></details></div>`,
		},
		{
			name: "stopped, not latest",
			m:    MessageView{Type: TypeRunEnd, End: &RunEndView{Seq: 6, RunID: "r2", Status: "cancelled", Notice: "Stopped by you."}},
			want: `<div class="run-end run-end-cancelled" id="run-end-r2" data-seq="6" data-run-id="r2" data-status="cancelled"><p class="run-notice" role="note"><strong class="run-notice-text">Stopped by you.</strong></p></div>`,
		},
		{
			name: "completed, latest",
			m:    MessageView{Type: TypeRunEnd, End: &RunEndView{Seq: 7, RunID: "r3", Status: "completed", Latest: true}},
			want: `<div class="run-end run-end-completed" id="run-end-r3" data-seq="7" data-run-id="r3" data-status="completed"><button type="button" class="run-retry button-secondary" data-run-id="r3">Regenerate</button> </div>`,
		},
		{
			name: "incomplete answer",
			m:    MessageView{ID: "a", Seq: 3, Type: "ai", HTML: "<p>half</p>", Incomplete: true},
			want: `<article class="msg msg-ai" id="msg-a" data-seq="3" data-run-id=""><div class="msg-body"><p>half</p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button></div><p class="msg-note msg-incomplete">Incomplete: the run ended before this answer was finished.</p></article>`,
		},
		{
			name: "editable human",
			m:    MessageView{ID: "h", Seq: 2, RunID: "r1", Type: "human", HTML: "<p>hi</p>", Content: "hi <b>", Editable: true},
			want: `<article class="msg msg-human" id="msg-h" data-seq="2" data-run-id="r1"><div class="msg-body"><p>hi</p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button> <button type="button" class="msg-edit button-quiet" data-source="hi &lt;b&gt;">Edit</button></div></article>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, Message(tt.m)); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
