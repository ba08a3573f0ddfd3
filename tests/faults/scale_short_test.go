//go:build !faults

package faults_test

// long is false in the short suite that plain `go test` (and `make test`) runs;
// `make faults` builds with the faults tag for the long one.
const long = false
