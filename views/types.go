// Package views holds herd's templ components. Handlers fill the view
// models below; components only lay them out.
package views

import "time"

// User is the signed-in user as pages see them.
type User struct {
	ID    string
	Email string
	Admin bool
}

// Page is what every page needs.
type Page struct {
	Title string
	User  *User  // nil when signed out
	CSRF  string // the token forms post as _csrf and scripts send as X-CSRF-Token
	// Assets maps a static file name (app.css, app.js) to its URL with a
	// content hash, so browsers can cache it forever.
	Assets map[string]string
	Flash  string // a one-line notice (e.g. "Thread deleted")
	// Theme is the user's colour scheme, "light" or "dark"; anything
	// else follows the browser.
	Theme string
	// EnterKey is what Enter does in a message field, "send" or
	// "newline"; anything else sends on a desktop and adds a line on a
	// touch screen (static/composer.js).
	EnterKey string
	Error    string // a one-line error shown above the form
}

// Asset returns the hashed URL of a static file.
func (p Page) Asset(name string) string {
	if u, ok := p.Assets[name]; ok {
		return u
	}
	return "/static/" + name
}

// SetupPage creates the first admin.
type SetupPage struct {
	Page
	Email string
	Token string // the one-time set-up token; "" shows how to get one
}

// LoginPage signs a user in.
type LoginPage struct {
	Page
	Email       string
	AllowSignup bool
	Next        string
	// Providers are the single sign-on buttons, in configuration order.
	Providers []ProviderButton
	// Passwords shows the password form; AdminLink, instead, a small
	// link to it for admins (auth.local_passwords: admins).
	Passwords, AdminLink bool
}

// SignedOutPage offers the provider's end-session after herd's sign-out.
type SignedOutPage struct {
	Page
	Provider   string // its display name
	EndSession string // its end-session URL
}

// ProviderButton is a single sign-on provider on the sign-in page.
type ProviderButton struct {
	Name, Label string
	// Down says why it cannot be used now ("" = it can).
	Down string
}

// SessionView is one signed-in browser of the user.
type SessionView struct {
	ID         string
	CreatedAt  time.Time
	LastSeenAt *time.Time
	UserAgent  string
	IP         string
	Current    bool   // the browser looking at the page
	SignIn     string // "password" or the single sign-on provider's name
}

// AccountPage is the user's password and sessions.
type AccountPage struct {
	Page
	Sessions []SessionView
	// NoPassword: the account signs in with single sign-on only, so there
	// is no password to change.
	NoPassword bool
	// Budget is the line about the user's token budget (BudgetText), ""
	// when none applies; Cost what their calls of its period cost at the
	// models' prices, "" when unpriced or under the token gate.
	Budget, Cost string
}

// SignupPage creates an account when open sign-up is on.
type SignupPage struct {
	Page
	Email string
}

// ThreadItem is one thread in a list.
type ThreadItem struct {
	ID        string
	Title     string
	UpdatedAt time.Time
}

// ThreadListPage is the home page.
type ThreadListPage struct {
	Page
	Threads []ThreadItem
	// Older is the cursor of the next page of less recently active
	// threads; "" on the last page.
	Older string
	// Paged is set on every page but the first, which links back to it.
	Paged bool
	// Deleted is the thread just deleted, which the page offers to
	// restore (Undo) while its undo window lasts.
	Deleted string
	// Query is a search of titles (?q=): Threads are its results.
	Query string
	// Results are the messages and card results Query found.
	Results []SearchResult
}

// ModelOption is one model in a picker or list.
type ModelOption struct {
	Name     string
	Label    string // display name, else name
	Provider string // openai or demo
}

// ToolCallView is one tool call of an AI message.
type ToolCallView struct {
	ID   string
	Name string
	// Label is Name as people read it (agent.ToolLabel): "files › list
	// directory" for mcp__files__list_directory; the raw name is its title.
	Label string
	Args  string // the arguments as compact JSON, as static/messages.js shows them live
	// Card is the subagent card of a task call (nil for other tools).
	Card *CardView

	// result is the tool's ToolMessage; Thread attaches it so the result
	// shows under its call, as static/messages.js does live. Handlers leave it nil.
	result *MessageView
}

// MessageView is one chat message, its Markdown already rendered and
// sanitized.
type MessageView struct {
	ID    string
	Seq   int64
	RunID string
	Type  string // human, ai, tool
	HTML  string // sanitized HTML of the content
	// Content is the raw text: tool results show it as-is, since tool
	// output (a listing, a log) is not Markdown.
	Content    string
	ToolCallID string // tool messages: the call they answer
	ModelName  string
	ModelLabel string // the model's display name, which the meta line shows
	ToolCalls  []ToolCallView
	Stopped    bool // the user stopped this answer while it streamed
	// Incomplete marks an answer a failure or a shutdown cut off: what
	// was streamed before it.
	Incomplete bool
	// Editable gives a human message its Edit button.
	Editable bool
	// End is set on a TypeRunEnd item: where a run ended, with its notice
	// and its Retry or Regenerate.
	End *RunEndView
	// Resumed is set on a TypeRunResumed item: where a run continued
	// after a restart or on another instance.
	Resumed *RunResumedView
	// Trimmed is set on an answer whose run left older turns out of its
	// requests to fit the model's context window.
	Trimmed *ContextTrim
	// Reasoning is what the model thought before this answer, shown as
	// escaped text in a collapsed Thinking block above it.
	Reasoning string
	// CreatedAt is when the message was committed: the run timeline
	// (static/timeline.js) reads it from data-at.
	CreatedAt time.Time
	// ToolOutput is a tool message's images and log lines as JSON
	// (agent.ToolOutput), for static/tool-output.js to show.
	ToolOutput string
	// Attachments are the files a human message attached, shown as chips
	// that download them.
	Attachments []AttachmentView
}

// AttachmentView is one file a human message attached: its workspace
// path, size in bytes and sniffed MIME type (agent.Attachment), and the
// thread's files route that serves it.
type AttachmentView struct {
	ThreadID string
	Path     string
	Size     int64
	Type     string
}

// TypeRunEnd is the Type of the item that shows a run's end among the
// messages (MessageView.End).
const TypeRunEnd = "run.end"

// RunEndView is where a run ended, shown when it failed or was stopped (a
// notice in plain words and the error), or when it is the thread's
// latest run (its Retry or Regenerate).
type RunEndView struct {
	Seq    int64 // the run.end event's
	RunID  string
	Status string // completed, failed, cancelled
	Notice string
	Error  string
	// ErrorKind is why a failed model call failed (run.end's error_kind);
	// NoRetry: a Retry cannot get past it (agent.NoRetryKinds).
	ErrorKind string
	NoRetry   bool
	// Latest: the thread's latest run, with no run active: it can be
	// answered again.
	Latest bool
	// Continue offers to continue the answer: the latest run, stopped or
	// cut at the model's output limit.
	Continue bool
	// Versions are the versions of this run's answer, oldest first, when
	// a Regenerate or an Edit made more than one; the page switches
	// between them.
	Versions []string
}

// TypeRunResumed is the Type of the item that shows where a run resumed
// among the messages (MessageView.Resumed).
const TypeRunResumed = "run.resumed"

// RunResumedView is a run.resumed event: the run went on from its
// checkpoint after its process ended or its instance was lost, and how
// long it was gone.
type RunResumedView struct {
	Seq    int64 // the run.resumed event's
	RunID  string
	Notice string // "Resumed after a restart — 4.2 s lost"
	// At is the event's commit time, LostMS the gap before it: the run
	// timeline (static/timeline.js) draws the gap from both.
	At     time.Time
	LostMS int64
}

// ContextTrim is how many of a conversation's turns a run's request sent,
// of how many (an AI message's additional_kwargs.context_trimmed).
type ContextTrim struct {
	Sent  int `json:"sent"`
	Total int `json:"total"`
}

// ThreadPage is one conversation.
type ThreadPage struct {
	Page
	// Sidebar lists the user's recent threads beside the conversation.
	Sidebar      []ThreadItem
	Thread       ThreadItem
	Messages     []MessageView
	Models       []ModelOption
	DefaultModel string // preselected: the thread's last-used model, else the first
	ActiveRunID  string
	// LeadWaiting shows that the active run's lead waits for a slot of its
	// model (max_concurrent_requests).
	LeadWaiting bool
	LastSeq     int64
	// Usage is the thread's usage panel; nil when token figures are hidden
	// from this user.
	Usage *UsageView
	// CommandsOff shows the note that this user's runs are offered no
	// commands (host mode, not an admin).
	CommandsOff bool
	// Budget is the line about the user's token budget (BudgetText); ""
	// when none applies.
	Budget string
	// StateJSON is the page's initial state for static/thread.js, embedded as
	// a JSON data block (never executed).
	StateJSON string
	// Older is the before of the next older page of messages; 0 when the
	// page reaches the thread's start.
	Older int64
	// Before is set when the page shows older messages (?before=): a
	// read-only window without composer or live stream.
	Before int64
}

// MessagesPage is a page of older messages, the fragment the thread page
// loads into its list on demand.
type MessagesPage struct {
	ThreadID string
	Messages []MessageView
	Older    int64 // as ThreadPage.Older
}

// TokenView is one personal API token (never the token itself).
type TokenView struct {
	ID         string
	Name       string
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// SettingsPage lists the user's API tokens.
type SettingsPage struct {
	Page
	Tokens   []TokenView
	NewToken string // shown once, right after creation
	NewName  string
	// Preferences: the theme (system, light, dark) and the model new
	// threads start with.
	Theme        string
	DefaultModel string
	Models       []ModelOption
}

// UserView is one user on the admin page.
type UserView struct {
	ID        string
	Email     string
	Role      string
	Disabled  bool
	CreatedAt time.Time
	Self      bool
	// SignIn names the user's ways in: "password" and linked providers.
	SignIn []string
	// Identities are the linked identities an admin may unlink.
	Identities []IdentityView
}

// IdentityView is an identity provider's account linked to a user.
type IdentityView struct {
	ID          string
	Label       string // the provider's display name
	Email       string
	LastLoginAt time.Time
}

// AdminPage holds the instance settings, models and users.
type AdminPage struct {
	Page
	TokenUsageEnabled bool
	ConsoleModels     []ConsoleModelView
	// NewModel is what the add form holds: what a refused save sent (its
	// key apart), else openai with automatic streaming.
	NewModel ConsoleModelView
	Limits   []LimitView
	Agents   []AgentTypeView
	Users    []UserView
	MCP      []MCPServerView
}

// ConsoleModelView is a model in the admin console: herd.yaml's
// (FromFile: read-only) or one the console added. APIKey is masked.
type ConsoleModelView struct {
	Name, DisplayName, Provider, Model, BaseURL, Stream, APIKey string
	ContextWindow, MaxConcurrentRequests                        int
	Vision, FromFile, Default                                   bool
	// PriceInput and PriceOutput are per million tokens, as typed ("" for
	// no price); Currency is the price's (USD when empty).
	PriceInput, PriceOutput, Currency string
}

// AgentTypeView is a subagent type in the admin console: herd.yaml's
// (FromFile: read-only) or one the console added. Tools is the tools
// list as typed, comma-separated ("" for the type's default); MaxTurns
// and TimeoutSeconds are "" when unset.
type AgentTypeView struct {
	Name, Description, SystemPrompt, Model, Tools string
	MaxTurns, TimeoutSeconds                      string
	FromFile                                      bool
}

// LimitView is a limit in the admin console: the value in force,
// herd.yaml's, and whether the console set it (Set: it wins).
type LimitView struct {
	Name, Label string
	Value, File int
	Set         bool
}

// MCPServerView is one configured MCP server on the admin page.
type MCPServerView struct {
	Name, Transport, Use string
	State, LastError     string // connected, restarting, failed, connecting, idle
	Since                time.Time
	Restarts             int
	Tools, Skipped       []string
	Failures             []MCPFailureView // newest first
	Stderr               string           // a stdio server's last stderr
	LogLinesDropped      int64
	// Config is its settings as the console shows and edits them; nil
	// for a server not (yet) in the console's list.
	Config *MCPConfigView
}

// MCPConfigView is an MCP server's settings on the admin page, without
// what may hold a secret: env and header names, the URL's host, how
// many arguments (docs/DESIGN.md §12).
type MCPConfigView struct {
	Command, URLHost string
	Args             int
	Env, Headers     []string
	Tools            string // comma-separated; "" with ToolsSet false: all
	ToolsSet         bool
	DisallowedTools  string
	TimeoutSeconds   int
	Use              string
	FromFile         bool
}

// MCPFailureView is one of a server's latest failures, under the
// reference users and the model were given.
type MCPFailureView struct {
	Ref   string
	At    time.Time
	Error string
}

// ErrorPage is a full-page error (404, 403, 500).
type ErrorPage struct {
	Page
	Status  int
	Message string
}

// CardView is one subagent card (docs/DESIGN.md §9). static/card-view.js renders live
// updates into the same markup, from a <template> holding an empty card.
type CardView struct {
	ThreadID     string // where its files' links point
	TaskID       string
	RunID        string
	ExecutionID  string
	Description  string
	Prompt       string
	SubagentType string
	Status       string // queued, running, or a terminal status
	Activity     string // what it is doing, in words, while running
	Waiting      bool   // running, its model call waiting for a slot
	ModelName    string // the effective model's name
	ModelLabel   string // its display name
	// ShowTokens is false under the token gate: no figure is rendered.
	ShowTokens  bool
	TotalTokens *int64 // nil: no usage reported
	// InputTokens and OutputTokens complete the snapshot, so that the
	// page's usage panel can add what the card grows by per model.
	InputTokens, OutputTokens *int64
	StopReason                string
	ResultHTML                string // sanitized
	Error                     string
	Version                   int64
	LastSeq                   int64
	Steps                     int64
	// RefusalReason and RefusalLimit say which limit refused a failed
	// task before it started, and its value ("" and 0 for any other).
	RefusalReason string
	RefusalLimit  int64
	// QueuedAt, StartedAt and EndedAt are agent.Card's; Now is when the
	// page was rendered, for the time so far of a live card.
	QueuedAt, StartedAt, EndedAt *time.Time
	Now                          time.Time
	// Files are the files its subagent wrote and left (agent.Card.Files).
	Files []CardFile
}

// CardFile is a file a card's subagent wrote, at its latest size.
type CardFile struct {
	Path string
	Size int64
}

// UsageTotals is one line of the usage panel.
type UsageTotals struct {
	Input, Output, Total, Calls int64
	// Unreported is how many of Calls reported no usage: shown as "not
	// reported for N calls" beside the figures, never folded into a 0.
	Unreported int64
	// Lost is how many of Unreported a restart cut, named apart: "1 call
	// cut by a restart: usage not reported".
	Lost int64
}

// ModelUsage is the usage of one model.
type ModelUsage struct {
	Model string
	Label string
	UsageTotals
}

// UsageView is the thread usage panel: ledger totals, each call once.
type UsageView struct {
	// Blank renders the panel without figures: the <template> static/usage-panel.js
	// clones when token usage is turned on while a page is open.
	Blank     bool
	Total     UsageTotals
	Lead      UsageTotals
	Subagents UsageTotals
	// Replaced is the answers later runs replaced: made, not shown, and
	// not in Total (docs/DESIGN.md §6).
	Replaced UsageTotals
	ByModel  []ModelUsage
}

// The kinds of a file's preview (FilePreviewView.Kind), its root's
// data-kind.
const (
	PreviewMarkdown = "markdown"
	PreviewCode     = "code"
	PreviewCSV      = "csv"
	PreviewText     = "text"
	PreviewImage    = "image"
	PreviewPDF      = "pdf"
	PreviewBinary   = "binary"
)

// FilePreviewView is one workspace file as the Files panel previews it
// (FilePreview): its kind, and for a text-like kind what was read of it.
type FilePreviewView struct {
	ThreadID string
	Path     string
	Kind     string
	Size     int64
	// Truncated says the file is longer than what was read, Shown bytes.
	Truncated bool
	Shown     int64
	// HTML is the sanitized Markdown or highlighted code (server/render).
	HTML string
	// Text is a text kind's content, escaped when rendered.
	Text  string
	Table *PreviewTable
}

// PreviewTable is the head of a CSV or TSV file: its header row and first
// rows, each cut to a preview's columns and characters. Total is the
// rows read after the header, AtLeast that the file had more beyond what
// was read; Columns the widest row's cells, before any was cut.
type PreviewTable struct {
	Header  []string
	Rows    [][]string
	Total   int
	AtLeast bool
	Columns int
}

// AuditPage is the audit log's page: a page of entries, newest first, the
// filters it was asked for and the links that keep them.
type AuditPage struct {
	Page
	Entries []AuditEntryView
	// Actor, Action, Since and Until are the filters, as the form sent
	// them.
	Actor, Action, Since, Until string
	// Actions are the choices of the action filter: each kind of target
	// ("user."), then each action.
	Actions []string
	// Newer and Older are the links to the first page and the next
	// older one; "" when there is none.
	Newer, Older string
	// CSV and JSONL export every entry the filters select.
	CSV, JSONL string
}

// AuditEntryView is one entry of the audit log.
type AuditEntryView struct {
	ID                  int64
	At                  time.Time
	ActorEmail, ActorIP string // ActorEmail "" is herd itself
	Action              string
	// TargetKind and TargetID name what changed; TargetLabel is the
	// name people know it by (a user's email), "" when the entry has none.
	TargetKind, TargetID, TargetLabel string
	Changes                           []AuditChange
	// Created and Deleted say the target had no fields before, or after.
	Created, Deleted bool
}

// AuditChange is a field of an entry's target, before and after the
// action; a side without the field reads "".
type AuditChange struct {
	Field, Before, After string
	Changed              bool
}
