package toolsfile

import (
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// NATSDeclaration is a tool of the tools list whose body workers serve over
// NATS (an entry with nats instead of http or mcp; docs/PROTOCOL.md §12). It
// is built on the executor's connection, which exists only after the file is
// read: [Toolset.NATSTools] hands it over as a natstool.Pending.
type NATSDeclaration struct {
	// File is the name the file was parsed under; Line is the line of the
	// tool's entry in the tools list.
	File string
	Line int
	// Spec is the tool's declaration.
	Spec tool.Spec
	// Endpoint is where its requests go; its Conn is nil.
	Endpoint natstool.Endpoint

	site site
}

// Pending returns the tool to build once the connection exists.
func (d NATSDeclaration) Pending() natstool.Pending {
	return natstool.Pending{Spec: d.Spec, Endpoint: d.Endpoint}
}

// check checks the declaration and its endpoint as natstool.New would.
func (d NATSDeclaration) check() error {
	if _, err := tool.New(d.Spec, noBody); err != nil {
		return d.site.locate(err, "")
	}
	if err := natstool.CheckEndpoint(d.Spec.Name, d.Endpoint); err != nil {
		return d.site.locate(err, "")
	}
	return nil
}

// natsEndpoint reads a nats block: the subject and the bound on replies.
func (p *parser) natsEndpoint(e entry, w *where, lines map[string]int) natstool.Endpoint {
	var ep natstool.Endpoint
	if v := resolve(e.val); v.ShortTag() == "!!null" {
		p.fail(v.Line, w, "nats", "is empty: write nats: {} to have workers serve the tool on toolexec.body.<tool>")
		return ep
	}
	f, ok := p.mapping(e, w, "nats", "subject", "max_reply_bytes")
	if !ok {
		return ep
	}
	lines["nats"] = e.key.Line
	for k, x := range f {
		lines["nats."+k] = x.key.Line
	}
	if x, ok := f["subject"]; ok {
		if s, ok := p.text(x, w, "nats.subject"); ok {
			if s == "" {
				p.fail(resolve(x.val).Line, w, "nats.subject", "is empty: leave it out for toolexec.body.<tool>")
			}
			ep.Subject = s
		}
	}
	if x, ok := f["max_reply_bytes"]; ok {
		if n, ok := p.integer(x, w, "nats.max_reply_bytes"); ok {
			if n < 1 {
				p.fail(resolve(x.val).Line, w, "nats.max_reply_bytes", "must be positive")
			}
			ep.MaxReplyBytes = n
		}
	}
	return ep
}
