package memstore

// Waiters returns how many keys have subscribed Waits, for tests of leaks.
func Waiters(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.signals)
}
