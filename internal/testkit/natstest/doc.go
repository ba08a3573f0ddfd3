// Package natstest starts embedded NATS servers with JetStream for tests: a single
// node ([Start]) or an in-process cluster ([StartCluster]), each on random ports
// of 127.0.0.1 with its own temporary store directory, shut down when the test
// ends. It never touches a NATS server already running on the machine.
//
// It also has the helpers fault tests need: find the leader of a stream
// ([StreamLeader]), stop it ([KillStreamLeader]) and bring a stopped node back
// with its data ([Restart]).
//
// Only tests import this package; production code must not.
package natstest
