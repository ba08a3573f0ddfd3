// Package toolsfile reads the YAML tools file: the tools an executor serves,
// each with its idempotency declaration, timeout, retry policy, JSON Schema
// parameters and body — an HTTP endpoint, or a tool of an MCP server — and the
// MCP servers those bodies call.
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
//
// A tool has http or mcp, not both. An MCP tool without parameters takes the
// server's input schema (and its description, when it has none), so its key and
// check arguments are checked against that schema when the file is opened. An
// MCP server must be named by a tool or import its tools; the file must declare
// at least one tool, so tools may be left out only when a server imports. The
// MCP package documentation (mcptool) says what a tools/call carries, how its
// answer is classified and how imported tools are declared; httptool's says the
// same of HTTP requests.
//
// The file is read strictly. Unknown fields, a field given twice, a tool or
// server declared twice, a tool with neither or both of http and mcp, an mcp
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
package toolsfile
