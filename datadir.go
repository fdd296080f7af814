package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockFile is the data directory's owner lock (docs/DESIGN.md §11).
const lockFile = "herd.lock"

// dataDirLock makes one server the owner of a data directory: an
// exclusive flock taken before anything touches the database, held for the
// process's life. The kernel drops a flock when its process dies, so a
// crash or a SIGKILL never leaves a stale lock behind. The file also names
// the holder, for the message a second server prints.
type dataDirLock struct {
	f       *os.File
	started time.Time
}

// lockHolder is what the lock file records about its holder.
type lockHolder struct {
	PID     int       `json:"pid"`
	Addr    string    `json:"addr,omitempty"`
	Started time.Time `json:"started"`
}

// errDataDirInUse is returned when another process holds the lock.
type errDataDirInUse struct {
	dir    string
	holder lockHolder
}

func (e *errDataDirInUse) Error() string {
	who := "another herd"
	if e.holder.PID > 0 {
		who += fmt.Sprintf(" (PID %d", e.holder.PID)
		if e.holder.Addr != "" {
			who += ", listening on http://" + e.holder.Addr
		} else {
			who += ", starting"
		}
		who += ")"
	}
	return fmt.Sprintf("data directory %s is in use by %s; stop it first or choose another --data-dir", e.dir, who)
}

// lockDataDir creates dir if needed and takes its owner lock without
// waiting. A second server gets errDataDirInUse and changes nothing: it
// opens the lock file without truncating it.
func lockDataDir(dir string) (*dataDirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(abs, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := lockOwner(f, abs); err != nil {
		return nil, err
	}
	l := &dataDirLock{f: f, started: time.Now().UTC()}
	return l, l.record("")
}

// record writes the holder's PID and, once it listens, its address.
func (l *dataDirLock) record(addr string) error {
	b, _ := json.Marshal(lockHolder{PID: os.Getpid(), Addr: addr, Started: l.started})
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("data directory lock: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("data directory lock: %w", err)
	}
	return nil
}

// release empties the record and drops the lock.
func (l *dataDirLock) release() {
	_ = l.f.Truncate(0)
	_ = l.f.Close()
}

// lockOwner takes the lock file f of data directory dir without waiting.
// When another process holds it, f is closed and the answer is an
// *errDataDirInUse naming the holder, as the lock file records it.
func lockOwner(f *os.File, dir string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	var h lockHolder
	if b, rerr := io.ReadAll(io.LimitReader(f, 4096)); rerr == nil {
		_ = json.Unmarshal(b, &h)
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return &errDataDirInUse{dir: dir, holder: h}
	}
	return fmt.Errorf("data directory %s: lock: %w", dir, err)
}
