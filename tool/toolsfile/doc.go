// Package toolsfile reads the YAML tools file: the tools an executor serves,
// each with its idempotency declaration, timeout, retry policy, JSON Schema
// parameters and body — an HTTP endpoint, a tool of an MCP server, or a body
// workers serve over NATS — and the MCP servers those bodies call.
//
//	mcp_servers:                  # optional: upstream MCP servers
//	  - name: memory              # [A-Za-z0-9_-]{1,128}, unique
//	    command: [node, "${MEMORY_SERVER_JS}"]   # a stdio server: program, then arguments
//	    env: {MEMORY_FILE_PATH: "${MEMORY_FILE}"} # added to PATH, HOME, ... (see mcptool.InheritedEnv)
//	    dir: /var/lib/memory      # optional working directory
//	    import:                   # optional: bring in every tool of the server
//	      prefix: mem_            # put before each name
//	      trust_annotations: false  # default: every imported tool is effectful
//	      exclude: [read_graph]   # leave these out
//	      tools:                  # per tool: description, idempotency, timeout, retry
//	        search_nodes: {idempotency: {kind: read_only}, timeout: 10s}
//	  - name: search
//	    url: https://search.example/mcp  # a Streamable HTTP server
//	    headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
//	    restart_delay: {min: 1s, max: 30s}  # optional: the backoff between attempts to reach it
//	tools:
//	  - name: book
//	    description: Take a seat.
//	    idempotency:                # omit the block: no policy
//	      kind: effectful           # read_only | idempotent | effectful
//	      key_arguments: [flight]   # omit: every argument; []: none
//	      check_arguments: [seats]  # optional
//	    timeout: 30s                # a Go duration
//	    retry: {max_attempts: 3, initial_backoff: 200ms, max_backoff: 10s, multiplier: 2}
//	    parameters:                 # JSON Schema of the arguments, written as YAML
//	      type: object
//	      properties:
//	        flight: {type: string}
//	      required: [flight]
//	    http:
//	      url: ${AIRLINE_URL}/book  # ${VAR} is taken from the environment
//	      method: POST              # POST (default), PUT or PATCH
//	      headers: {Authorization: "Bearer ${AIRLINE_TOKEN}"}
//	      max_response_bytes: 524288 # optional; default 512 KiB
//	  - name: remember
//	    idempotency: {kind: effectful, key_arguments: [entities]}
//	    mcp: {server: memory, tool: create_entities}  # tool: default, the entry's name
//	    # parameters omitted: the server's input schema, read when the file is opened
//	  - name: rebook
//	    idempotency: {kind: idempotent, key_arguments: [pnr]}
//	    timeout: 20s                # default 30s: a body served over NATS is always bounded
//	    parameters: {type: object, properties: {pnr: {type: string}}, required: [pnr]}
//	    nats: {}                    # served by workers, on toolexec.body.rebook
//	    # nats: {subject: toolexec.body.rebook-v2, max_reply_bytes: 524288}
//
// A tool has one body: http, mcp or nats. An MCP tool without parameters takes
// the server's input schema (and its description, when it has none), so its
// key and check arguments are checked against that schema when the file is
// opened. An MCP server must be named by a tool or import its tools; the file
// must declare at least one tool, so tools may be left out only when a server
// imports. The MCP package documentation (mcptool) says what a tools/call
// carries, how its answer is classified and how imported tools are declared;
// httptool's says the same of HTTP requests, and natstool's of requests to
// workers (docs/PROTOCOL.md §12).
//
// A nats tool is declared here and served by workers: what a worker declares
// of it must be what the file declares, or the executor does not run it
// (package workerset). Its nats block may give the subject its requests go to
// (default toolexec.body.<tool>; a workers' account exports toolexec.body.>
// only) and the bound on a reply (default 512 KiB). Since its body needs the
// executor's NATS connection, [File.Open] does not build it: the
// [Toolset.NATSTools] are built by the executor once it is connected.
//
// The file is read strictly. Unknown fields, a field given twice, a tool or
// server declared twice, a tool with no body or more than one, an empty nats
// block (write nats: {}), a nats subject with wildcards, an mcp
// naming no declared server, a server with both or neither of command and url,
// a key or check argument that is not a parameter, an empty idempotency or
// import block or a null key_arguments (write [] for none, or leave it out for
// every argument), a tool both excluded and overridden, and a ${VAR} naming an
// unset variable are all errors. [Parse] reports every error it finds, not just
// the first, joined with [errors.Join]; each is an [*Error] naming the file, the
// line and the tool or server, and matches [ErrInvalid].
//
// In http.url, header values, and a server's command, env values, dir and url,
// ${NAME} is replaced by the environment variable NAME and $$ by a single $; any
// other $ stands for itself. A variable that is set but empty expands to the
// empty string. Nothing else is expanded. Error messages never repeat an
// expanded value, so secrets stay out of logs.
//
// Parsing does no I/O. [File.Open] (or [Load], which reads, parses and opens)
// starts the MCP servers, lists their tools and builds every tool; what only a
// server can tell (a tool it does not list, a key argument its schema lacks, an
// imported name that collides) is reported like a parse error, at the line that
// caused it. The [Toolset] it returns must be closed, which stops the servers.
//
// # Servers that come and go
//
// A server that cannot be reached when the file is opened (the connection is
// refused, the process exits before answering, initialize fails) does not
// stop the file from opening, nor the other servers' tools from being
// served: it is tried again in the background, after a delay that doubles
// from restart_delay's min to its max (mcptool.Config.MinRestartDelay; by
// default 1s to 30s). Until it is first reached:
//
//   - the tools of the tools list that name it are listed, with the
//     parameters the file gives — or, when it gives none, a stand-in schema
//     (an object naming the key and check arguments, accepting any member) —
//     and are unavailable;
//   - the tools it imports are not listed: nothing can tell their names
//     before the server does. Name a tool in the tools list to have it listed
//     from the start.
//
// Once reached, its tools are built as they would have been at start (with
// the server's schema, and its description where the file gives none) and
// replace those listed meanwhile, and its imports are added. What only the server can refuse (a tool it does not list, a key
// argument its schema lacks, an imported name already taken) is logged at
// error level and listed by [Toolset.Servers], and that tool is not served;
// the rest are. Whenever a server is down — at start, or later, when a
// stdio server exits or an HTTP session breaks and it cannot be started
// again — its tools stay listed but are unavailable: [Toolset.Attach] marks
// them in the executor's registry, so that their calls are rejected
// upstream_unavailable, without running, and clears the mark once the server
// is connected again.
package toolsfile
