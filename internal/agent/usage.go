package agent

import (
	"net/http"
	"os"
	"syscall"

	"withruntime.dev/runtime/internal/agentapi"
)

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ: 100 on Linux
// and in gVisor).
const userHZ = 100

// handleUsage answers GET /usage: the CPU time of the agent and of its
// descendants.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.Usage{CPUSeconds: ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())})
	return nil
}

// ownCPUSeconds is the user and system time of this process and of the
// children it reaped (a reaped process's time includes what it had reaped).
func ownCPUSeconds() float64 {
	var total float64
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		}
	}
	return total
}

// descendantsCPUSeconds is the CPU time of self's live descendants in
// procs: each one's own and its reaped children's. A process that exits
// moves from this sum to its parent's reaped time, so nothing is counted
// twice (up to a sample racing an exit). In gVisor /proc holds only the
// sandbox's processes; elsewhere (a test node running pods as host
// processes) the parent links pick self's descendants out.
func descendantsCPUSeconds(procs []procEntry, self int) float64 {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.pid] = p.ppid
	}
	var ticks int64
	for _, p := range procs {
		if p.pid == self {
			continue
		}
		// Up to self (a descendant) or to something else; the bound stops
		// a loop of parent links read while pids were reused.
		for up, n := p.ppid, 0; n < 256; n++ {
			if up == self {
				ticks += p.cpuTicks + p.childTicks
				break
			}
			next, ok := parent[up]
			if !ok || next == up {
				break
			}
			up = next
		}
	}
	return float64(ticks) / userHZ
}
