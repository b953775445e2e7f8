package benchenv

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Meminfo returns a /proc/meminfo field (MemTotal, MemAvailable, ...) in
// bytes, 0 when absent.
func Meminfo(key string) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// ReadInt reads a file holding one integer (a sysctl, a cgroup counter);
// 0 when it cannot.
func ReadInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// ProcIndex maps every process on the host to its command line (its
// arguments joined by spaces).
func ProcIndex() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + en.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out[pid] = strings.ReplaceAll(string(b), "\x00", " ")
	}
	return out
}

// KernelRelease is the host kernel's release ("" when unknown).
func KernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// RunscVersion is the first line of `runsc --version` ("" when it fails).
func RunscVersion(runsc string) string {
	out, err := exec.Command(runsc, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// RusageSelf is this process's CPU time (user + system) in seconds.
func RusageSelf() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// GiB is b bytes in GiB.
func GiB(b int64) float64 { return float64(b) / (1 << 30) }

// MiB is b bytes in MiB.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// SleepCtx sleeps d, or until ctx ends (then returns its error).
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FanOut runs job total times on c workers and returns the wall time; once
// ctx ends no job starts, and its error is returned.
func FanOut(ctx context.Context, c, total int, job func()) (time.Duration, error) {
	next := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if ctx.Err() != nil {
					return
				}
				job()
			}
		}()
	}
	wg.Wait()
	return time.Since(start), ctx.Err()
}
