// Package models holds herd's GORM models and the Store, the only code that
// touches the database.
package models

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Roles.
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
)

// Run statuses (docs/API.md).
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Event categories.
const (
	CategoryRun      = "run"
	CategorySubagent = "subagent"
)

// User is an account.
type User struct {
	ID           string `gorm:"primaryKey;size:36"`
	Email        string `gorm:"uniqueIndex;not null"`
	PasswordHash string `gorm:"not null"`
	Role         string `gorm:"not null;default:user"`
	Disabled     bool   `gorm:"not null;default:false"`
	// Theme is the user's colour scheme: ThemeLight, ThemeDark, or
	// ThemeSystem ("" too) to follow the browser.
	Theme string `gorm:"not null;default:''"`
	// DefaultModel names the model a new thread starts with; "" or a
	// model no longer configured means the server's default.
	DefaultModel string `gorm:"not null;default:''"`
	// EnterKey is what Enter does in a message field: EnterSend,
	// EnterNewline, or EnterAuto ("" too) to send on a desktop and add a
	// line on a touch screen.
	EnterKey  string `gorm:"not null;default:''"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The themes a user may choose.
const (
	ThemeSystem = "system"
	ThemeLight  = "light"
	ThemeDark   = "dark"
)

// What Enter may do in a message field.
const (
	EnterAuto    = "auto"
	EnterSend    = "send"
	EnterNewline = "newline"
)

// IsAdmin reports whether u has the admin role.
func (u *User) IsAdmin() bool { return u.Role == RoleAdmin }

// Session is a signed-in browser. ID is the SHA-256 of the cookie's token,
// so a leaked database does not leak live sessions.
type Session struct {
	ID        string `gorm:"primaryKey;size:64"`
	UserID    string `gorm:"index;not null;size:36"`
	CSRFToken string `gorm:"not null"`
	CreatedAt time.Time
	ExpiresAt time.Time `gorm:"index"`
	// LastSeenAt, UserAgent and IP let the user tell their sessions apart
	// (the account page); LastSeenAt is refreshed at most once a minute.
	LastSeenAt *time.Time
	UserAgent  string `gorm:"not null;default:''"`
	IP         string `gorm:"not null;default:''"`
	// Provider names the single sign-on provider the session came from
	// ("" = a password), and IDToken is its ID token: the hint its
	// end-session is given at sign-out.
	Provider string `gorm:"not null;default:''"`
	IDToken  string `gorm:"not null;default:''"`
}

// Identity links a person at an OpenID Connect provider (issuer and
// subject, which never change) to a user, so an email changed at the
// provider keeps the account.
type Identity struct {
	ID          string `gorm:"primaryKey;size:36"`
	UserID      string `gorm:"index;not null;size:36"`
	Issuer      string `gorm:"uniqueIndex:idx_identity_subject;not null"`
	Subject     string `gorm:"uniqueIndex:idx_identity_subject;not null"`
	Provider    string `gorm:"not null"`
	Email       string `gorm:"not null"`
	CreatedAt   time.Time
	LastLoginAt time.Time
}

// LoginFlow is a single sign-on under way: ID is the hash of its state,
// Browser the hash of the cookie of the browser that started it; taken
// once by the callback (TakeLoginFlow).
type LoginFlow struct {
	ID        string    `gorm:"primaryKey;size:64"`
	Browser   string    `gorm:"not null;size:64"`
	Provider  string    `gorm:"not null"`
	Nonce     string    `gorm:"not null"`
	Verifier  string    `gorm:"not null"`
	Next      string    `gorm:"not null;default:''"`
	ExpiresAt time.Time `gorm:"index"`
}

// APIToken is a personal bearer token. Hash is the SHA-256 of the token;
// the token itself is shown once, at creation.
type APIToken struct {
	ID         string `gorm:"primaryKey;size:36"`
	UserID     string `gorm:"index;not null;size:36"`
	Name       string `gorm:"not null"`
	Hash       string `gorm:"uniqueIndex;not null;size:64"`
	Prefix     string `gorm:"not null"`
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// Thread is a conversation. LastSeq is the last value of the thread's
// sequence (docs/DESIGN.md §7), advanced only by the Writer.
type Thread struct {
	ID        string `gorm:"primaryKey;size:36"`
	UserID    string `gorm:"index:idx_threads_user_updated,priority:1;not null;size:36"`
	Title     string `gorm:"not null"`
	LastSeq   int64  `gorm:"not null;default:0"`
	CreatedAt time.Time
	UpdatedAt time.Time `gorm:"index:idx_threads_user_updated,priority:2"`
	// DeleteAt is set when the owner deletes the thread: it is gone from
	// their view at once and removed for good at that time, unless they
	// undo first (RestoreThread).
	DeleteAt *time.Time `gorm:"index"`
}

// Message is one persisted chat message (human, ai or tool).
type Message struct {
	ID               string `gorm:"primaryKey;size:36"`
	ThreadID         string `gorm:"uniqueIndex:idx_messages_thread_seq,priority:1;not null;size:36"`
	Seq              int64  `gorm:"uniqueIndex:idx_messages_thread_seq,priority:2;not null"`
	RunID            string `gorm:"index;size:36"`
	Type             string `gorm:"not null"`
	Content          string `gorm:"not null"`
	ToolCalls        JSON
	ToolCallID       string
	Name             string
	AdditionalKwargs JSON
	Usage            JSON
	ModelName        string
	CreatedAt        time.Time
}

// Run is one user message and everything the lead does for it.
type Run struct {
	ID string `gorm:"primaryKey;size:36"`
	// ThreadID's partial unique index is the one-active-run rule
	// (docs/DESIGN.md §7): the database refuses a second running run in a
	// thread, whichever instance starts it (ClaimRun).
	ThreadID  string `gorm:"index;uniqueIndex:idx_runs_one_active,where:status = 'running';not null;size:36"`
	UserID    string `gorm:"not null;size:36"`
	Status    string `gorm:"index;not null"`
	ModelName string `gorm:"not null"`
	Error     string
	StartedAt time.Time
	EndedAt   *time.Time
	// RetryOf is the run whose answer this one replaces (Retry,
	// Regenerate); EditOf the run whose message this one edits, replacing
	// it and every later run. The replaced rows stay: the usage ledger and
	// the events are history.
	RetryOf string `gorm:"size:36;not null;default:''"`
	EditOf  string `gorm:"size:36;not null;default:''"`
	// ParentRun is the run this one follows in the conversation: the
	// shown thread's last run when it started, or for a Regenerate or an
	// Edit the run the replaced one followed (its versions share it). ""
	// for a thread's first run and for runs from before versions, whose
	// parent is read from the order of runs (agent.ReplacedIn).
	ParentRun string `gorm:"size:36;not null;default:''"`
	// Continues marks a RetryOf run that continues the answer the user
	// stopped rather than answering again (Continue): the stopped run's
	// turns stay, its cut answer is this run's start.
	Continues bool `gorm:"not null;default:false"`
	// PickedAt is when the user last chose this run's version of its
	// answer (agent.ReplacedIn shows, of a run's versions, the one picked
	// or started last); nil when never chosen. Set by Store.PickRun alone:
	// the Writer's upsert of a run leaves it.
	PickedAt *time.Time
	// InstanceID is the herd instance executing the run (Instance); ""
	// on SQLite's single instance and for runs from before instances.
	InstanceID string `gorm:"index;not null;default:'';size:36"`
	// LeaseEpoch is the epoch of the instance's lease the run is written
	// under (Instance.Epoch): its fencing token, checked by every write of
	// the run (Store.SetFence). 0 on SQLite.
	LeaseEpoch int64 `gorm:"not null;default:0"`
}

// RunEvent is one persisted event of a thread's log (docs/DESIGN.md §7).
type RunEvent struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	ThreadID  string `gorm:"uniqueIndex:idx_events_thread_seq,priority:1;index:idx_events_thread_task_seq,priority:1;not null;size:36"`
	Seq       int64  `gorm:"uniqueIndex:idx_events_thread_seq,priority:2;index:idx_events_thread_task_seq,priority:3;not null"`
	RunID     string `gorm:"index;size:36"`
	EventType string `gorm:"not null"`
	Category  string `gorm:"not null"`
	TaskID    string `gorm:"index:idx_events_thread_task_seq,priority:2"`
	Content   JSON
	Metadata  JSON
	CreatedAt time.Time
}

// UsageEntry is one LLM call in the usage ledger, keyed by the call id so
// that reporting a call twice counts it once (docs/DESIGN.md §6).
type UsageEntry struct {
	CallID string `gorm:"primaryKey"`
	// ThreadID names the call's thread, and still does once the thread
	// is purged: the ledger outlives what it bills (docs/DESIGN.md §6).
	ThreadID string `gorm:"index;not null;size:36"`
	// UserID is who the call was made for, the thread's owner, kept after
	// the thread or the user is deleted; it leads an index with CreatedAt:
	// a budget sums one user's rows of one period (Store.UsedTokens). ""
	// only in a row whose thread was gone before the owner was recorded
	// (backfillLedgerOwners).
	UserID string `gorm:"index:idx_usage_user_created,priority:1;not null;default:'';size:36"`
	RunID  string `gorm:"index;not null;size:36"` // "" for the thread's title call
	TaskID string // empty for the lead's own calls
	// ModelName is the model as its provider reported it (which may carry
	// a date: gpt-4o-2024-08-06); HerdModel is the herd model the call was
	// made with, as runs, messages and cards name it, "" in rows written
	// before it was recorded. A thread's figures are per herd model, so
	// the page's rows are the same live and reloaded (docs/DESIGN.md §6).
	ModelName       string `gorm:"not null"`
	HerdModel       string `gorm:"not null;default:''"`
	InputTokens     int64  `gorm:"not null"`
	OutputTokens    int64  `gorm:"not null"`
	TotalTokens     int64  `gorm:"not null"`
	CacheReadTokens int64  `gorm:"not null;default:0"`
	// Unreported marks a call whose provider reported no usage: it is
	// counted as a call, its figures are 0 and totals name it as "not
	// reported" rather than a free call (docs/DESIGN.md §6).
	Unreported bool `gorm:"not null;default:false"`
	// Lost marks a call cut by a restart or a lost instance: it was made
	// (and may be billed) but its usage can never be known. It is also
	// Unreported, and totals name it apart ("1 call cut by a restart:
	// usage not reported", docs/DESIGN.md §6). LostCall writes one.
	Lost bool `gorm:"not null;default:false"`
	// CreatedAt is indexed for the admin's usage history, which reads the
	// ledger by day across every thread.
	CreatedAt time.Time `gorm:"index;index:idx_usage_user_created,priority:2"`
}

// JSON is a JSON document stored as text. A nil JSON is SQL NULL.
type JSON json.RawMessage

// Value implements driver.Valuer.
func (j JSON) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// Scan implements sql.Scanner.
func (j *JSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j = nil
	case string:
		*j = JSON(v)
	case []byte:
		*j = append(JSON(nil), v...)
	default:
		return fmt.Errorf("models: scan JSON from %T", src)
	}
	return nil
}

// MarshalJSON emits the document itself, or null.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON keeps the raw document.
func (j *JSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*j = nil
		return nil
	}
	*j = append(JSON(nil), b...)
	return nil
}

// MustJSON encodes v; it is for values that always encode (maps of plain
// values, structs without channels).
func MustJSON(v any) JSON {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("models: encode %T: %v", v, err))
	}
	if string(b) == "null" {
		return nil
	}
	return JSON(b)
}

// ErrNotFound is returned when a record does not exist (or is not the
// caller's to see).
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a write would break a uniqueness rule.
var ErrConflict = errors.New("conflict")
