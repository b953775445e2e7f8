package benchenv

import (
	"context"
	"fmt"
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

// cpuTimes returns the host's busy and total CPU time, in clock ticks, from
// the first line of /proc/stat (idle and iowait count as not busy).
func cpuTimes() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// WaitQuiet waits until the host's CPU is at most busyMax (a fraction of
// all its CPUs, 0.10 for 10%) busy over two whole seconds in a row, or
// until max has passed, and returns how long it waited and the busy
// fraction of the last second. A baseline measured right after the host
// tore down hundreds of sandboxes (the kernel freeing their memory and
// namespaces for tens of seconds) would otherwise be the noisiest figure of
// a run instead of the calmest.
func WaitQuiet(ctx context.Context, busyMax float64, max time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	b0, t0, err := cpuTimes()
	if err != nil {
		return 0, 0, err
	}
	quiet, last := 0, 1.0
	for time.Since(start) < max && quiet < 2 {
		if err := SleepCtx(ctx, time.Second); err != nil {
			return time.Since(start), last, err
		}
		b1, t1, err := cpuTimes()
		if err != nil {
			return time.Since(start), last, err
		}
		if t1 > t0 {
			last = float64(b1-b0) / float64(t1-t0)
		}
		if last <= busyMax {
			quiet++
		} else {
			quiet = 0
		}
		b0, t0 = b1, t1
	}
	return time.Since(start), last, nil
}
