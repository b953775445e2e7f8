package wire

// This file: the wire types of terminals (issue 27). The package's own
// documentation is in its doc file (issue 29).

// Terminals (interactive processes). A background process started with
// "pty" (POST /v1/sandboxes/{id}/processes {"command": ..., "pty": {"cols":
// 80, "rows": 24}}) runs on a pseudo-terminal inside the sandbox: it is the
// leader of a session of its own with the terminal as its controlling tty,
// its stdin, stdout and stderr are the terminal, and TERM is
// "xterm-256color" unless the request or the sandbox sets it. Its I/O is the
// WebSocket GET /v1/sandboxes/{id}/processes/{pid}/terminal:
//
//   - binary messages from the client are input, written to the terminal
//     byte for byte (at most MaxTerminalMessageBytes each);
//   - binary messages from the server are output, byte for byte as the
//     program wrote them (never re-encoded: a UTF-8 character may be split
//     across two messages), at most MaxTerminalMessageBytes each;
//   - text messages are JSON: TerminalControl from the client,
//     TerminalEvent from the server.
//
// On connecting, a client first gets the process's recent output (the last
// TerminalReplayBytes at most), then live output. The last message is a
// TerminalEvent of type "exit", after which the server closes the WebSocket
// with status 1000 (normal closure).

// PtySize is a terminal's size in character cells.
type PtySize struct {
	// Cols is the width in columns, 1 to MaxPtyCols.
	Cols int `json:"cols"`
	// Rows is the height in rows, 1 to MaxPtyRows.
	Rows int `json:"rows"`
}

// Bounds of a terminal.
const (
	// MaxPtyCols is the widest terminal a request may ask for (columns).
	MaxPtyCols = 1000
	// MaxPtyRows is the tallest terminal a request may ask for (rows).
	MaxPtyRows = 1000
	// TerminalReplayBytes is how much of a terminal's recent output the
	// sandbox keeps for a client that connects later (1 MiB, the same
	// bound as a background process's replay). It is also how far a slow
	// client may fall behind before the oldest output it has not read is
	// dropped for it (TerminalEvent "dropped"); the program never waits for
	// a client.
	TerminalReplayBytes = 1 << 20
	// MaxTerminalMessageBytes caps one message from the client, binary or
	// text (64 KiB); a larger one closes the WebSocket with status 1009.
	// Send longer input in several messages.
	MaxTerminalMessageBytes = 64 << 10
	// MaxTerminalViewers is how many WebSockets may be open on one
	// terminal at once; one more is refused with 429 rate_limited.
	MaxTerminalViewers = 16
)

// DefaultTerm is the TERM a terminal process gets unless its request's env
// or the sandbox's sets one.
const DefaultTerm = "xterm-256color"

// TerminalControl types (client to server).
const (
	// ControlResize sets the terminal's size to Cols x Rows; the program
	// gets SIGWINCH. The last resize wins when several clients send one.
	ControlResize = "resize"
	// ControlSignal sends Signal to every process the command started (as
	// POST /v1/sandboxes/{id}/processes/{pid}/kill does). To interrupt only
	// the program in the foreground, as a person does, send the byte 0x03
	// (Ctrl-C) as input instead: the terminal turns it into SIGINT for its
	// foreground process group.
	ControlSignal = "signal"
)

// TerminalControl is a text message a client sends on a terminal
// WebSocket: {"type": "resize", "cols": 120, "rows": 40} or {"type":
// "signal", "signal": "SIGTERM"}. A message the server cannot accept (an
// unknown type or field, a size out of range, an unknown signal) is
// answered with a TerminalEvent of type "error" and otherwise ignored.
type TerminalControl struct {
	// Type is "resize" (ControlResize) or "signal" (ControlSignal).
	Type string `json:"type"`
	// Cols and Rows are the new size (resize): 1 to MaxPtyCols and 1 to
	// MaxPtyRows.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Signal names the signal (signal): "SIGINT", "SIGTERM", "SIGKILL",
	// "SIGHUP", ... ("INT" and numbers are accepted too).
	Signal string `json:"signal,omitempty"`
}

// TerminalEvent types (server to client).
const (
	// EventExit ends the stream: the process ended (ExitCode, Signal and
	// the flags say how). Sent also to a client that connects after the
	// end, after the replay.
	EventExit = "exit"
	// EventDropped says this client fell more than TerminalReplayBytes
	// behind and missed output: Dropped is the total it has missed since it
	// connected, in bytes. The program was never slowed down.
	EventDropped = "dropped"
	// EventError answers a TerminalControl the server could not accept;
	// Message says why. The stream goes on.
	EventError = "error"
)

// TerminalEvent is a text message the server sends on a terminal
// WebSocket.
type TerminalEvent struct {
	// Type is "exit" (EventExit), "dropped" (EventDropped) or "error"
	// (EventError).
	Type string `json:"type"`
	// ExitCode is the process's exit status (exit): 128+N when a signal N
	// ended it, 124 when its timeout did, 137 when it was killed for the
	// sandbox's memory or process limit.
	ExitCode *int `json:"exitCode,omitempty"`
	// Signal names the signal that ended it, if any (exit).
	Signal string `json:"signal,omitempty"`
	// TimedOut, OOMKilled and ProcessLimitKilled say the process's timeout,
	// or the sandbox's memory or process limit, ended it (exit).
	TimedOut           bool `json:"timedOut,omitempty"`
	OOMKilled          bool `json:"oomKilled,omitempty"`
	ProcessLimitKilled bool `json:"processLimitKilled,omitempty"`
	// Dropped is how many bytes of output this client has missed since it
	// connected (dropped).
	Dropped int64 `json:"dropped,omitempty"`
	// Message says what was wrong (error).
	Message string `json:"message,omitempty"`
}
