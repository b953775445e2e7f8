module withruntime.dev/runtime/adapters/go/openai

go 1.26.0

require (
	github.com/openai/openai-go/v3 v3.99.0
	withruntime.dev/runtime/adapters/go/testserver v0.0.0
	withruntime.dev/runtime/sdk/go v0.0.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
)

replace withruntime.dev/runtime/sdk/go => ../../../sdk/go

replace withruntime.dev/runtime/adapters/go/testserver => ../testserver
