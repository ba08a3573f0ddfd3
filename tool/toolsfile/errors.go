package toolsfile

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by every error that refuses a tools file.
var ErrInvalid = errors.New("toolsfile: invalid tools file")

// Error is one problem in a tools file. It matches [ErrInvalid], and unwraps to
// the underlying error when there is one: a [*tool.SpecError] refusing the
// declaration (so that errors.Is(err, tool.ErrUnknownArgument) works), or, from
// [File.Open], an error of package mcptool (an upstream that cannot be started
// matches mcptool.ErrUnavailable).
type Error struct {
	// File is the name the file was parsed under.
	File string
	// Line is the 1-based line at fault; 0 when the YAML parser gave none.
	Line int
	// Tool is the name of the tool at fault, "" when it has none or the problem
	// is outside any tool.
	Tool string
	// Server is the name of the MCP server at fault (an mcp_servers entry, its
	// import included), "" when it has none or the problem is elsewhere.
	Server string
	// List is the list holding the entry at fault, "tools" or "mcp_servers";
	// "" for the file as a whole.
	List string
	// Index is the entry's position in List, from 0; -1 outside any entry.
	Index int
	// Field is the dotted path of the field at fault within the entry (or the
	// file), e.g. "idempotency.key_arguments" or
	// "import.tools.search.timeout"; "" for the entry or file as a whole.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, or nil.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case e.Tool != "":
		fmt.Fprintf(&b, "tool %q: ", e.Tool)
	case e.Server != "":
		fmt.Fprintf(&b, "mcp server %q: ", e.Server)
	case e.List != "" && e.Index >= 0:
		fmt.Fprintf(&b, "%s[%d]: ", e.List, e.Index)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

var _ error = (*Error)(nil)
