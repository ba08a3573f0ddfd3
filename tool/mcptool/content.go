package mcptool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// OutcomeResult is the one member of an outcome that carries MCP content: an
// outcome that is a JSON object with this member alone holds, under it, a
// tools/call result's "content" (and "structuredContent", when there was
// some), which an MCP server in front gives back as content (see "The
// outcome" in the package documentation).
const OutcomeResult = MetaPrefix + "mcp_result"

// MetaOmitted, in the _meta of a text item that stands for content left out
// of an outcome, describes what was left out: its type and MIME type, its
// size in bytes and the SHA-256 of its JSON as the upstream sent it
// (compacted); or, for several items, their count and size.
const MetaOmitted = MetaPrefix + "omitted"

// DefaultMaxContentBytes is the default of [Config.MaxContentBytes], the
// bound on an outcome that carries MCP content. Items are kept in their order
// while the outcome stays within it; an item that does not fit is replaced by
// a text item saying what it was, with a [MetaOmitted] digest. The outcome is
// recorded and answered as is, so the first answer and every deduplicated
// one carry the same content. 64 KiB is half the executor's default bound on
// an outcome (an eighth of the NATS server's max_payload: 128 KiB at the
// default 1 MiB), over which an outcome is not recorded and an effectful call
// that took effect ends indeterminate; the other half is room for a
// structuredContent kept whole beside the content.
const DefaultMaxContentBytes = 64 << 10

// omittedReserve is the room kept for the item that stands for all the items
// after the last one kept.
const omittedReserve = 512

// contentItem is what is read of a content item to describe it when it is
// left out.
type contentItem struct {
	Type     string `json:"type"`
	MIMEType string `json:"mimeType"`
	Resource *struct {
		MIMEType string `json:"mimeType"`
	} `json:"resource"`
}

// ContentOutcome returns the outcome that carries content and structured
// (JSON; empty or null for none) as MCP content, within max bytes
// ([DefaultMaxContentBytes] when max is not positive); structured is kept
// whole, so an outcome whose structured content alone is over max is larger.
// It returns an error when an item is not a JSON object with a string
// "type", or structured is not JSON.
func ContentOutcome(content []json.RawMessage, structured json.RawMessage, max int) (string, error) {
	if max <= 0 {
		max = DefaultMaxContentBytes
	}
	items := make([]json.RawMessage, 0, len(content))
	for i, c := range content {
		var b bytes.Buffer
		if err := json.Compact(&b, c); err != nil {
			return "", fmt.Errorf("content item %d: %w", i, err)
		}
		var it contentItem
		if err := json.Unmarshal(b.Bytes(), &it); err != nil || it.Type == "" {
			return "", fmt.Errorf("content item %d: not an object with a type", i)
		}
		items = append(items, b.Bytes())
	}
	var sc json.RawMessage
	if t := bytes.TrimSpace(structured); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var b bytes.Buffer
		if err := json.Compact(&b, t); err != nil {
			return "", fmt.Errorf("structuredContent: %w", err)
		}
		sc = b.Bytes()
	}
	fixed := len(`{"`+OutcomeResult+`":{"content":[]}}`) + len(sc)
	if sc != nil {
		fixed += len(`,"structuredContent":`)
	}
	budget := max - fixed - omittedReserve
	kept := make([]json.RawMessage, 0, len(items))
	used := 0
	fits := func(item []byte) bool {
		n := len(item)
		if len(kept) > 0 {
			n++ // the comma
		}
		if used+n > budget {
			return false
		}
		used += n
		kept = append(kept, item)
		return true
	}
	for i, it := range items {
		if fits(it) || fits(omitted(it, max)) {
			continue
		}
		kept = append(kept, omittedRest(items[i:], max))
		break
	}
	inner := struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	}{kept, sc}
	out, err := json.Marshal(map[string]any{OutcomeResult: inner})
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// omitted returns the text item that stands for item, left out.
func omitted(item json.RawMessage, max int) json.RawMessage {
	var it contentItem
	_ = json.Unmarshal(item, &it) // ContentOutcome read it before
	mime := it.MIMEType
	if mime == "" && it.Resource != nil {
		mime = it.Resource.MIMEType
	}
	sum := sha256.Sum256(item)
	digest := hex.EncodeToString(sum[:])
	desc := it.Type
	if mime != "" {
		desc += " (" + mime + ")"
	}
	b, _ := json.Marshal(map[string]any{
		"type": "text",
		"text": fmt.Sprintf("[%s content of %d bytes left out: over the %d bytes toolexec keeps of a result; sha256 %s]",
			desc, len(item), max, digest),
		"_meta": map[string]any{MetaOmitted: map[string]any{
			"type": it.Type, "mimeType": mime, "bytes": len(item), "sha256": digest,
		}},
	})
	return b
}

// omittedRest returns the text item that stands for items, all left out.
func omittedRest(items []json.RawMessage, max int) json.RawMessage {
	n := 0
	for _, it := range items {
		n += len(it)
	}
	b, _ := json.Marshal(map[string]any{
		"type":  "text",
		"text":  fmt.Sprintf("[%d more content items of %d bytes left out: over the %d bytes toolexec keeps of a result]", len(items), n, max),
		"_meta": map[string]any{MetaOmitted: map[string]any{"items": len(items), "bytes": n}},
	})
	return b
}

// ParseContentOutcome returns the tools/call result an outcome of
// [ContentOutcome] carries: a JSON object with "content" and, when there was
// some, "structuredContent". ok is false for any other outcome: one that is
// not a JSON object whose only member is [OutcomeResult], holding an object
// whose content is a list.
func ParseContentOutcome(outcome string) (result json.RawMessage, ok bool) {
	t := bytes.TrimSpace([]byte(outcome))
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(OutcomeResult)) {
		return nil, false
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(t, &outer); err != nil || len(outer) != 1 || outer[OutcomeResult] == nil {
		return nil, false
	}
	var inner struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(outer[OutcomeResult], &inner); err != nil || inner.Content == nil {
		return nil, false
	}
	return outer[OutcomeResult], true
}
