// Package protodoc reads docs/PROTOCOL.md for the tests that hold the page to
// the code and to a running executor: its numbered sections and their
// subsections, the Markdown tables in them, and the names a table cell or a
// paragraph gives in backticks.
//
// A cell such as
//
//	`tool`, `reason`, `error` (detail for operators, when there is some)
//
// names three members; the text in parentheses after a member is its note,
// and backticked words inside a note are not members ([Members]).
//
// Only tests import this package; production code must not.
package protodoc
