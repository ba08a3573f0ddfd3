package httptool_test

import (
	"io"
	"log"
)

// discardLog silences a test server's log of expected handshake failures.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
