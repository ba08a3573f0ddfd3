package bus

import "time"

// ShortenSetupAttempts makes each try of EnsureStreams's and EnsureConsumer's
// requests last at most d until the test ends.
func ShortenSetupAttempts(t interface{ Cleanup(func()) }, d time.Duration) {
	old := setupAttempt
	setupAttempt = d
	t.Cleanup(func() { setupAttempt = old })
}
