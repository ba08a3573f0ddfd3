package embedded

import (
	"fmt"
	"log/slog"

	"github.com/nats-io/nats-server/v2/server"
)

// serverLogger passes the server's log lines to slog.
type serverLogger struct{ l *slog.Logger }

var _ server.Logger = serverLogger{}

func (s serverLogger) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLogger) Fatalf(format string, v ...any) {
	s.l.Error(fmt.Sprintf(format, v...), "fatal", true)
}
func (s serverLogger) Errorf(format string, v ...any) { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLogger) Debugf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLogger) Tracef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
