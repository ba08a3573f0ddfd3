package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// The content the content upstream's tools answer with.
var (
	redPixel  = pngPixel(color.RGBA{R: 255, A: 255})
	shortWAV  = wav(8000, 80)                                     // 10 ms of silence
	midImage  = bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 10<<10) // 40 KiB: under mcptool's bound, kept whole
	bigImage  = bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 20<<10) // 80 KiB: under the executor's bound, over mcptool's
	embedded  = &sdk.ResourceContents{URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}
	mixedText = "This is text content alongside other kinds."
)

// b64 is data as a content item carries it.
func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// pngPixel returns a PNG of one pixel of colour c.
func pngPixel(c color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, c)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// wav returns a mono 8-bit PCM WAV file of n silent samples at rate.
func wav(rate, n uint32) []byte {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(36 + n)
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1)) // PCM
	w(uint16(1)) // mono
	w(rate)
	w(rate) // bytes a second
	w(uint16(1))
	w(uint16(8))
	b.WriteString("data")
	w(n)
	b.Write(bytes.Repeat([]byte{128}, int(n)))
	return b.Bytes()
}

// contentUpstream is an MCP server written with the Go SDK, over Streamable
// HTTP, whose tools answer with content that is not text: those the
// conformance suite's content scenarios call, test_medium_image, whose image
// is kept whole, and test_large_image, whose image is over what toolexec
// keeps of an outcome
// (mcptool.DefaultMaxContentBytes).
// An executor imports its tools (package mcptool, each effectful with no
// arguments: one run per run id), so their content crosses the executor, its
// record and the gateway. It counts the runs of each tool by run id.
type contentUpstream struct {
	tools []*tool.Tool

	mu   sync.Mutex
	runs map[[2]string]int // {tool, run_id} → runs
}

// startContentUpstream serves the upstream until the test ends and returns it
// with its tools imported.
func startContentUpstream(t *testing.T) *contentUpstream {
	t.Helper()
	u := &contentUpstream{runs: map[[2]string]int{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "content-upstream", Version: "1"},
		&sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	addContentTools(srv, func(tool string, req *sdk.CallToolRequest) {
		run, _ := req.Params.Meta[mcptool.MetaRunID].(string)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.runs[[2]string{tool, run}]++
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })

	ctx := testenv.Context(t, clientWait)
	up, err := mcptool.Open(ctx, mcptool.Config{Name: "content", URL: ts.URL, Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("opening the content upstream: %v", err)
	}
	t.Cleanup(func() { _ = up.Close() })
	if u.tools, err = up.Import(ctx, mcptool.ImportOptions{}); err != nil {
		t.Fatalf("importing the content upstream's tools: %v", err)
	}
	return u
}

// addContentTools adds to s the tools that answer with content that is not
// text (see contentUpstream); each tells ran that it runs, unless ran is nil.
func addContentTools(s *sdk.Server, ran func(tool string, req *sdk.CallToolRequest)) {
	add := func(name, desc string, content ...sdk.Content) {
		s.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: emptyObject},
			func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				if ran != nil {
					ran(name, req)
				}
				return &sdk.CallToolResult{Content: content}, nil
			})
	}
	add("test_image_content", "Answers with an image: one red pixel.",
		&sdk.ImageContent{Data: redPixel, MIMEType: "image/png"})
	add("test_audio_content", "Answers with audio: 10 ms of silence.",
		&sdk.AudioContent{Data: shortWAV, MIMEType: "audio/wav"})
	add("test_embedded_resource", "Answers with an embedded resource.",
		&sdk.EmbeddedResource{Resource: embedded})
	add("test_multiple_content_types", "Answers with text, an image and an embedded resource.",
		&sdk.TextContent{Text: mixedText},
		&sdk.ImageContent{Data: redPixel, MIMEType: "image/png"},
		&sdk.EmbeddedResource{Resource: embedded})
	add("test_medium_image", "Answers with an image of 40 KiB, which toolexec keeps.",
		&sdk.ImageContent{Data: midImage, MIMEType: "image/png"})
	add("test_large_image", "Answers with an image larger than toolexec keeps, and a text.",
		&sdk.ImageContent{Data: bigImage, MIMEType: "image/png"},
		&sdk.TextContent{Text: "a large picture"})
}

// ran returns how many times tool ran for run.
func (u *contentUpstream) ran(tool, run string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[[2]string{tool, run}]
}
