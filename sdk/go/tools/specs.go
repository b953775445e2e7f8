package tools

import (
	"context"
	"fmt"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// spec is one tool: its declaration, its arguments and its function.
type spec struct {
	name        string
	description string
	schema      string
	example     string
	fields      []field
	// check, if set, refuses argument values before any sandbox is used.
	check func(a args) string
	run   func(ctx context.Context, sbx *withruntime.Sandbox, a args) (Result, error)
}

var specs = []spec{
	{
		name: ExecName,
		description: fmt.Sprintf("Run a shell command in the sandbox, an isolated Linux machine (Debian, with bash, python3 and coreutils) whose files persist between calls. "+
			"The command runs with `bash -c` as an unprivileged user in the directory cwd (default /workspace; relative paths resolve under /workspace). "+
			"Each call is a new shell: `cd` and exported variables do not carry over to the next call, files do. Standard input is empty, so a command waiting for input gets end-of-file. "+
			"Returns the exit code, stdout and stderr. A returned call is not a successful command: check exit_code (0 is success) and read stderr. "+
			"Each of stdout and stderr is capped at %d bytes: the beginning and the end are kept and a marker says how many bytes were cut from the middle, so send large output to a file and inspect it with grep, head or tail. "+
			"The command is killed after timeoutSeconds (0 means %d; at most %d) and then reports exit code %d.",
			MaxOutputBytes, DefaultTimeoutSeconds, MaxTimeoutSeconds, withruntime.TimeoutExitCode),
		schema: `{
  "type": "object",
  "properties": {
    "command": {
      "type": "string",
      "description": "The shell command line to run with bash -c, such as \"python3 hello.py\" or \"ls -la && python3 main.py\"."
    },
    "cwd": {
      "type": "string",
      "description": "Working directory: absolute, or relative to /workspace. Use \"\" for /workspace."
    },
    "timeoutSeconds": {
      "type": "integer",
      "description": "Kill the command after this many seconds (it then reports exit code 124). Use 0 for the default of 120; at most 1800."
    }
  },
  "required": ["command", "cwd", "timeoutSeconds"],
  "additionalProperties": false
}`,
		example: `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`,
		fields: []field{
			{name: "command", essential: true, max: MaxCommandBytes},
			{name: "cwd", max: MaxPathBytes},
			{name: "timeoutSeconds", integer: true},
		},
		check: checkExec,
		run:   runExec,
	},
	{
		name: ReadFileName,
		description: fmt.Sprintf("Read a file in the sandbox. path is absolute, or relative to /workspace. "+
			"Returns a first line with the file's absolute path, size in bytes and encoding, then its content. "+
			"Text over %d bytes is cut in the middle: the beginning and the end are kept and a marker says how many bytes were cut; read other parts with runtime_exec (for example `sed -n '200,300p' FILE` or `grep -n PATTERN FILE`). "+
			"A file that is not UTF-8 text is returned base64-encoded (the first line then says encoding: base64), at most its first %d bytes. "+
			"To list a directory use runtime_list_files.", MaxReadBytes, MaxReadBinaryBytes),
		schema: `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "The file to read: absolute, or relative to /workspace, such as \"hello.py\" or \"/etc/os-release\"."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`,
		example: `{"path": "hello.py"}`,
		fields:  []field{{name: "path", essential: true, max: MaxPathBytes}},
		check:   checkRead,
		run:     runReadFile,
	},
	{
		name: WriteFileName,
		description: fmt.Sprintf("Create or overwrite a file in the sandbox with the given text (UTF-8). path is absolute, or relative to /workspace; missing parent directories are created. "+
			"The whole file is replaced: to change part of a file, read it and write it back whole. "+
			"Returns the file's absolute path and the number of bytes written. content is at most %d bytes.", MaxContentBytes),
		schema: `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "The file to write: absolute, or relative to /workspace, such as \"hello.py\"."
    },
    "content": {
      "type": "string",
      "description": "The file's whole new content, as text."
    }
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`,
		example: `{"path": "hello.py", "content": "print(6 * 7)\n"}`,
		fields: []field{
			{name: "path", essential: true, max: MaxPathBytes},
			{name: "content", essential: true, max: MaxContentBytes},
		},
		check: checkWrite,
		run:   runWriteFile,
	},
	{
		name: ListFilesName,
		description: fmt.Sprintf("List a directory in the sandbox: one line per entry with its type (file, dir, symlink), size in bytes and name; directory names end with /. "+
			"path is absolute, or relative to /workspace; \"\" means /workspace. At most %d entries are shown. "+
			"To list recursively or search, use runtime_exec (for example `find . -name '*.py'`).", MaxListEntries),
		schema: `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "The directory to list: absolute, or relative to /workspace. Use \"\" for /workspace."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`,
		example: `{"path": ""}`,
		fields:  []field{{name: "path", max: MaxPathBytes}},
		run:     runListFiles,
	},
}
