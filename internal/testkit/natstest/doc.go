// Package natstest starts embedded NATS servers with JetStream for tests: a single
// node ([Start]) or an in-process cluster ([StartCluster]), each on random ports
// of 127.0.0.1 with its own temporary store directory, shut down when the test
// ends. It never touches a NATS server already running on the machine.
//
// It also has the helpers fault tests need: find the leader of a stream
// ([StreamLeader]), stop it ([KillStreamLeader]), bring a stopped node back
// with its data ([Restart]), wait until every node is current ([WaitHealthy]),
// and a cluster whose routes go through TCP proxies, so that a node can be cut
// off from its peers while its clients stay connected ([StartProxiedCluster]).
//
// Only tests import this package; production code must not.
package natstest
