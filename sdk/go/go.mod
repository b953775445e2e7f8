module withruntime.dev/runtime/sdk/go

go 1.23
