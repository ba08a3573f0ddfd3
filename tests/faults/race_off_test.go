//go:build !race

package faults_test

// raceBuild reports whether the tests run with the race detector.
const raceBuild = false
