module withruntime.dev/runtime/adapters/go/testserver

go 1.23
