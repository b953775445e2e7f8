module withruntime.dev/runtime/examples

go 1.23

require withruntime.dev/runtime/sdk/go v0.0.0

replace withruntime.dev/runtime/sdk/go => ../sdk/go
