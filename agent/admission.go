package agent

import (
	"context"
	"sync"
)

// admission hands out the executor's running slots (docs/DESIGN.md §5):
// at most max subagents run at once, at most perUser of them one user's.
// Each user waits in a FIFO queue of their own; when a slot frees it goes
// to the head of the queue of the user served least recently among those
// under their cap, so one user's long queue delays another user's first
// subagent by at most one slot release.
type admission struct {
	max, perUser int

	mu       sync.Mutex
	free     int
	seq      uint64                // counts grants: a user's lastGrant orders the rotation
	arrivals uint64                // counts users coming
	users    map[string]*userSlots // users with a running or queued subagent
}

// userSlots is one user's share of the slots.
type userSlots struct {
	running   int
	lastGrant uint64        // 0: not served since the user came
	arrival   uint64        // breaks ties between users not served yet
	queue     []*slotWaiter // FIFO
}

// before reports whether u is served before v: the one served least
// recently, and between users not served yet the one who came first.
func (u *userSlots) before(v *userSlots) bool {
	if u.lastGrant != v.lastGrant {
		return u.lastGrant < v.lastGrant
	}
	return u.arrival < v.arrival
}

// slotWaiter is one queued subagent; ready is closed when it is granted a
// slot.
type slotWaiter struct {
	ready   chan struct{}
	granted bool // set under admission.mu
}

func newAdmission(max, perUser int) *admission {
	return &admission{max: max, perUser: min(perUser, max), free: max, users: map[string]*userSlots{}}
}

// tryAcquire takes a slot for user at once when one is free, the user is
// under their cap and has nobody queued ahead; otherwise it queues the
// caller, in the same critical section so that no release slips between
// the check and the queueing, and returns the waiter to wait on.
func (a *admission) tryAcquire(user string) (*slotWaiter, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.users[user]
	if u == nil {
		a.arrivals++
		u = &userSlots{arrival: a.arrivals}
		a.users[user] = u
	}
	if a.free > 0 && u.running < a.perUser && len(u.queue) == 0 {
		a.grantLocked(u)
		return nil, true
	}
	w := &slotWaiter{ready: make(chan struct{})}
	u.queue = append(u.queue, w)
	return w, false
}

// wait blocks until w is granted its slot (nil) or ctx ends (ctx's
// error, and w holds no slot: a grant that raced with the end is handed
// on).
func (a *admission) wait(ctx context.Context, user string, w *slotWaiter) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted {
		a.releaseLocked(user)
		return ctx.Err()
	}
	u := a.users[user]
	for i, q := range u.queue {
		if q == w {
			u.queue = append(u.queue[:i], u.queue[i+1:]...)
			break
		}
	}
	a.forgetIdleLocked(user, u)
	// Leaving may unblock nobody (the slots are as they were), but a user
	// waiting behind w may now be at the head of its queue.
	a.dispatchLocked()
	return ctx.Err()
}

// release frees one of user's slots and hands it on.
func (a *admission) release(user string) {
	a.mu.Lock()
	a.releaseLocked(user)
	a.mu.Unlock()
}

func (a *admission) releaseLocked(user string) {
	u := a.users[user]
	u.running--
	a.free++
	a.forgetIdleLocked(user, u)
	a.dispatchLocked()
}

// dispatchLocked grants free slots, one at a time, to the head of the
// queue of the least recently served user under their cap.
func (a *admission) dispatchLocked() {
	for a.free > 0 {
		var next *userSlots
		for _, u := range a.users {
			if len(u.queue) > 0 && u.running < a.perUser && (next == nil || u.before(next)) {
				next = u
			}
		}
		if next == nil {
			return
		}
		w := next.queue[0]
		next.queue[0] = nil
		next.queue = next.queue[1:]
		a.grantLocked(next)
		w.granted = true
		close(w.ready)
	}
}

func (a *admission) grantLocked(u *userSlots) {
	a.free--
	u.running++
	a.seq++
	u.lastGrant = a.seq
}

// forgetIdleLocked drops a user with nothing running or queued, so the
// map holds only users with work and dispatch scans only them.
func (a *admission) forgetIdleLocked(user string, u *userSlots) {
	if u.running == 0 && len(u.queue) == 0 {
		delete(a.users, user)
	}
}
