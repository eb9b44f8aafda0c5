package session

import "sync"

// writeLock serialises a connection's Write calls (queueing a frame in the outbox, or waiting
// for room there) and grants them in arrival order. A rollout writes one frame at a time, so
// with several lanes writing at once each lane gets one frame per round: a lane that streams
// many events cannot starve another lane's next event (the round-robin of an HTTP/2 write
// scheduler), and the bounded outbox keeps a lane at most maxOutbox bytes ahead. A
// sync.Mutex gives no such order. Uncontended, Lock and Unlock take one short critical
// section each and allocate nothing; a waiter allocates one channel.
type writeLock struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{}
}

// Lock waits for the writers that arrived before this one.
func (l *writeLock) Lock() {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	<-ch
}

// Unlock hands the lock to the longest-waiting writer, if any.
func (l *writeLock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) == 0 {
		l.held = false
		return
	}
	next := l.waiters[0]
	l.waiters[0] = nil
	l.waiters = l.waiters[1:]
	close(next)
}
