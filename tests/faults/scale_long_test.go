//go:build faults

package faults_test

// long is true in the long suite: `make faults`, or go test -tags faults.
const long = true
