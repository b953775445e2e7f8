package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// ExecOutput is the Data of a runtime_exec Result.
type ExecOutput struct {
	// ExitCode is the command's exit status (124 when its timeout killed
	// it, 128+N when signal N did).
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr are the output as shown to the model: at most
	// MaxOutputBytes each plus a marker where the middle was cut.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// StdoutCutBytes and StderrCutBytes count the bytes cut (0: none).
	StdoutCutBytes int64 `json:"stdoutCutBytes"`
	StderrCutBytes int64 `json:"stderrCutBytes"`
	// TimedOut says the timeout killed the command; OOMKilled that the
	// sandbox ran out of memory.
	TimedOut  bool   `json:"timedOut"`
	OOMKilled bool   `json:"oomKilled"`
	Signal    string `json:"signal,omitempty"`
	// Cwd is the absolute working directory the command ran in.
	Cwd        string `json:"cwd"`
	DurationMs int64  `json:"durationMs"`
}

// ReadOutput is the Data of a runtime_read_file Result.
type ReadOutput struct {
	// Path is the absolute path read.
	Path string `json:"path"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Encoding is "utf-8" (Content is the text) or "base64" (Content is
	// the bytes, base64-encoded: the file is not UTF-8 text).
	Encoding string `json:"encoding"`
	// Content is what the model was shown, markers included.
	Content string `json:"content"`
	// CutBytes counts the bytes of the file not shown (0: all shown).
	CutBytes int64 `json:"cutBytes"`
}

// WriteOutput is the Data of a runtime_write_file Result.
type WriteOutput struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// ListOutput is the Data of a runtime_list_files Result.
type ListOutput struct {
	Path string `json:"path"`
	// Entries is the first MaxListEntries entries at most, by name.
	Entries []withruntime.FileInfo `json:"entries"`
	// Total is how many entries the directory holds in all.
	Total int `json:"total"`
	// Truncated says there were more than MaxListEntries entries.
	Truncated bool `json:"truncated"`
}

// resolve makes p absolute: relative paths are under /workspace. ".." is
// resolved inside the sandbox's own filesystem, like any path there.
func resolve(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(withruntime.Workspace, p)
	}
	return path.Clean(p)
}

// checkExec, checkRead and checkWrite refuse values the schema allows but
// the tools do not, before any sandbox is involved.
func checkExec(a args) string {
	if strings.TrimSpace(a.str["command"]) == "" {
		return `"command" is empty; give a shell command line such as "ls -la"`
	}
	if t := a.num["timeoutSeconds"]; t < 0 || t > MaxTimeoutSeconds {
		return fmt.Sprintf(`"timeoutSeconds" is %d; give 0 for the default of %d seconds, or up to %d`, t, DefaultTimeoutSeconds, MaxTimeoutSeconds)
	}
	return ""
}

func checkRead(a args) string {
	if a.str["path"] == "" {
		return `"path" is empty; give the file to read, such as "hello.py"`
	}
	return ""
}

func checkWrite(a args) string {
	if a.str["path"] == "" {
		return `"path" is empty; give the file to write, such as "hello.py"`
	}
	if p := resolve(a.str["path"]); p == "/" || p == withruntime.Workspace {
		return fmt.Sprintf("%s is a directory; give a file path such as %s", p, path.Join(p, "main.py"))
	}
	return ""
}

func runExec(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error) {
	command := a.str["command"]
	timeout := a.num["timeoutSeconds"]
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	cwd := withruntime.Workspace
	if c := a.str["cwd"]; c != "" {
		cwd = resolve(c)
	}
	req := withruntime.ExecRequest{Command: command, Cwd: cwd, TimeoutSeconds: float64(timeout)}
	stdout, stderr := newCapBuf(MaxOutputBytes), newCapBuf(MaxOutputBytes)
	var res *withruntime.ExecResult
	for ev, err := range sbx.ExecStream(ctx, req) {
		if err != nil {
			var ae *withruntime.APIError
			if errors.As(err, &ae) && ae.Status == 400 { // such as a cwd that does not exist
				return errorResult("%s", ae.Message), nil
			}
			return sandboxErrorResult(err), err
		}
		switch ev.Type {
		case "stdout":
			stdout.Write([]byte(ev.Data))
		case "stderr":
			stderr.Write([]byte(ev.Data))
		case "exit":
			res = ev.Result
		}
	}
	if res == nil {
		err := fmt.Errorf("tools: exec stream ended without a result")
		return sandboxErrorResult(err), err
	}
	out := &ExecOutput{ExitCode: res.ExitCode, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		Signal: res.Signal, Cwd: cwd, DurationMs: res.DurationMs}
	out.Stdout, out.StdoutCutBytes = stdout.Text("stdout")
	out.Stderr, out.StderrCutBytes = stderr.Text("stderr")

	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d\n", res.ExitCode)
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "note: the command was killed by its timeout after %d seconds; give a larger timeoutSeconds (up to %d) or run it in the background\n", timeout, MaxTimeoutSeconds)
	case res.OOMKilled:
		b.WriteString("note: the command was killed because the sandbox ran out of memory\n")
	case res.ProcessLimitKilled:
		b.WriteString("note: the command was killed because it kept the sandbox at its process limit (too many processes)\n")
	case res.Signal != "":
		fmt.Fprintf(&b, "note: the command was killed by %s\n", res.Signal)
	}
	section(&b, "stdout", out.Stdout)
	section(&b, "stderr", out.Stderr)
	return Result{Text: strings.TrimSuffix(b.String(), "\n"), Data: out}, nil
}

func section(b *strings.Builder, name, text string) {
	if text == "" {
		fmt.Fprintf(b, "%s: (empty)\n", name)
		return
	}
	fmt.Fprintf(b, "%s:\n%s", name, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
}

func runReadFile(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error) {
	p := resolve(a.str["path"])
	files := sbx.Files()
	fi, err := files.Stat(ctx, p)
	if err != nil {
		return apiResult(err, "runtime_list_files shows a directory's contents")
	}
	if fi.Type == "dir" {
		return errorResult("%s is a directory; list it with runtime_list_files", p), nil
	}
	rc, err := files.Open(ctx, p)
	if err != nil {
		return apiResult(err, "")
	}
	defer rc.Close()
	buf := newCapBuf(MaxReadBytes)
	scan := int64(MaxReadScanBytes)
	if fi.Size > scan {
		scan = MaxReadBytes // a huge file: its head only
	}
	n, err := io.Copy(buf, io.LimitReader(rc, scan))
	if err != nil {
		return apiResult(fmt.Errorf("tools: reading %s: %w", p, err), "")
	}
	size := max(fi.Size, n)
	head, tail, cut := buf.Parts()
	out := &ReadOutput{Path: p, Size: size, Encoding: "utf-8"}
	if isText(head) && isText(tail) {
		out.Content = string(head)
		if cut > 0 {
			out.Content += marker(cut, n, "the file") + string(tail)
		}
		if n < size { // only the head of a huge file was read
			out.Content += fmt.Sprintf("\n[... only the first %d of %d bytes are shown; read other parts with runtime_exec, e.g. tail -c 4000 %s ...]\n", n, size, p)
		}
		out.CutBytes = size - int64(len(head)) - int64(len(tail))
		return Result{Text: fmt.Sprintf("%s (%d bytes, encoding: utf-8)\n%s", p, size, out.Content), Data: out}, nil
	}
	raw := buf.prefix(MaxReadBinaryBytes)
	out.Encoding = "base64"
	out.Content = base64.StdEncoding.EncodeToString(raw)
	out.CutBytes = size - int64(len(raw))
	text := fmt.Sprintf("%s (%d bytes, encoding: base64; the file is not UTF-8 text, so its bytes are shown base64-encoded)\n%s", p, size, out.Content)
	if out.CutBytes > 0 {
		text += fmt.Sprintf("\n[... only the first %d of %d bytes are shown; inspect the rest with runtime_exec, e.g. xxd -s %d -l 256 %s ...]", len(raw), size, len(raw), p)
	}
	return Result{Text: text, Data: out}, nil
}

// isText says b is UTF-8 text: valid UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

func runWriteFile(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error) {
	p := resolve(a.str["path"])
	content := a.str["content"]
	fi, err := sbx.Files().WriteFile(ctx, p, []byte(content))
	if err != nil {
		return apiResult(err, "")
	}
	return Result{Text: fmt.Sprintf("wrote %d bytes to %s", fi.Size, fi.Path),
		Data: &WriteOutput{Path: fi.Path, Bytes: fi.Size}}, nil
}

func runListFiles(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error) {
	p := withruntime.Workspace
	if a.str["path"] != "" {
		p = resolve(a.str["path"])
	}
	// One page of MaxListEntries: the server counts the rest (Total), so a
	// directory of any size is answered at once.
	page, err := sbx.Files().ListPage(ctx, p, withruntime.ListOptions{Depth: 1, Limit: MaxListEntries})
	if err != nil {
		return apiResult(err, "")
	}
	entries := page.Entries
	if len(entries) > MaxListEntries {
		entries = entries[:MaxListEntries]
	}
	// Total is the server's count (a server without one: what was seen).
	total := len(entries)
	if page.Total != nil && *page.Total > total {
		total = *page.Total
	}
	out := &ListOutput{Path: p, Entries: entries, Total: total, Truncated: page.Truncated || total > len(entries)}
	var b strings.Builder
	switch {
	case out.Truncated && total == len(entries):
		fmt.Fprintf(&b, "%s: more than %d entries", p, total)
	case total == 0:
		fmt.Fprintf(&b, "%s: empty directory", p)
	case total == 1:
		fmt.Fprintf(&b, "%s: 1 entry", p)
	default:
		fmt.Fprintf(&b, "%s: %d entries", p, total)
	}
	if out.Truncated {
		fmt.Fprintf(&b, "; the first %d (by name) are shown", len(entries))
	}
	for _, e := range out.Entries {
		name, size := e.Name, fmt.Sprint(e.Size)
		switch e.Type {
		case "dir":
			name, size = name+"/", "-"
		case "symlink":
			name += " -> " + e.Target
		}
		fmt.Fprintf(&b, "\n%-7s %10s  %s", e.Type, size, name)
	}
	if out.Truncated {
		more := "more entries"
		if total > len(entries) {
			more = fmt.Sprintf("%d more entries", total-len(entries))
		}
		fmt.Fprintf(&b, "\n[... %s not shown; use runtime_exec with ls or find to see them ...]", more)
	}
	return Result{Text: b.String(), Data: out}, nil
}
