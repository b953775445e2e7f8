package main

import "regexp"

// group is a set of tasks that run one after another in one fresh sandbox
// (or host directory), as a developer's session would: its inputs are
// uploaded to /workspace/in and prep runs first, outside the timing; then
// each step is timed from the command's start to its end.
type group struct {
	name   string
	inputs []string // input names (inputs.go), each uploaded to /workspace/in/<name>
	prep   string   // shell, untimed
	steps  []step
}

// step is one timed command: a bash script run as the sandbox user in
// /workspace, whose stdout must match want (so a wrong answer fails the
// run instead of timing nothing).
type step struct {
	name   string
	script string
	want   *regexp.Regexp
}

var (
	count = regexp.MustCompile(`^[1-9][0-9]*\n$`)
	zero  = regexp.MustCompile(`^0\n$`)
	ok    = regexp.MustCompile(`^ok\n$`)
)

// groups are the tasks, in the order they run in each iteration.
var groups = []group{
	{
		name:   "files",
		inputs: []string{"tree.tar"},
		steps: []step{
			{"tar x: 10,000 files", "mkdir t && tar xf in/tree.tar -C t && echo ok", ok},
			{"find + stat: 10,000 files", "find t -type f -size +4k | wc -l", count},
			{"grep -r: 10,000 files", "grep -rl sandbox t | wc -l", count},
			{"tar c: 10,000 files", "tar cf - t | wc -c", count},
			{"rm -r: 10,000 files", "rm -r t && echo ok", ok},
		},
	},
	{
		name: "root",
		steps: []step{
			{"exec: echo (the path's floor)", "echo ok", ok},
			// What a system call costs on the path: the tasks above and
			// below are made of these.
			{"stat() x 200,000: one system call's price", `python3 -c 'import os
for _ in range(200000): os.stat("/")
print(200000)'`, count},
			{"find /usr: template root (read-only)", "find /usr | wc -l", count},
			{"find /usr again: warm caches", "find /usr | wc -l", count},
			{"read the Python stdlib: template root", "find /usr/lib/python3.11 -name '*.py' -print0 | xargs -0 cat | wc -c", count},
		},
	},
	{
		name:   "git",
		inputs: []string{"repo.tar"},
		prep:   "tar xf in/repo.tar -C in",
		steps: []step{
			{"git clone: file://, 2,200 files", "git clone -q file:///workspace/in/repo.git w && git -C w ls-files | wc -l", count},
			{"git status", "git -C w status --porcelain | wc -l", zero},
			{"git checkout: x/sys version bump", "git -C w checkout -q old && git -C w status --porcelain | wc -l", zero},
		},
	},
	{
		name:   "python",
		inputs: []string{"wheels.tar", "sdk-py.tar", "benchunit.py"},
		prep:   "tar xf in/wheels.tar -C in && tar xf in/sdk-py.tar",
		steps: []step{
			{"python3 -m venv", "python3 -m venv venv && echo ok", ok},
			{"pip install: wheelhouse (65 wheels)", "venv/bin/pip install -q --no-index --find-links in/wheels in/wheels/*.whl && venv/bin/pip list --format=freeze | wc -l", count},
			{"pytest: Python SDK unit tests", "cd repo/sdk/python && PYTHONPATH=src:/workspace/in /workspace/venv/bin/python -m pytest -q -p benchunit -p no:cacheprovider | tail -1 | grep -Eo '^[0-9]+ passed' | cut -d' ' -f1", count},
		},
	},
	{
		name:   "node",
		inputs: []string{"npm.tar", "sdk-ts.tar"},
		prep:   "tar xf in/npm.tar -C in && tar xf in/sdk-ts.tar",
		steps: []step{
			{"npm ci: TypeScript SDK lock", "cd repo/sdk/typescript && npm ci --offline --ignore-scripts --cache /workspace/in/npm-cache >/dev/null && ls node_modules | wc -l", count},
			{"tsc: TypeScript SDK", "cd repo/sdk/typescript && node_modules/.bin/tsc -p tsconfig.json && ls dist | wc -l", count},
			{"npm ci: eslint + jest + prettier lock", "cp -r in/big big && cd big && npm ci --offline --cache /workspace/in/npm-cache >/dev/null && ls node_modules | wc -l", count},
			{"eslint: the SDK's compiled JS", "cd big && node_modules/.bin/eslint --no-eslintrc --env es2022,node --parser-options ecmaVersion:2022,sourceType:module " +
				"--rule 'no-unused-vars: warn' --rule 'no-undef: warn' --rule 'eqeqeq: warn' -f compact /workspace/repo/sdk/typescript/dist | wc -l", count},
		},
	},
	{
		name:   "go",
		inputs: []string{"gomod.tar"},
		prep:   "tar xf in/gomod.tar && cd gomod && go build ./... && go vet -structtag=false ./...",
		steps: []step{
			{"go build: warm cache, one package edited", "cd gomod && printf '\\nfunc BenchEdited() int { return %d }\\n' $$ >> yaml.go && go build ./... && echo ok", ok},
			{"go vet: warm cache", "cd gomod && go vet -structtag=false ./... && echo ok", ok},
		},
	},
}

// taskEnv is every command's environment, the same on the three paths.
var taskEnv = []string{
	"PATH=/home/user/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/home/user", "USER=user", "LOGNAME=user", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1",
	// Offline: nothing may reach a registry from inside.
	"GOPROXY=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false",
}

// scriptPrefix makes a pipeline fail when any of its commands does.
const scriptPrefix = "set -eo pipefail; cd /workspace; "
