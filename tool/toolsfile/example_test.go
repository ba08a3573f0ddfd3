package toolsfile_test

import (
	"fmt"

	"github.com/tesserix/toolexec/tool/toolsfile"
)

func ExampleParse() {
	src := []byte(`tools:
  - name: book
    idempotency: {kind: effectful, key_arguments: [flight, date]}
    parameters:
      type: object
      properties: {flight: {type: string}}
    http: {url: "${AIRLINE_URL}/bookings"}
`)
	env := func(string) (string, bool) { return "", false } // nothing is set
	_, err := toolsfile.Parse(src, "tools.yaml", env)
	fmt.Println(err)
	// Output:
	// tools.yaml:3: tool "book": idempotency.key_arguments: "date" is not a parameter of the tool (parameters: flight)
	// tools.yaml:7: tool "book": http.url: ${AIRLINE_URL} is not set in the environment
}
