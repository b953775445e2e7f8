package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of image/jpeg results
	_ "image/png"  // DecodeConfig of image/png results
	"strings"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// The code interpreter's tool, a set of its own (the four tools stay as
// they are): runtime_run_code runs Python in the sandbox's default
// context, a Jupyter kernel that keeps variables between calls, and returns
// charts as images.
//
//	ts := tools.CodeInterpreterTools(sbx) // a "code-interpreter" sandbox
//	res, _ := tools.Dispatch(ctx, ts, call.Name, call.Arguments)
//	// res.Text for every provider; res.Images as image parts where the
//	// provider takes them: AnthropicResultBlocks, OpenAIResponsesResultParts,
//	// GeminiParts, MCP image content.

// RunCodeName is the code interpreter tool's name.
const RunCodeName = "runtime_run_code"

// Limits of runtime_run_code.
const (
	// MaxCodeBytes bounds the code argument.
	MaxCodeBytes = 256 << 10
	// MaxImages is how many images one result carries; more are named in
	// the text only.
	MaxImages = 4
	// MaxImageBytes bounds one image (decoded): the providers' own limit
	// for an image is about 5 MB.
	MaxImageBytes = 5 << 20
	// MaxResultTextBytes caps the text of each rich result (a DataFrame's
	// text/plain, say) in the summary.
	MaxResultTextBytes = 8 << 10
	// CodeTimeoutSeconds is how long a call may run before it is
	// interrupted (the context keeps its variables).
	CodeTimeoutSeconds = 120
)

// Image is an image a tool produced, checked: its bytes decode as the MIME
// type says, within MaxImageBytes.
type Image struct {
	// MIMEType is "image/png" or "image/jpeg".
	MIMEType string `json:"mimeType"`
	// Data is the image's bytes (base64 in JSON).
	Data   []byte `json:"data"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// RunCodeOutput is the Data of a runtime_run_code Result: the Execution
// as the server returned it.
type RunCodeOutput = withruntime.Execution

var codeSpecs = []spec{{
	name: RunCodeName,
	description: fmt.Sprintf("Run code in a Jupyter kernel in the sandbox, like a notebook cell: Python (the default), or JavaScript or TypeScript (Deno), R, Bash or Java (JShell), each language in a kernel of its own; variables, imports and functions persist between calls, "+
		"so compute in one call and use the result in the next. numpy, pandas and matplotlib are installed; a matplotlib figure is returned as an image (no need to save it) with the values it plots, "+
		"and the value of the last line is returned as the cell's result. Files are in /workspace, shared with the other tools. "+
		"Returns stdout, stderr, the result, images and any error with its traceback. Output is capped at %d bytes per stream (the beginning and the end are kept). "+
		"A call is interrupted after %d seconds; the variables survive unless the result says the kernel was restarted. input() is not available.",
		MaxOutputBytes, CodeTimeoutSeconds),
	schema: `{
  "type": "object",
  "properties": {
    "code": {
      "type": "string",
      "description": "The code to run, in its language, such as \"import pandas as pd\\ndf = pd.read_csv('data.csv')\\ndf.describe()\"."
    },
    "language": {
      "type": "string",
      "enum": ["", "python", "javascript", "typescript", "r", "bash", "java"],
      "description": "The language of the code: \"python\", \"javascript\", \"typescript\", \"r\", \"bash\" or \"java\". Use \"\" for python."
    }
  },
  "required": ["code", "language"],
  "additionalProperties": false
}`,
	example: `{"code": "x = 6 * 7\nx", "language": ""}`,
	fields: []field{
		{name: "code", essential: true, max: MaxCodeBytes},
		{name: "language", max: 64},
	},
	check: checkRunCode,
	run:   runRunCode,
}}

// codeLanguages are the languages runtime_run_code takes (E2B's short
// names among them), each to the name the server knows it by.
var codeLanguages = map[string]string{
	"": "", "python": "", "python3": "", "py": "",
	"javascript": "javascript", "js": "javascript", "typescript": "typescript", "ts": "typescript",
	"r": "r", "bash": "bash", "sh": "bash", "java": "java",
}

func checkRunCode(a args) string {
	if _, ok := codeLanguages[strings.ToLower(a.str["language"])]; !ok {
		return fmt.Sprintf("language %q is not available; runtime_run_code runs python, javascript, typescript, r, bash or java (use runtime_exec for other languages)", a.str["language"])
	}
	if strings.TrimSpace(a.str["code"]) == "" {
		return "code is empty; give the code to run"
	}
	return ""
}

// CodeDefinitions returns the code interpreter tool's declaration.
func CodeDefinitions() []Definition {
	return definitions(codeSpecs)
}

// CodeInterpreterTools binds runtime_run_code to sbx, which must be of the
// code-interpreter template (withruntime.CodeInterpreterTemplate).
func CodeInterpreterTools(sbx *withruntime.Sandbox) []Tool {
	return BindCodeInterpreter(func(context.Context) (*withruntime.Sandbox, error) { return sbx, nil })
}

// BindCodeInterpreter binds runtime_run_code to the sandbox get returns
// at each call.
func BindCodeInterpreter(get SandboxFunc) []Tool {
	return bind(get, codeSpecs)
}

func runRunCode(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error) {
	ex, err := sbx.RunCode(ctx, a.str["code"], &withruntime.RunCodeOptions{TimeoutSeconds: CodeTimeoutSeconds,
		Language: codeLanguages[strings.ToLower(a.str["language"])]})
	if err != nil {
		if errors.Is(err, withruntime.ErrNotImplemented) {
			return errorResult("this sandbox has no Python kernel (it is not of the %q template); use runtime_exec to run python3 instead", withruntime.CodeInterpreterTemplate), nil
		}
		return apiResult(err, "")
	}
	res := Result{Data: ex}
	res.Text, res.Images = summarize(ex)
	return res, nil
}

// summarize is the text the model reads, and the images that go with it.
func summarize(ex *withruntime.Execution) (string, []Image) {
	var b strings.Builder
	if ex.Notice != "" && !ex.StateLost {
		fmt.Fprintf(&b, "notice: %s\n", ex.Notice)
	}
	fmt.Fprintf(&b, "execution_count: %d\n", ex.ExecutionCount)
	writeStream(&b, "stdout", ex.Stdout())
	writeStream(&b, "stderr", ex.Stderr())
	var images []Image
	for _, r := range ex.Results {
		label := "display"
		if r.IsMainResult {
			label = "result"
		}
		img, why := resultImage(r)
		switch {
		case img != nil && len(images) < MaxImages:
			images = append(images, *img)
			fmt.Fprintf(&b, "%s: image %d (%s, %dx%d) attached\n", label, len(images), img.MIMEType, img.Width, img.Height)
		case img != nil:
			fmt.Fprintf(&b, "%s: an image (%s, %dx%d) not attached: at most %d images are returned per call\n", label, img.MIMEType, img.Width, img.Height, MaxImages)
		case why != "":
			fmt.Fprintf(&b, "%s: %s\n", label, why)
		}
		if r.Chart != nil {
			b.WriteString(chartText(label, r.Chart))
		}
		if t := r.Text(); t != "" && (img == nil || r.IsMainResult) {
			c := newCapBuf(MaxResultTextBytes)
			c.Write([]byte(t))
			text, _ := c.Text(label)
			fmt.Fprintf(&b, "%s:\n%s\n", label, strings.TrimRight(text, "\n"))
		}
	}
	if e := ex.Error; e != nil {
		fmt.Fprintf(&b, "error: %s: %s\n", e.Name, e.Value)
		if tb := strings.TrimSpace(e.Traceback); tb != "" {
			c := newCapBuf(MaxOutputBytes)
			c.Write([]byte(tb))
			text, _ := c.Text("the traceback")
			fmt.Fprintf(&b, "traceback:\n%s\n", text)
		}
	}
	return strings.TrimRight(b.String(), "\n"), images
}

func writeStream(b *strings.Builder, name, s string) {
	if s == "" {
		fmt.Fprintf(b, "%s: (empty)\n", name)
		return
	}
	c := newCapBuf(MaxOutputBytes)
	c.Write([]byte(s))
	text, _ := c.Text(name)
	fmt.Fprintf(b, "%s:\n%s\n", name, strings.TrimRight(text, "\n"))
}

// resultImage decodes and checks a result's PNG or JPEG (what the sandbox
// sent may be anything): nil and why not when it is not a sound image.
func resultImage(r withruntime.Result) (*Image, string) {
	for _, mime := range []string{"image/png", "image/jpeg"} {
		s := r.String(mime)
		if s == "" {
			continue
		}
		if base64.StdEncoding.DecodedLen(len(s)) > MaxImageBytes+MaxImageBytes/8 {
			return nil, fmt.Sprintf("an image (%s) over %d bytes, not attached", mime, MaxImageBytes)
		}
		data := r.PNG()
		if mime == "image/jpeg" {
			data = r.JPEG()
		}
		if len(data) == 0 || len(data) > MaxImageBytes {
			return nil, fmt.Sprintf("an image (%s) that is not valid base64 or is over %d bytes, not attached", mime, MaxImageBytes)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || "image/"+format != mime || cfg.Width <= 0 || cfg.Height <= 0 {
			return nil, fmt.Sprintf("an image that does not decode as %s, not attached", mime)
		}
		return &Image{MIMEType: mime, Data: data, Width: cfg.Width, Height: cfg.Height}, ""
	}
	return nil, ""
}

// Provider shapes of a Result with images. A Result without images gives
// the same content as the text-only shapes (one text part).

// AnthropicBlock is a content block of an Anthropic tool_result: text, or
// an image with a base64 source.
type AnthropicBlock struct {
	Type   string                `json:"type"`
	Text   string                `json:"text,omitempty"`
	Source *AnthropicImageSource `json:"source,omitempty"`
}

// AnthropicImageSource is an image block's {"type": "base64", "media_type", "data"}.
type AnthropicImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// AnthropicToolResultBlocks is a tool_result whose content is blocks.
type AnthropicToolResultBlocks struct {
	Type      string           `json:"type"`
	ToolUseID string           `json:"tool_use_id"`
	Content   []AnthropicBlock `json:"content"`
	IsError   bool             `json:"is_error,omitempty"`
}

// AnthropicResultBlocks answers the tool_use block toolUseID with r's text
// and images.
func (r Result) AnthropicResultBlocks(toolUseID string) AnthropicToolResultBlocks {
	blocks := []AnthropicBlock{{Type: "text", Text: r.Text}}
	for _, img := range r.Images {
		blocks = append(blocks, AnthropicBlock{Type: "image", Source: &AnthropicImageSource{Type: "base64", MediaType: img.MIMEType, Data: base64.StdEncoding.EncodeToString(img.Data)}})
	}
	return AnthropicToolResultBlocks{Type: "tool_result", ToolUseID: toolUseID, Content: blocks, IsError: r.IsError}
}

// OpenAIResponsesPart is a part of a function_call_output's output list:
// {"type": "input_text", "text"} or {"type": "input_image", "image_url"}
// (a data: URL).
type OpenAIResponsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

// OpenAIResponsesOutputParts is a function_call_output whose output is a
// list of parts.
type OpenAIResponsesOutputParts struct {
	Type   string                `json:"type"`
	CallID string                `json:"call_id"`
	Output []OpenAIResponsesPart `json:"output"`
}

// OpenAIResponsesResultParts answers the Responses function call callID
// with r's text and images.
func (r Result) OpenAIResponsesResultParts(callID string) OpenAIResponsesOutputParts {
	parts := []OpenAIResponsesPart{{Type: "input_text", Text: r.Text}}
	for _, img := range r.Images {
		parts = append(parts, OpenAIResponsesPart{Type: "input_image", ImageURL: "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)})
	}
	return OpenAIResponsesOutputParts{Type: "function_call_output", CallID: callID, Output: parts}
}

// GeminiInlineData is a part {"inlineData": {"mimeType", "data"}}.
type GeminiInlineData struct {
	InlineData GeminiBlob `json:"inlineData"`
}

// GeminiBlob is inline data: a MIME type and base64 data.
type GeminiBlob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

// GeminiParts answers the functionCall of tool name (and id) with r: the
// functionResponse part, then one inlineData part per image, for the same
// content.
func (r Result) GeminiParts(name, id string) []any {
	parts := []any{r.GeminiResult(name, id)}
	for _, img := range r.Images {
		parts = append(parts, GeminiInlineData{InlineData: GeminiBlob{MIMEType: img.MIMEType, Data: base64.StdEncoding.EncodeToString(img.Data)}})
	}
	return parts
}
