package node

import (
	"context"
	"sync"
)

// slot hands pairs from the receive path to the worker. It holds at most
// one pair: Put never waits and replaces a pair the worker has not taken
// yet (latest wins), so the receive path never waits for the backend and
// memory stays bounded however fast inputs arrive.
type slot struct {
	mu    sync.Mutex
	item  *pair
	ready chan struct{} // capacity 1: a wake-up for Take
}

func newSlot() *slot {
	return &slot{ready: make(chan struct{}, 1)}
}

// Put stores p and returns the pair it replaced, if any.
func (s *slot) Put(p *pair) (replaced *pair) {
	s.mu.Lock()
	replaced, s.item = s.item, p
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return replaced
}

// Take waits for a pair; it returns nil when ctx is done first.
func (s *slot) Take(ctx context.Context) *pair {
	for {
		s.mu.Lock()
		p := s.item
		s.item = nil
		s.mu.Unlock()
		if p != nil {
			return p
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil
		}
	}
}

// Clear removes and returns the pair waiting in the slot, if any.
func (s *slot) Clear() *pair {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.item
	s.item = nil
	return p
}
