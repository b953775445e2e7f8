#!/usr/bin/env bash
# Regenerates the Go code of the envd protocol from proto/ (the generated
# files are committed). Needs protoc (Debian: protobuf-compiler) and, on PATH:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
set -euo pipefail
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc -I proto \
  --go_out=. --go_opt=module=withruntime.dev/runtime/internal/compat/e2b \
  --connect-go_out=. --connect-go_opt=module=withruntime.dev/runtime/internal/compat/e2b \
  proto/process/process.proto proto/filesystem/filesystem.proto
