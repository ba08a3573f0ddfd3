package memstore

// Waiters returns how many keys have subscribed Waits, for tests of leaks.
func Waiters(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.signals)
}

// Held returns how many records the store holds, expired ones not yet removed
// included. It panics if the expiry list does not hold exactly the stored
// entries, oldest write first.
func Held(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.tenants {
		n += len(m)
	}
	listed := 0
	var older *entry
	for e := s.oldest; e != nil; e = e.newer {
		if e.older != older || (older != nil && e.rec.UpdatedAt.Before(older.rec.UpdatedAt)) {
			panic("memstore: expiry list out of order")
		}
		if s.tenants[e.rec.Tenant][e.rec.Key] != e {
			panic("memstore: expiry list holds an entry the store does not")
		}
		older = e
		listed++
	}
	if older != s.newest || listed != n {
		panic("memstore: expiry list and records disagree")
	}
	return n
}
