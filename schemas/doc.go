// Package schemas holds toolexec's published data: the JSON Schemas (draft 2020-12)
// for the data of every event on the wire, and the key vectors that clients in other
// languages use to check their own key derivation.
//
// Everything is embedded in the binary, so the executor validates against exactly
// the files in this directory and nothing fetched at run time:
//
//	events/call.json           data of io.tesserix.toolexec.call
//	events/<kind>.json         data of io.tesserix.toolexec.<kind>, one per answer
//	                           kind (completed, deduplicated, indeterminate, failed,
//	                           rejected) and the audit kind resolved
//	vectors/*.json             published idempotency-key vectors (docs/PROTOCOL.md §6)
//
// Each schema's $id is [BaseURI] followed by its path here. The package only serves
// the files; package bus/wire compiles the schemas and validates against them.
package schemas
