package tools

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifier is one inotify instance whose watches are added by directory
// descriptor (its /proc/self/fd link), never by a path a command could
// redirect, and whose events name a watch and an entry of it: what the
// entry is, is asked of the watched directory (fstatat), so a directory
// renamed or replaced by a link never makes herd look outside the
// workspace. Its descriptor is non-blocking, read through the runtime's
// poller, so Close ends a read in progress.
type notifier struct {
	f *os.File
}

// watchMask is what a watch reports: entries made, changed, removed or
// moved in or out. IN_EXCL_UNLINK: nothing of a file after its last name
// went.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// event is one inotify event: the watch, what happened, the entry's name
// ("" for the directory itself) and the cookie pairing a move's halves.
type event struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string
}

// overflow marks the event that says the kernel's queue overflowed.
func (e event) overflow() bool { return e.mask&unix.IN_Q_OVERFLOW != 0 }

func newNotifier() (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	return &notifier{f: os.NewFile(uintptr(fd), "inotify")}, nil
}

// add watches the directory dir is open on and returns the watch; the
// same directory watched twice gives the same watch.
func (n *notifier) add(dir *os.File) (int32, error) {
	rc, err := n.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var wd int
	var addErr error
	err = rc.Control(func(fd uintptr) {
		wd, addErr = unix.InotifyAddWatch(int(fd), "/proc/self/fd/"+strconv.Itoa(int(dir.Fd())), watchMask)
	})
	if err == nil {
		err = addErr
	}
	if err != nil {
		return 0, fmt.Errorf("inotify: watch: %w", err)
	}
	return int32(wd), nil
}

// remove ends a watch; its IN_IGNORED event follows.
func (n *notifier) remove(wd int32) {
	if rc, err := n.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
	}
}

// read waits for events and returns them; it fails once n is closed.
func (n *notifier) read(buf []byte) ([]event, error) {
	k, err := n.f.Read(buf)
	if err != nil {
		return nil, err
	}
	var evs []event
	for off := 0; off+unix.SizeofInotifyEvent <= k; {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		end := off + unix.SizeofInotifyEvent + int(raw.Len)
		if end > k {
			return evs, errors.New("inotify: a short event")
		}
		name := buf[off+unix.SizeofInotifyEvent : end]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		evs = append(evs, event{wd: raw.Wd, mask: raw.Mask, cookie: raw.Cookie, name: string(name)})
		off = end
	}
	return evs, nil
}

// Close ends the instance and every watch of it. The kernel waits out a
// grace period to free them (10–20 ms), so callers that need not wait
// close it on a goroutine of its own.
func (n *notifier) Close() error { return n.f.Close() }
