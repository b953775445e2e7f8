package api

import (
	"bytes"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Events come from the agent, inside the sandbox: only the kinds it sends,
// with only their fields, reach the client.
func TestAgentEvent(t *testing.T) {
	for _, bad := range []string{
		`{"type":"exit"}`, // no exit code
		`{"type":"hello"}`,
		`{"type":"exit","exitCode":1,"extra":true}`,
		`not json`,
		`{"type":"error","message":"` + strings.Repeat("x", maxTerminalEventBytes) + `"}`,
	} {
		if ev, err := agentEvent([]byte(bad)); err == nil {
			t.Errorf("agentEvent(%.40q) = %+v, want an error", bad, ev)
		}
	}
	ev, err := agentEvent([]byte(`{"type":"dropped","dropped":5,"message":"smuggled"}`))
	if err != nil || ev.Message != "" || ev.Dropped != 5 {
		t.Errorf("dropped event: %+v %v", ev, err)
	}
	ev, err = agentEvent([]byte(`{"type":"exit","exitCode":3,"dropped":9}`))
	if err != nil || *ev.ExitCode != 3 || ev.Dropped != 0 {
		t.Errorf("exit event: %+v %v", ev, err)
	}
}

func TestCheckControl(t *testing.T) {
	for _, bad := range []string{
		`{"type":"resize","cols":0,"rows":5}`,
		`{"type":"resize","cols":5,"rows":1001}`,
		`{"type":"resize","cols":5,"rows":5,"signal":"INT"}`,
		`{"type":"signal"}`,
		`{"type":"signal","signal":"INT","cols":1}`,
		`{"type":"signal","signal":"a\u0000b"}`,
		`{"type":"paste"}`,
		`{"type":"resize","cols":5,"rows":5,"x":1}`,
		`[]`,
		``,
	} {
		if c, err := checkControl([]byte(bad)); err == nil {
			t.Errorf("checkControl(%q) = %+v, want an error", bad, c)
		}
	}
	c, err := checkControl([]byte(`{"type":"resize","cols":120,"rows":40}`))
	if err != nil || c != (wire.TerminalControl{Type: "resize", Cols: 120, Rows: 40}) {
		t.Errorf("resize: %+v %v", c, err)
	}
}

// A frame's declared length is checked before anything is read into it.
func TestTerminalFrameCap(t *testing.T) {
	buf := make([]byte, agentapi.MaxTerminalFrameBytes)
	huge := []byte{agentapi.TerminalOutput, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := agentapi.ReadTerminalFrame(bytes.NewReader(huge), buf); err == nil {
		t.Fatal("a frame declaring 4 GiB was read")
	}
	var w bytes.Buffer
	if err := agentapi.WriteTerminalFrame(&w, agentapi.TerminalOutput, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	kind, p, err := agentapi.ReadTerminalFrame(&w, buf)
	if err != nil || kind != agentapi.TerminalOutput || string(p) != "hi" {
		t.Fatalf("round trip: %q %q %v", kind, p, err)
	}
}
