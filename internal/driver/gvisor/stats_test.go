package gvisor

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses cannot shift the fields.
	line := "4705 (exe) x) R 1 4705 4705 0 -1 4194560 1234 0 0 0 250 75 3 4 20 0 21 0 100 0 0\n"
	got, start, err := parseProcStat([]byte(line))
	if err != nil || got != 3.25 || start != 100 {
		t.Fatalf("parseProcStat = %v, %v, %v; want 3.25 (250 + 75 ticks), start 100", got, start, err)
	}
	for _, bad := range []string{"", "4705 exe R 1", "4705 (exe) R 1 2 3", "1 (a) R 1 1 1 0 -1 0 0 0 0 0 x 7 0 0 0 0 0 0 9",
		"4705 (exe) R 1 4705 4705 0 -1 4194560 1234 0 0 0 250 75 3 4 20 0 21 0 x"} {
		if _, _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) took it", bad)
		}
	}
}

// TestProcRefNamesOneProcess: a remembered process is read while it is
// the process that was checked, and not once its start time differs (its
// pid now names another process) or it has gone.
func TestProcRefNamesOneProcess(t *testing.T) {
	self := os.Getpid()
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	_, start, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (procRef{pid: self, start: start}).cpu(); !ok {
		t.Fatal("this process, with its own start time, was not read")
	}
	if _, ok := (procRef{pid: self, start: start + 1}).cpu(); ok {
		t.Fatal("a pid whose start time differs was read as the same process")
	}
	ps := &isoProcs{sandbox: procRef{pid: self, start: start + 1}, gofer: procRef{pid: self, start: start}}
	if _, ok := ps.cpu(); ok {
		t.Fatal("isoProcs answered although its sandbox process is another one")
	}
	ps = &isoProcs{sandbox: procRef{pid: self, start: start}, gofer: procRef{pid: self, start: start + 1}}
	if _, ok := ps.cpu(); !ok {
		t.Fatal("a gofer that is gone made isoProcs fail; it should count for nothing")
	}
	if _, ok := (procRef{pid: 1 << 30, start: start}).cpu(); ok {
		t.Fatal("a pid that does not exist was read")
	}
}

func TestInSandboxCgroup(t *testing.T) {
	const id = "sbx_abc"
	v1 := "9:name=systemd:/\n4:memory:/withruntime/sbx_abc\n2:cpu,cpuacct:/withruntime/sbx_abc\n0::/\n"
	v2 := "0::/withruntime/sbx_abc\n"
	for _, c := range []struct {
		file string
		want bool
	}{
		{v1, true},
		{v2, true},
		{"2:cpuacct:/withruntime/sbx_other\n0::/withruntime/sbx_abc\n", false}, // v1 cpuacct decides
		{"2:cpuacct:/withruntime/sbx_abcd\n", false},                           // no prefix match
		{"2:cpuacct:/\n", false},
		{"0::/withruntime/sbx_other\n", false},
		{"garbage", false},
		{"", false},
	} {
		if got := inSandboxCgroup([]byte(c.file), id); got != c.want {
			t.Errorf("inSandboxCgroup(%q) = %v, want %v", c.file, got, c.want)
		}
	}
}

func TestPlatformFlag(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, ""},
		{[]string{"--debug", "--platform=kvm"}, "kvm"},
		{[]string{"-platform", "ptrace"}, "ptrace"},
		{[]string{"--platform=systrap"}, "systrap"},
	} {
		if got := platformFlag(c.flags); got != c.want {
			t.Errorf("platformFlag(%q) = %q, want %q", c.flags, got, c.want)
		}
	}
}
