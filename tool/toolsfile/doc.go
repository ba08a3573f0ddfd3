// Package toolsfile reads the YAML tools file: the HTTP tools an executor serves,
// each with its idempotency declaration, timeout, retry policy, JSON Schema
// parameters and endpoint.
//
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
//
// The file is read strictly. Unknown fields, a field given twice, a tool declared
// twice, a tool without http, a key or check argument that is not a parameter, an
// empty idempotency block or a null key_arguments (write [] for none, or leave it
// out for every argument), and a ${VAR} naming an unset variable are all errors.
// [Parse] reports every error it finds, not just the first, joined with
// [errors.Join]; each is an [*Error] naming the file, the line and the tool, and
// matches [ErrInvalid].
//
// In http.url and header values, ${NAME} is replaced by the environment variable
// NAME and $$ by a single $; any other $ stands for itself. A variable that is set
// but empty expands to the empty string. Nothing else is expanded. Error messages
// never repeat an expanded value, so secrets stay out of logs.
//
// The tools are HTTP tools, built with [httptool.New]; the package documentation
// of httptool says what each request carries and how its answer is classified.
package toolsfile
