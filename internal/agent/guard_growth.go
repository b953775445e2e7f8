package agent

import (
	"fmt"
	"time"
)

// Which command the guard kills for memory.
//
// The command whose growth took the sandbox over its limit, never one that
// merely holds memory beside it: the largest command is not always the
// culprit (a modest one may have allocated long before a runaway started),
// and a sample may find the limit reached while the runaway is still
// smaller than its neighbour. So from memWatchPercent of the limit on, the
// guard notes what each command holds at its samples (growthLog), and a
// kill compares each command with what it held about memGrowthWindow
// earlier: the one that grew the most, by memMinGrowth at least, is killed.
// Only when no command grew, and what is held is over the limit (memory in
// use that nothing holds is gVisor's, on its way out), does size decide:
// after the memory has stayed over the limit for memSustain (what holds it
// then is steady, such as a command beside files in /tmp), or when the
// guard has no earlier sample to compare with (memory went from under
// memWatchPercent to the limit between two samples).
const (
	// memWatchPercent is the share of the limit from which growth is noted.
	memWatchPercent = 50
	// memGrowthWindow is how far back a kill looks for growth.
	memGrowthWindow = time.Second
	// memNoteEvery bounds how often growth is noted (a scan of /proc).
	memNoteEvery = 20 * time.Millisecond
	// memMinGrowth is the least growth that makes a command the culprit.
	memMinGrowth = 8 << 20
	// memSustain is how long the memory stays over the limit, with no
	// command growing, before the largest command is killed.
	memSustain = 2 * time.Second
	// memOverNoGrowth is the sampling interval while the memory is over
	// the limit and no command grows: nothing grows, so nothing is urgent.
	memOverNoGrowth = 50 * time.Millisecond
)

// growthSample is what each command (by unit root) held at one sample.
type growthSample struct {
	at  time.Time
	rss map[int]int64
}

// growthLog holds the samples of the last memGrowthWindow and the newest
// one older than that, oldest first.
type growthLog struct{ samples []growthSample }

func (l *growthLog) add(at time.Time, units []*unit) {
	s := growthSample{at: at, rss: make(map[int]int64, len(units))}
	for _, u := range units {
		s.rss[u.root] = u.rss
	}
	l.samples = append(l.samples, s)
	keep := 0
	for i, s := range l.samples {
		if at.Sub(s.at) >= memGrowthWindow {
			keep = i
		}
	}
	l.samples = l.samples[keep:]
}

// reference is the sample growth is measured from, if any.
func (l *growthLog) reference() (growthSample, bool) {
	if len(l.samples) == 0 {
		return growthSample{}, false
	}
	return l.samples[0], true
}

func (l *growthLog) reset() { l.samples = l.samples[:0] }

// memChoice is a command to kill for memory and why it was chosen.
type memChoice struct {
	u    *unit
	grew int64         // bytes since the reference; 0 when chosen by size
	over time.Duration // growth is over this long
	// bySize is why size chose: bySizeNone when growth did.
	bySize sizeReason
}

// sizeReason is why the largest command is killed rather than the one
// that grew.
type sizeReason int

const (
	bySizeNone      sizeReason = iota
	bySizeSustained            // over the limit for memSustain, nothing growing
	bySizeNoSample             // no earlier sample to measure growth from
)

// memoryVictim picks the command to kill for memory (see above): the one
// that grew the most since ref, or, when bySize says why, the largest.
// Either must hold minVictimBytes.
func memoryVictim(units []*unit, ref growthSample, now time.Time, bySize sizeReason) (memChoice, bool) {
	var best memChoice
	for _, u := range units {
		if u.rss < minVictimBytes {
			continue
		}
		grew := u.rss - ref.rss[u.root]
		switch {
		case bySize != bySizeNone && (best.u == nil || u.rss > best.u.rss):
			best = memChoice{u: u, bySize: bySize}
		case bySize == bySizeNone && grew >= memMinGrowth && grew > best.grew:
			best = memChoice{u: u, grew: grew, over: now.Sub(ref.at)}
		}
	}
	return best, best.u != nil
}

// memoryNote says on the command's stderr why it was killed.
func memoryNote(c memChoice, limit int64) string {
	who := fmt.Sprintf("pid %d %s: %d MiB", c.u.top.pid, c.u.top.comm, mib(c.u.top.rssPages*pageSize))
	const prefix = "withruntime: out of memory: killed this command, "
	switch c.bySize {
	case bySizeSustained:
		return fmt.Sprintf(prefix+"which held the most memory, %d MiB (%s), when the sandbox had stayed at its "+
			"memory limit of %d MiB for %v with no command growing\n", mib(c.u.rss), who, mib(limit), memSustain)
	case bySizeNoSample:
		return fmt.Sprintf(prefix+"which held the most memory, %d MiB (%s), when the sandbox reached its memory "+
			"limit of %d MiB before the agent could see which command grew\n", mib(c.u.rss), who, mib(limit))
	}
	return fmt.Sprintf(prefix+"which grew by %d MiB in %.1f s to %d MiB (%s), when the sandbox reached its "+
		"memory limit of %d MiB\n", mib(c.grew), c.over.Seconds(), mib(c.u.rss), who, mib(limit))
}

func mib(b int64) int64 { return b >> 20 }
