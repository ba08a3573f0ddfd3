// Package wire holds the wire of the current release to golden files: what
// the code sends and what it accepts, written down once in testdata/golden
// and compared with what the code does today. The folder's WIRE_VERSION names
// the wire version they record, the one docs/PROTOCOL.md states.
//
// What the goldens hold (testdata/golden/README.md describes each file):
//
//   - one call in each mode, structured and binary (subject, every header,
//     the payload), as wire.CallMsg builds it;
//   - one answer of each kind in each mode, the audit kind resolved too, as
//     wire.AnswerMsg builds it, and one note of each kind (progress, log), as
//     wire.NoteJSON writes it;
//   - a copy of every JSON Schema the executors embed (package schemas);
//   - the subjects, the streams and the consumer the executors create, the
//     header names, the vocabulary (kinds, types, extensions, reasons, codes);
//   - the catalog, history, admin and interaction requests and replies, as
//     their types travel in JSON;
//   - the exit statuses of `emitter call`, read from the built emitter
//     answered by the golden answers.
//
// The tests check both ways: the code writes every golden (byte for byte for
// messages and schemas, as parsed JSON where member order is not part of the
// contract), and the code's readers read every golden back to the values it
// was written from. An answer reader of the release the goldens record reads
// them (these tests, run at that release, say so); the code of a later
// release writes them unchanged; so that reader reads the later release's
// answers. When a golden differs, the failure names what changed.
//
// The goldens change only with the wire: a new version stated at the top of
// docs/PROTOCOL.md (§11 says what changed and why) and a CHANGELOG.md entry
// that names it. Then
//
//	go test ./tests/wire -update
//
// writes them anew and records the version; without a new version -update is
// refused. A change that keeps the wire (a hand-written encoder, say) must
// produce the goldens as they are.
package wire
