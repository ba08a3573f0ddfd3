// Package workerset keeps an executor's registry in step with the workers that
// serve tool bodies over NATS (docs/PROTOCOL.md §12): it learns their tools
// without a tools file, and withholds a tool whose declarations disagree.
//
// # Discovery
//
// A [Set] asks $SRV.INFO.toolexec-worker — the service API's INFO request,
// which every worker answers with its endpoints — and gathers every reply
// that comes within [Config.Window]; it does so at [Set.Refresh], which an
// executor calls once before it takes calls, and then every
// [Config.Interval] ([Set.Run]); a round ends at once when the server answers
// that no one received the request. A worker is remembered until it has gone
// unheard for [Config.Absent] rounds in a row, so that a reply that came late
// once does not make its tools vanish. A round whose request could not be
// sent changes nothing.
//
// Each endpoint of a worker claims a tool, named as the endpoint. Its
// declaration (the metadata toolexec.declaration) is read with
// natstool.ParseDeclaration, as strictly as a tools file is; an endpoint with
// none, with one that is refused, with one naming another tool, on a subject
// one cannot publish to, or outside the queue group toolexec.body is refused.
// A refusal is logged at error level, naming the worker and the tool, once
// while it lasts, and the tool is not served from that worker.
//
// # Tools
//
// A tool that every worker declaring it declares alike (the same description,
// parameters, kind, key and check arguments, timeout and subject) is put in
// the registry, its body a natstool body on that subject; it is replaced when
// the declaration changes, and removed once no worker declares it. The
// dispatcher and the catalog read the registry at each call and request, so
// the tool is served and listed from then on.
//
// Tools the registry held when the Set was made, or that were put in it since
// by someone else (the tools of an MCP server imported once it is reached),
// are the executor's own. Those
// named in [Config.Served] (a tools file's nats: tools) have their bodies
// served by workers too: a worker's declaration of one must be the
// executor's. The others have bodies the executor runs itself (Go, HTTP,
// MCP).
//
// # Conflicts
//
// A tool is in conflict, and not run, while
//
//   - workers declare it differently, or differently from the executor's own
//     declaration of it;
//   - a worker declares a tool whose body the executor runs itself: two
//     bodies for one name;
//   - a worker's declaration of it is refused while other workers (or the
//     executor) declare it: the refused worker's endpoint shares the tool's
//     subject and queue group, so it would get a share of the calls.
//
// The registry withholds the name (tool.Registry.SetConflict): calls of it
// are rejected tool_conflict, the catalog leaves it out. The conflict is
// logged at error level when it begins or changes, naming the workers and
// what differs, counted ([Observer]), and listed by tool.Registry.Conflicts.
// Nothing is picked: the conflict lasts until the declarations agree — a
// worker is stopped or changed, and goes unheard for Absent rounds, or
// declares alike — and the tool is then served again. So a declaration is
// changed by stopping the workers of the old one before starting those of
// the new, or under a new tool name.
package workerset
