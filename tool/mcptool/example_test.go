package mcptool_test

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/tool/mcptool"
)

// An upstream's hints choose an imported tool's kind only when the tools file
// trusts them.
func ExampleAnnotationPolicy() {
	no := false
	hints := &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}
	fmt.Println(mcptool.AnnotationPolicy(hints, false).Kind)
	fmt.Println(mcptool.AnnotationPolicy(hints, true).Kind)
	fmt.Println(mcptool.AnnotationPolicy(&mcp.ToolAnnotations{ReadOnlyHint: true}, true).Kind)
	// Output:
	// effectful
	// idempotent
	// read_only
}
