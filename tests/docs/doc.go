// Package docs holds README.md, docs/*.md and deploy/README.md to what they
// say. Every fenced block of those pages is found, named after the heading it
// stands under (README.md#run-it-yourself:1 is the first block under "Run it
// yourself"), and checked one of these ways:
//
//   - a script under testdata (rogpeppe/go-internal/testscript) runs its
//     commands, as written but for the ports and the data folders, and checks
//     what they print and their exit statuses;
//   - a Go test here checks it (a Go snippet compiled, a YAML or JSON file
//     parsed by the program that reads it, an output compared with a run);
//   - a test of another package checks it (named in the table of this
//     package's tests);
//   - it is listed with the reason why it is not run, or as owned by another
//     change and pending.
//
// TestEveryBlockChecked fails for a block none of these covers, and for a
// script that leaves a command of its block unrun. It has no Go API.
package docs
