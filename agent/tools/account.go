package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Account is the uid and gid that sandboxed commands run as and that own
// the workspaces, when herd runs as root (docs/DESIGN.md §4): never root
// itself, so nothing a command does acts as the machine's root.
type Account struct {
	UID, GID int
	// Name is how the config named it, for messages.
	Name string
}

func (a Account) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", a.Name, a.UID, a.GID)
}

// defaultSandboxUser is the account commands run as under a root herd
// when sandbox.user is not set.
const defaultSandboxUser = "nobody"

// lookupAccount resolves sandbox.user: a user name (its primary group),
// a uid, or uid:gid. Root (uid or gid 0) is refused: the point of the
// account is not to be root.
func lookupAccount(spec string) (Account, error) {
	if spec == "" {
		spec = defaultSandboxUser
	}
	a := Account{Name: spec}
	uidText, gidText, numeric := strings.Cut(spec, ":")
	uid, err := strconv.Atoi(uidText)
	switch {
	case err == nil && numeric:
		a.UID = uid
		if a.GID, err = strconv.Atoi(gidText); err != nil {
			return Account{}, fmt.Errorf("sandbox.user %q: the gid after ':' is not a number", spec)
		}
	case err == nil:
		a.UID, a.GID = uid, uid
		if u, err := user.LookupId(uidText); err == nil {
			a.GID, _ = strconv.Atoi(u.Gid)
		}
	default:
		u, err := user.Lookup(spec)
		if err != nil {
			return Account{}, fmt.Errorf("sandbox.user %q: %w (create it, e.g. useradd --system --no-create-home herd-sandbox, or name a uid)", spec, err)
		}
		a.UID, _ = strconv.Atoi(u.Uid)
		a.GID, _ = strconv.Atoi(u.Gid)
	}
	if a.UID <= 0 || a.GID <= 0 {
		return Account{}, fmt.Errorf("sandbox.user %q is root or has gid 0: commands must not run as root; name an unprivileged account", spec)
	}
	// (uid_t)-1 means "no change" to setresuid: the command would stay root.
	if a.UID >= 1<<32-1 || a.GID >= 1<<32-1 {
		return Account{}, fmt.Errorf("sandbox.user %q: ids go up to %d", spec, uint32(1<<32-2))
	}
	return a, nil
}

// OwnWorkspace makes dir, a thread's workspace, and everything in it
// belong to owner, so that commands running as owner can change what the
// file tools (running as root) wrote. It looks at dir alone when dir
// already belongs to owner, so it costs one lstat per call; a workspace
// from before herd ran commands as owner is given over once, whole.
// Symbolic links are changed themselves, never followed. With owner nil
// (herd is not root) it does nothing.
func OwnWorkspace(dir string, owner *Account) error {
	if owner == nil {
		return nil
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == owner.UID && int(st.Gid) == owner.GID {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(name string, _ fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if name == "." {
			return nil // last, below: a half-done walk is retried next call
		}
		return root.Lchown(filepath.FromSlash(name), owner.UID, owner.GID)
	})
	if err == nil {
		err = os.Lchown(dir, owner.UID, owner.GID)
	}
	if err != nil {
		return fmt.Errorf("workspace: give it to %s: %w", owner, err)
	}
	return nil
}
