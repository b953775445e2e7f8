package e2b

// The builds of E2B templates this server runs or ran: in memory, for the
// SDKs to poll (a build lives as long as the server that runs it; a server
// that restarts mid-build leaves the template at its last build, and a
// poll of the lost build answers 404).

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// Bounds of the builds kept.
const (
	// maxBuildsPerKey is how many builds one key may run at once.
	maxBuildsPerKey = 2
	// waitingTTL is how long a requested build waits for its start.
	waitingTTL = time.Hour
	// finishedTTL is how long a finished build is remembered.
	finishedTTL = time.Hour
	// maxFinishedPerKey is how many finished builds of one key are kept.
	maxFinishedPerKey = 64
	// maxLogEntries caps a build's log (the oldest go first).
	maxLogEntries = 10000
	// maxLogMessage caps one log entry, in bytes.
	maxLogMessage = 8 << 10
)

// Build states, as E2B names them.
const (
	stateWaiting  = "waiting"
	stateBuilding = "building"
	stateReady    = "ready"
	stateError    = "error"
)

// logEntry is E2B's BuildLogEntry.
type logEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// buildReason is E2B's BuildStatusReason.
type buildReason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []logEntry `json:"logEntries,omitempty"`
}

// build is one build of an E2B template.
type build struct {
	id         string
	templateID string
	keyID      string
	alias      string
	created    time.Time
	// cpu and memory are the request's sizes for the template's sandboxes
	// (0: the server's defaults), recorded when the build succeeds.
	cpu, memory int64
	// tags are the tags the build gets when it succeeds.
	tags []string

	mu       sync.Mutex
	state    string
	updated  time.Time
	finished time.Time
	logs     []logEntry
	dropped  int // log entries dropped from the front
	reason   *buildReason
}

func (b *build) log(level, step, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxLogMessage {
		msg = msg[:maxLogMessage] + "…"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logs = append(b.logs, logEntry{Timestamp: time.Now().UTC(), Level: level, Message: msg, Step: step})
	if len(b.logs) > maxLogEntries {
		n := len(b.logs) - maxLogEntries
		b.logs = slices.Delete(b.logs, 0, n)
		b.dropped += n
	}
	b.updated = time.Now().UTC()
}

// finish ends the build: ready, or error with reason.
func (b *build) finish(reason *buildReason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.reason = stateReady, reason
	if reason != nil {
		b.state = stateError
	}
	b.finished = time.Now().UTC()
	b.updated = b.finished
}

// snapshot returns the build's state, the log entries from offset (the
// index of the first entry ever logged) of level or above, at most limit,
// and its reason.
func (b *build) snapshot(offset, limit int, level string) (string, []logEntry, *buildReason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := max(offset-b.dropped, 0)
	out := []logEntry{}
	for ; i < len(b.logs) && len(out) < limit; i++ {
		if levelRank[b.logs[i].Level] >= levelRank[level] {
			out = append(out, b.logs[i])
		}
	}
	return b.state, out, b.reason
}

var levelRank = map[string]int{"debug": 0, "": 0, "info": 1, "warn": 2, "error": 3}

// buildSet holds the builds.
type buildSet struct {
	mu   sync.Mutex
	byID map[string]*build
}

func newBuildSet() *buildSet { return &buildSet{byID: map[string]*build{}} }

// add makes a build of t waiting for its start, for key as, that gets
// tags when it succeeds. A waiting
// build of t that was never started is superseded; a running one makes
// this a 409; a key with maxBuildsPerKey running builds gets a 429.
func (bs *buildSet) add(as who, t store.E2BTemplate, req templateRequest, tags []string) (*build, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.gcLocked()
	running := 0
	for _, b := range bs.byID {
		b.mu.Lock()
		state := b.state
		b.mu.Unlock()
		if b.keyID != as.keyID || state != stateBuilding {
			if b.templateID == t.ID && state == stateWaiting {
				b.finish(&buildReason{Message: "superseded by a newer build of the template before it started"})
			}
			continue
		}
		running++
		if b.templateID == t.ID {
			return nil, &apiError{Status: http.StatusConflict, Code: "conflict",
				Message: fmt.Sprintf("template %q has a build in progress (%s); wait for it to end (Template.get_build_status), then build again", t.Alias, b.id)}
		}
	}
	if running >= maxBuildsPerKey {
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: "quota_exceeded",
			Message: fmt.Sprintf("this API key runs %d template builds, as many as Runtime runs at once for one key; wait for one to end", running)}
	}
	now := time.Now().UTC()
	b := &build{id: uuid(), templateID: t.ID, keyID: as.keyID, alias: t.Alias, created: now, state: stateWaiting, updated: now, tags: tags}
	if req.CPUCount != nil {
		b.cpu = *req.CPUCount
	}
	if req.MemoryMB != nil {
		b.memory = *req.MemoryMB
	}
	bs.byID[b.id] = b
	return b, nil
}

// get returns key keyID's build id of template templateID; an E2B 404
// otherwise.
func (bs *buildSet) get(keyID, templateID, id string) (*build, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.gcLocked()
	b := bs.byID[id]
	if b == nil || b.keyID != keyID || b.templateID != templateID {
		return nil, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("no build %q of template %q: builds are remembered for an hour after they end, by the server that ran them", id, templateID)}
	}
	return b, nil
}

// latest returns template templateID's newest build, or nil.
func (bs *buildSet) latest(templateID string) *build {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var last *build
	for _, b := range bs.byID {
		if b.templateID == templateID && (last == nil || b.created.After(last.created)) {
			last = b
		}
	}
	return last
}

// running returns the id of template templateID's build in progress, or "".
// runningBut reports whether a build of template templateID other than
// build except is running.
func (bs *buildSet) runningBut(templateID, except string) bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, b := range bs.byID {
		b.mu.Lock()
		building := b.state == stateBuilding
		b.mu.Unlock()
		if b.templateID == templateID && building && b.id != except {
			return true
		}
	}
	return false
}

func (bs *buildSet) running(templateID string) string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, b := range bs.byID {
		b.mu.Lock()
		building := b.state == stateBuilding
		b.mu.Unlock()
		if b.templateID == templateID && building {
			return b.id
		}
	}
	return ""
}

// lastStatus is E2B's buildStatus for a template without a successful
// build: its newest build's state, or error when none is remembered.
func (bs *buildSet) lastStatus(templateID string) string {
	if b := bs.latest(templateID); b != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.state
	}
	return stateError
}

// lastState says, for a message, where template templateID's builds are.
func (bs *buildSet) lastState(templateID string) string {
	b := bs.latest(templateID)
	if b == nil {
		return "no build of it is known to this server"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case stateError:
		return fmt.Sprintf("its last build, %s, failed: %s", b.id, b.reason.Message)
	case stateReady:
		return fmt.Sprintf("its build %s is done", b.id)
	}
	return fmt.Sprintf("its build %s is %s", b.id, b.state)
}

// history lists template t's builds this server remembers, newest first,
// with its last successful one.
func (bs *buildSet) history(t store.E2BTemplate) []e2bBuild {
	bs.mu.Lock()
	var mine []*build
	for _, b := range bs.byID {
		if b.templateID == t.ID {
			mine = append(mine, b)
		}
	}
	bs.mu.Unlock()
	slices.SortFunc(mine, func(a, b *build) int { return b.created.Compare(a.created) })
	var out []e2bBuild
	seen := false
	for _, b := range mine {
		b.mu.Lock()
		eb := e2bBuild{BuildID: b.id, Status: b.state, CreatedAt: b.created, UpdatedAt: b.updated, CPUCount: b.cpu,
			MemoryMB: b.memory, EnvdVersion: EnvdVersion}
		if !b.finished.IsZero() {
			f := b.finished
			eb.FinishedAt = &f
		}
		b.mu.Unlock()
		seen = seen || b.id == t.BuildID
		out = append(out, eb)
	}
	if t.BuildID != "" && !seen {
		out = append(out, e2bBuild{BuildID: t.BuildID, Status: stateReady, CreatedAt: t.UpdatedAt, UpdatedAt: t.UpdatedAt,
			FinishedAt: &t.UpdatedAt, CPUCount: t.CPUCount, MemoryMB: t.MemoryMiB, EnvdVersion: EnvdVersion})
	}
	return out
}

// gcLocked forgets finished builds past finishedTTL (and a key's past
// maxFinishedPerKey), and ends waiting ones past waitingTTL.
func (bs *buildSet) gcLocked() {
	now := time.Now()
	perKey := map[string][]*build{}
	for id, b := range bs.byID {
		b.mu.Lock()
		state, finished, created := b.state, b.finished, b.created
		b.mu.Unlock()
		switch {
		case state == stateWaiting && now.Sub(created) > waitingTTL:
			b.finish(&buildReason{Message: fmt.Sprintf("the build was never started (POST /v2/templates/%s/builds/%s) within %s of its request", b.templateID, b.id, waitingTTL)})
		case (state == stateReady || state == stateError) && now.Sub(finished) > finishedTTL:
			delete(bs.byID, id)
		case state == stateReady || state == stateError:
			perKey[b.keyID] = append(perKey[b.keyID], b)
		}
	}
	for _, done := range perKey {
		if len(done) <= maxFinishedPerKey {
			continue
		}
		slices.SortFunc(done, func(a, b *build) int { return a.created.Compare(b.created) })
		for _, b := range done[:len(done)-maxFinishedPerKey] {
			delete(bs.byID, b.id)
		}
	}
}

// uuid is a random (version 4) UUID, as E2B's build ids are.
func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
