package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// granted reports whether w has been granted its slot, without waiting.
func granted(w *slotWaiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// fill takes n slots for user at once, failing t if one is not free.
func fill(t *testing.T, a *admission, user string, n int) {
	t.Helper()
	for i := range n {
		if _, ok := a.tryAcquire(user); !ok {
			t.Fatalf("%s's slot %d was not free", user, i+1)
		}
	}
}

// queue queues n waiters of user, failing t if one gets a slot at once.
func queue(t *testing.T, a *admission, user string, n int) []*slotWaiter {
	t.Helper()
	ws := make([]*slotWaiter, n)
	for i := range ws {
		w, ok := a.tryAcquire(user)
		if ok {
			t.Fatalf("%s's waiter %d got a slot at once", user, i+1)
		}
		ws[i] = w
	}
	return ws
}

// TestAdmissionFairAcrossUsers: with every slot taken by one user and 32
// more of theirs queued, another user's first subagent gets the very next
// slot that frees; the first user's waiters then follow in their order.
func TestAdmissionFairAcrossUsers(t *testing.T) {
	a := newAdmission(4, 4)
	fill(t, a, "alice", 4)
	alice := queue(t, a, "alice", 32)
	bob := queue(t, a, "bob", 1)[0]

	a.release("alice")
	if !granted(bob) {
		t.Fatal("bob's first subagent did not get the first slot released")
	}
	for i, w := range alice {
		if granted(w) {
			t.Fatalf("alice's waiter %d was granted alongside bob", i+1)
		}
	}
	// Bob has nothing more queued: alice's waiters follow, first come
	// first served.
	for i := range alice {
		a.release("alice")
		for j, w := range alice {
			if got, want := granted(w), j <= i; got != want {
				t.Fatalf("after %d releases alice's waiter %d granted = %v, want %v", i+1, j+1, got, want)
			}
		}
	}
}

// TestAdmissionRotates: two users with long queues take freed slots in
// turn, whoever was served least recently first.
func TestAdmissionRotates(t *testing.T) {
	a := newAdmission(1, 1)
	fill(t, a, "alice", 1)
	queues := map[string][]*slotWaiter{"alice": queue(t, a, "alice", 3), "bob": queue(t, a, "bob", 3)}
	holder := "alice"
	var got []string
	for range 6 {
		a.release(holder)
		holder = ""
		for user, ws := range queues {
			if len(ws) > 0 && granted(ws[0]) {
				holder, queues[user] = user, ws[1:]
			}
		}
		if holder == "" {
			t.Fatal("a release granted nobody")
		}
		got = append(got, holder)
	}
	if want := []string{"bob", "alice", "bob", "alice", "bob", "alice"}; !slices.Equal(got, want) {
		t.Fatalf("grants went to %v, want %v", got, want)
	}
}

// TestAdmissionPerUserCap: a user at max_running_per_user queues while
// slots are free, and another user takes those slots at once.
func TestAdmissionPerUserCap(t *testing.T) {
	a := newAdmission(4, 2)
	fill(t, a, "alice", 2)
	w := queue(t, a, "alice", 1)[0]
	fill(t, a, "bob", 2)
	if granted(w) {
		t.Fatal("alice's third subagent was granted over her cap")
	}
	// A slot of bob's frees: alice is still at her cap, so it stays free
	// and her waiter waits.
	a.release("bob")
	if granted(w) {
		t.Fatal("alice's waiter took bob's slot while she is at her cap")
	}
	a.release("alice")
	if !granted(w) {
		t.Fatal("alice's waiter was not granted when she fell under her cap")
	}
}

// TestAdmissionCancelWhileQueued: a waiter whose context ends leaves the
// queue and holds no slot; the one behind it moves up.
func TestAdmissionCancelWhileQueued(t *testing.T) {
	a := newAdmission(1, 1)
	fill(t, a, "alice", 1)
	ws := queue(t, a, "alice", 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.wait(ctx, "alice", ws[0]); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	a.release("alice")
	if err := a.wait(context.Background(), "alice", ws[1]); err != nil {
		t.Fatalf("the second waiter: %v", err)
	}
	a.release("alice")
	if len(a.users) != 0 || a.free != 1 {
		t.Fatalf("after every release: users %v, free %d; want none and 1", a.users, a.free)
	}
}

// TestAdmissionGrantRacingCancel: a waiter granted just as its context
// ends gives the slot back, to the next in line.
func TestAdmissionGrantRacingCancel(t *testing.T) {
	a := newAdmission(1, 1)
	fill(t, a, "alice", 1)
	first := queue(t, a, "alice", 1)[0]
	second := queue(t, a, "bob", 1)[0]
	a.release("alice") // grants first
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// first's wait sees both ready and done; whichever the select picks,
	// a cancelled wait must not keep the slot.
	if err := a.wait(ctx, "alice", first); err == nil {
		a.release("alice")
	}
	if !granted(second) {
		t.Fatal("the slot of a cancelled waiter was not handed on")
	}
	a.release("bob")
	if len(a.users) != 0 || a.free != 1 {
		t.Fatalf("users %v, free %d; want none and 1", a.users, a.free)
	}
}

func BenchmarkAdmission(b *testing.B) {
	a := newAdmission(32, 8)
	users := make([]string, 8)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			u := users[i%len(users)]
			i++
			if w, ok := a.tryAcquire(u); !ok {
				_ = a.wait(context.Background(), u, w)
			}
			a.release(u)
		}
	})
}

// TestAdmissionNewcomersInArrivalOrder: users not served yet are served
// in the order they came.
func TestAdmissionNewcomersInArrivalOrder(t *testing.T) {
	a := newAdmission(1, 1)
	fill(t, a, "alice", 1)
	users := []string{"bob", "carol", "dave", "erin"}
	waiters := map[string]*slotWaiter{}
	for _, u := range users {
		waiters[u] = queue(t, a, u, 1)[0]
	}
	holder := "alice"
	for _, want := range users {
		a.release(holder)
		if !granted(waiters[want]) {
			t.Fatalf("after %s's release, %s was not served next", holder, want)
		}
		holder = want
	}
	a.release(holder)
}
