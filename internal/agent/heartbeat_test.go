package agent

import (
	"strconv"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// TestStreamHeartbeats: a command that prints nothing for 7 s streams a
// heartbeat line at least every 1.5 × HeartbeatSeconds, each with no field
// but its type, and none once output flows or after the exit event.
func TestStreamHeartbeats(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	evs := a.streamAll("POST", "/exec", agentapi.ExecRequest{Command: "sleep 7; echo done"})
	if len(evs) < 3 || evs[0].Type != "start" || evs[len(evs)-1].Type != "exit" {
		t.Fatalf("events %+v", evs)
	}
	beats := 0
	prev := time.Duration(0)
	for _, ev := range evs {
		if gap := ev.at - prev; gap > agentapi.HeartbeatInterval*3/2+500*time.Millisecond {
			t.Errorf("%s without a line before %+v", gap, ev.Event)
		}
		prev = ev.at
		if ev.Type == agentapi.EventHeartbeat {
			beats++
			if ev.Pid != 0 || ev.Data != "" || ev.Result != nil || ev.Error != nil {
				t.Errorf("heartbeat with fields: %+v", ev.Event)
			}
		}
	}
	if beats < 2 {
		t.Errorf("%d heartbeats in 7 quiet seconds", beats)
	}
	if got := joined(evs, "stdout"); got != "done\n" {
		t.Errorf("stdout %q", got)
	}
}

// TestWaitStreamHeartbeats: a background process's wait stream has them
// too.
func TestWaitStreamHeartbeats(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	var p agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Command: "sleep 5"}, 201, &p)
	evs := a.streamAll("POST", "/processes/"+strconv.Itoa(p.Pid)+"/wait", nil)
	beats := 0
	for _, ev := range evs {
		if ev.Type == agentapi.EventHeartbeat {
			beats++
		}
	}
	if beats < 1 || evs[len(evs)-1].Type != "exit" {
		t.Errorf("%d heartbeats; events %+v", beats, evs)
	}
}
