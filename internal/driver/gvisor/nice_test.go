package gvisor

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartNiced: a command the driver starts runs at helperNice, and no
// thread of the server is left at that value (the thread that forked it
// ends with its goroutine).
func TestStartNiced(t *testing.T) {
	nicePath, err := exec.LookPath("nice")
	if err != nil {
		t.Skip("no nice(1) to report a child's nice value")
	}
	if helperNice == 0 {
		t.Skip("WITHRUNTIME_RUNSC_NICE=0")
	}
	for i := 0; i < 3; i++ {
		cmd := exec.Command(nicePath) // with no command, nice prints its own nice value
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := runNiced(cmd); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(out.String()); got != strconv.Itoa(helperNice) {
			t.Fatalf("the child ran at nice %s, want %d", got, helperNice)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		niced := nicedThreads(t)
		if len(niced) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of this process left at a raised nice value: %v", niced)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nicedThreads lists this process's threads whose nice value is not 0.
func nicedThreads(t *testing.T) []string {
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		i := bytes.LastIndexByte(b, ')')
		fields := strings.Fields(string(b[i+1:]))
		// fields[0] is field 3 (state); nice is field 19.
		if len(fields) > 16 && fields[16] != "0" {
			out = append(out, f+": nice "+fields[16])
		}
	}
	return out
}
