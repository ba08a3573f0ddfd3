package redisstore

import (
	"errors"
	"testing"
)

// replyErr is an error reply as go-redis reports it (a redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestNotNow: the replies with which Redis refuses a command for now send a
// pipelined run back to run alone; a script's own errors and other failures
// do not.
func TestNotNow(t *testing.T) {
	tests := []struct {
		give error
		want bool
	}{
		{replyErr("LOADING Redis is loading the dataset in memory"), true},
		{replyErr("READONLY You can't write against a read only replica."), true},
		{replyErr("MASTERDOWN Link with MASTER is down"), true},
		{replyErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyErr("CLUSTERDOWN The cluster is down"), true},
		{replyErr("NOREPLICAS Not enough good replicas to write."), true},
		{replyErr("ERR max number of clients reached"), true},
		{replyErr("ERR user_script:12: redisstore: malformed record x"), false},
		{replyErr("NOSCRIPT No matching script."), false},
		{errors.New("LOADING but not a reply"), false},
	}
	for _, tt := range tests {
		if got := notNow(tt.give); got != tt.want {
			t.Errorf("notNow(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}
}
