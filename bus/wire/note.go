package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tesserix/toolexec/events"
)

// Notes are the audit records of what a call's body reported while it ran:
// an upstream MCP server's progress and log notifications. Each is stored in
// [EventStream] under a subject of eight tokens, one more than an answer's,
// so that no answer filter (seven tokens) ever matches one, and relayed from
// there to the call's caller (docs/PROTOCOL.md §13).
const (
	// NoteProgress is the kind of a progress note.
	NoteProgress = "progress"
	// NoteLog is the kind of a log note.
	NoteLog = "log"

	// NoteTypePrefix starts the CloudEvents type of a note, followed by its
	// kind.
	NoteTypePrefix = "io.tesserix.toolexec."
)

// NoteSubject returns
// "toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>.<seq>", where
// the seq-th note of a call is stored. Like [CallSubject], it does not check
// its arguments.
func NoteSubject(kind, tenant, tool, runID, callID string, seq int) string {
	return EventPrefix + tenant + "." + kind + "." + tool + "." + runID + "." + callID + "." + strconv.Itoa(seq)
}

// NoteFilter returns "toolexec.event.<tenant>.*.<tool>.*.<call_id>.*": every
// note of one call. Like [CallSubject], it does not check its arguments.
func NoteFilter(tenant, tool, callID string) string {
	return EventPrefix + tenant + ".*." + tool + ".*." + callID + ".*"
}

// Note is one note: a progress or log notification of a call's body.
type Note struct {
	// ID is the event's id and Nats-Msg-Id: see [NoteID].
	ID     string
	Kind   string // NoteProgress or NoteLog
	Tenant string
	Tool   string
	RunID  string
	CallID string
	Seq    int // from 1, in the order the executor recorded them
	Time   time.Time
	Source string // the executor that recorded it (CloudEvents source)

	// Progress: Progress, Total (0: unknown) and Message.
	Progress float64
	Total    float64
	Message  string
	// Log: Level, Logger and Data (any JSON).
	Level  string
	Logger string
	Data   json.RawMessage
}

// noteData is a note's data member.
type noteData struct {
	Tool     string          `json:"tool"`
	Seq      int             `json:"seq"`
	Progress *float64        `json:"progress,omitempty"`
	Total    *float64        `json:"total,omitempty"`
	Message  string          `json:"message,omitempty"`
	Level    string          `json:"level,omitempty"`
	Logger   string          `json:"logger,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// noteEvent is a note as a structured CloudEvent.
type noteEvent struct {
	SpecVersion     string   `json:"specversion"`
	ID              string   `json:"id"`
	Source          string   `json:"source"`
	Type            string   `json:"type"`
	Subject         string   `json:"subject"`
	DataContentType string   `json:"datacontenttype"`
	Time            string   `json:"time,omitempty"`
	Data            noteData `json:"data"`
	CallID          string   `json:"callid"`
	RunID           string   `json:"runid"`
	Tenant          string   `json:"tenant"`
}

// NoteID returns the id of the seq-th note of one run of a call's body:
// 32 hex digits of a SHA-256 over the tenant, tool, call id, run (a nonce of
// the executor's, so that a call delivered again records its notes anew)
// and seq. It is the note's Nats-Msg-Id as well.
func NoteID(tenant, tool, callID, run string, seq int) string {
	h := sha256.Sum256([]byte("note\x00" + tenant + "\x00" + tool + "\x00" + callID + "\x00" + run + "\x00" + strconv.Itoa(seq)))
	return hex.EncodeToString(h[:16])
}

// NoteJSON returns n as a structured CloudEvent. It returns an error
// matching ErrUnsupported for a note without an id or of a kind it does not
// know.
func NoteJSON(n Note) ([]byte, error) {
	if n.ID == "" {
		return nil, fmt.Errorf("%w: a note without an id", ErrUnsupported)
	}
	d := noteData{Tool: n.Tool, Seq: n.Seq}
	switch n.Kind {
	case NoteProgress:
		d.Progress, d.Message = &n.Progress, n.Message
		if n.Total > 0 {
			d.Total = &n.Total
		}
	case NoteLog:
		d.Level, d.Logger, d.Data = n.Level, n.Logger, n.Data
		if len(d.Data) == 0 {
			d.Data = json.RawMessage("null")
		}
	default:
		return nil, fmt.Errorf("%w: note kind %q", ErrUnsupported, n.Kind)
	}
	e := noteEvent{
		SpecVersion: "1.0", ID: n.ID, Source: n.Source,
		Type: NoteTypePrefix + n.Kind, Subject: n.Tool, DataContentType: "application/json",
		Data: d, CallID: n.CallID, RunID: n.RunID, Tenant: n.Tenant,
	}
	if !n.Time.IsZero() {
		e.Time = n.Time.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(e)
}

// DecodeNote reads a note from the subject and payload of a message
// published on a [NoteSubject]. It returns an error matching ErrBadSubject or
// ErrBadMessage for anything else: an answer, an event of a kind it does not
// know, a payload that is not a note.
func DecodeNote(subject string, data []byte) (Note, error) {
	rest, ok := strings.CutPrefix(subject, EventPrefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 6 {
		return Note{}, fmt.Errorf("%w: %s is not a note's subject", ErrBadSubject, quote(subject))
	}
	for i, name := range []string{"tenant", "", "tool", "runid", "callid"} {
		if name != "" {
			if err := events.CheckToken(name, parts[i]); err != nil {
				return Note{}, fmt.Errorf("%w: %w", ErrBadSubject, err)
			}
		}
	}
	kind := parts[1]
	if kind != NoteProgress && kind != NoteLog {
		return Note{}, fmt.Errorf("%w: %s is not a note's kind", ErrBadSubject, quote(kind))
	}
	var e struct {
		ID   string   `json:"id"`
		Type string   `json:"type"`
		Time string   `json:"time"`
		Src  string   `json:"source"`
		Data noteData `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return Note{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if e.ID == "" {
		return Note{}, fmt.Errorf("%w: a note without an id", ErrBadMessage)
	}
	if e.Type != NoteTypePrefix+kind {
		return Note{}, fmt.Errorf("%w: type %s on a %s subject", ErrBadMessage, quote(e.Type), kind)
	}
	n := Note{ID: e.ID, Kind: kind, Tenant: parts[0], Tool: parts[2], RunID: parts[3], CallID: parts[4], Seq: e.Data.Seq,
		Source: e.Src, Message: e.Data.Message, Level: e.Data.Level, Logger: e.Data.Logger, Data: e.Data.Data}
	if e.Data.Progress != nil {
		n.Progress = *e.Data.Progress
	}
	if e.Data.Total != nil {
		n.Total = *e.Data.Total
	}
	if e.Time != "" {
		n.Time, _ = time.Parse(time.RFC3339Nano, e.Time)
	}
	return n, nil
}
