package itest

// The code interpreter's other languages (internal/agent/languages.go):
// Bash (bash_kernel), JavaScript and TypeScript (Deno's kernel), R
// (IRkernel), Java (our JShell kernel), each in real kernels in sandboxes of the code-interpreter
// template: state kept between calls, output, errors with their name,
// value and traceback, a timeout that interrupts and keeps the context,
// an interrupt when the client goes away, and the same walls as Python.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// langCase is one language's cells for TestCodeLanguages.
type langCase struct {
	lang      string
	set       string // binds x to 41
	get       string // x + 1: 42 as the main result or stdout
	want      string // what get gives (main result text, or stdout)
	viaStdout bool
	// viaDisplay: the value comes back as display data, not as the main
	// result (IRkernel shows a value as display_data, as in a notebook).
	viaDisplay bool
	print      string // prints "hello" on stdout
	raise      string // fails with errName / errValue
	errName    string
	errValue   string
	errTrace   string // in the traceback ("": none expected)
	loop       string // runs forever (until interrupted)
	env        string // prints $WR_LANG_ENV (on stdout or as the result)
}

var langCases = []langCase{
	{lang: "bash", set: "x=41", get: "echo $((x+1))", want: "42\n", viaStdout: true,
		print: "echo hello", raise: "ls /nonexistent-dir", errName: "ExitCode", errValue: "2",
		loop: "while true; do :; done", env: "echo \"$WR_LANG_ENV\""},
	{lang: "javascript", set: "var x = 41", get: "x + 1", want: "42",
		print: "console.log('hello')", raise: "throw new TypeError('boom')", errName: "TypeError", errValue: "boom", errTrace: "TypeError: boom",
		loop: "while (true) {}", env: "Deno.env.get('WR_LANG_ENV')"},
	{lang: "typescript", set: "const x: number = 41", get: "const y: number = x + 1; y", want: "42",
		print: "console.log('hello' as string)", raise: "throw new RangeError('boom')", errName: "RangeError", errValue: "boom", errTrace: "RangeError: boom",
		loop: "while (true) {}", env: "Deno.env.get('WR_LANG_ENV')"},
	{lang: "r", set: "x <- 41", get: "x + 1", want: "[1] 42", viaDisplay: true,
		print: "cat('hello\\n')", raise: "stop('boom')", errName: "ERROR", errValue: "boom",
		loop: "repeat {}", env: "Sys.getenv('WR_LANG_ENV')"},
	// A cell's env is a system property in Java (as in E2B's kernel).
	{lang: "java", set: "int x = 41;", get: "x + 1", want: "42",
		print: `System.out.println("hello")`, raise: "void f() { throw new IllegalStateException(\"boom\"); }\nf();",
		errName: "java.lang.IllegalStateException", errValue: "boom", errTrace: "IllegalStateException: boom\n\tat f(",
		loop: "while (true) {}", env: `System.getProperty("WR_LANG_ENV")`},
}

func TestCodeLanguages(t *testing.T) {
	e := newEnv(t)
	// Six kernels at once: Python's (warm, numpy/pandas/matplotlib
	// imported), Bash's, two Deno kernels (about 190 MiB each at start),
	// R's and Java's do not fit in the default 512 MiB.
	sb := e.ciSandbox(api.CreateSandboxRequest{MemoryMiB: 2048})
	id := sb.ID
	defer func() {
		res := e.exec(id, agentapi.ExecRequest{Command: "ps -eo rss,etime,args --sort=-rss | head -12"})
		t.Logf("kernels' memory (RSS KiB):\n%s", res.Stdout)
	}()
	for _, lc := range langCases {
		t.Run(lc.lang, func(t *testing.T) {
			run := func(code string, timeout float64) agentapi.Execution {
				t.Helper()
				start := time.Now()
				ex := e.code(id, agentapi.RunCodeRequest{Code: code, Language: lc.lang, TimeoutSeconds: timeout})
				t.Logf("%s: %q in %v", lc.lang, code, time.Since(start).Round(time.Millisecond))
				return ex
			}
			got := func(ex agentapi.Execution) string {
				if lc.viaStdout {
					return stdoutOf(ex)
				}
				if lc.viaDisplay {
					for _, r := range ex.Results {
						var s string
						if json.Unmarshal(r.Data["text/plain"], &s) == nil {
							return s
						}
					}
					return ""
				}
				return mainText(t, ex)
			}
			start := time.Now()
			ex := run(lc.set, 0)
			t.Logf("%s: first cell (kernel start) %v", lc.lang, time.Since(start))
			if ex.Error != nil || ex.ContextID != "default-"+lc.lang {
				t.Fatalf("set: %+v (error %+v)", ex, ex.Error)
			}
			if ex = run(lc.get, 0); got(ex) != lc.want || ex.Error != nil {
				t.Fatalf("state: got %q, want %q: %+v", got(ex), lc.want, ex)
			}
			if ex = run(lc.print, 0); !strings.Contains(stdoutOf(ex), "hello") {
				t.Fatalf("print: stdout %q", ex.Logs.Stdout)
			}
			ex = run(lc.raise, 0)
			if ex.Error == nil || ex.Error.Name != lc.errName || !strings.Contains(ex.Error.Value, lc.errValue) ||
				!strings.Contains(ex.Error.Traceback, lc.errTrace) || ex.StateLost {
				t.Fatalf("raise: %+v", ex.Error)
			}
			// A timeout interrupts the cell and keeps the context.
			ex = run(lc.loop, 2)
			if !ex.TimedOut || ex.Error == nil || ex.Error.Name != "TimeoutError" || ex.StateLost {
				t.Fatalf("timeout: timedOut %v stateLost %v error %+v", ex.TimedOut, ex.StateLost, ex.Error)
			}
			if ex = run(lc.get, 0); got(ex) != lc.want {
				t.Fatalf("after the timeout: got %q, want %q: %+v", got(ex), lc.want, ex)
			}
			// A client that goes away interrupts its cell; the context
			// keeps its state.
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			body, _ := json.Marshal(agentapi.RunCodeRequest{Code: lc.loop, Language: lc.lang})
			req, _ := http.NewRequestWithContext(ctx, "POST", e.http.URL+"/v1/sandboxes/"+id+"/code", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+e.key)
			req.Header.Set("Accept", "application/x-ndjson")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			cancel()
			if ex = run(lc.get, 0); got(ex) != lc.want || ex.Restarted {
				t.Fatalf("after an interrupt: got %q, want %q (restarted %v): %+v", got(ex), lc.want, ex.Restarted, ex)
			}
			// A call's env is set for that call only.
			ex = e.code(id, agentapi.RunCodeRequest{Code: lc.env, Language: lc.lang, Env: map[string]string{"WR_LANG_ENV": "it's \"set\""}})
			if s := stdoutOf(ex) + mainText(t, ex) + string(resultsJSON(ex)); !strings.Contains(s, `it's`) {
				t.Fatalf("env: %q %+v", s, ex)
			}
			ex = run(lc.env, 0)
			if s := stdoutOf(ex) + mainText(t, ex) + string(resultsJSON(ex)); strings.Contains(s, "set") {
				t.Fatalf("env after its call: %q", s)
			}
			var c agentapi.Context
			e.must(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/contexts/default-"+lc.lang, nil, &c)
			if c.Language != lc.lang || c.Restarts != 0 {
				t.Fatalf("context: %+v", c)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		for _, lang := range []string{"kotlin", "cobol"} {
			status, body := e.do("POST", "/v1/sandboxes/"+id+"/code", agentapi.RunCodeRequest{Code: "1", Language: lang})
			if status != http.StatusBadRequest || !strings.Contains(string(body), `\"`+lang+`\"`) {
				t.Errorf("%s: %d %s, want a 400 naming it", lang, status, body)
			}
			status, body = e.do("POST", "/v1/sandboxes/"+id+"/contexts", agentapi.CreateContextRequest{Language: lang})
			if status != http.StatusBadRequest {
				t.Errorf("context of %s: %d %s", lang, status, body)
			}
		}
		// A default context keeps its language.
		status, body := e.do("POST", "/v1/sandboxes/"+id+"/code", agentapi.RunCodeRequest{Code: "1", ContextID: "default-bash", Language: "r"})
		if status != http.StatusBadRequest {
			t.Errorf("r in default-bash: %d %s", status, body)
		}
	})

	t.Run("E2B names", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "console.log(typeof Deno)", Language: "js"})
		if ex.ContextID != "default-javascript" || stdoutOf(ex) != "object\n" {
			t.Fatalf("js: %+v", ex)
		}
		var c agentapi.Context
		e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+id+"/contexts", agentapi.CreateContextRequest{Language: "ts"}, &c)
		if c.Language != "typescript" {
			t.Fatalf("ts context: %+v", c)
		}
		ex = e.code(id, agentapi.RunCodeRequest{Code: "const n: number = 6 * 7; n", ContextID: c.ID})
		if mainText(t, ex) != "42" {
			t.Fatalf("ts in its context: %+v", ex)
		}
	})
}

// TestCodeLanguagesHostile: a kernel of another language is no way
// around what bounds a Python kernel: it runs as the sandbox user with
// the sandbox's limits, and a kernel that takes the memory is killed
// and reported as Python's is.
func TestCodeLanguagesHostile(t *testing.T) {
	e := newEnv(t)
	sb := e.ciSandbox(api.CreateSandboxRequest{MemoryMiB: 1024})
	id := sb.ID
	for _, c := range []struct{ lang, code string }{
		{"bash", "id -u; cat /etc/shadow 2>&1 | head -1"},
		{"javascript", "console.log(Deno.uid()); try { Deno.readTextFileSync('/etc/shadow') } catch (e) { console.log(e.name) }"},
		{"r", "cat(system('id -u', intern=TRUE), '\\n'); tryCatch(readLines('/etc/shadow'), warning=function(w) cat('denied\\n'), error=function(e) cat('denied\\n'))"},
		// Java: its uid, then the agent's secrets: /etc/shadow and the
		// environment of every process that is not its own user's (the
		// agent, the reaper), each read or refused.
		{"java", `System.out.println(Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("Uid:")).findFirst().get().split("\\s+")[1]);
for (String p : new String[]{"/etc/shadow", "/proc/1/environ", "/proc/1/root/etc/shadow"}) {
    try { System.out.println("read " + p + ": " + Files.readString(Path.of(p))); } catch (Exception e) { System.out.println("denied " + p); }
}
try (var ps = Files.list(Path.of("/proc"))) {
    ps.filter(d -> d.getFileName().toString().matches("\\d+")).forEach(d -> {
        try {
            if (Files.readAllLines(d.resolve("status")).stream().anyMatch(l -> l.matches("Uid:\\s+0\\s.*"))) {
                byte[] env = Files.readAllBytes(d.resolve("environ"));
                System.out.println("root:" + d + " environ " + env.length + " bytes");
            }
        } catch (Exception e) { }
    });
}`},
	} {
		ex := e.code(id, agentapi.RunCodeRequest{Code: c.code, Language: c.lang})
		out := stdoutOf(ex)
		if !strings.HasPrefix(strings.TrimSpace(out), "1000") || strings.Contains(out, "root:") || strings.Contains(out, "read /") {
			t.Errorf("%s runs as: %q (error %+v)", c.lang, out, ex.Error)
		}
	}
	// Memory: a JavaScript kernel that takes more than the sandbox has is
	// killed like a Python one, and the context comes back.
	ex := e.code(id, agentapi.RunCodeRequest{Language: "javascript", TimeoutSeconds: 60,
		Code: "const a = []; while (true) a.push(new Uint8Array(16 << 20).fill(1));"})
	if ex.Error == nil || !ex.StateLost {
		t.Fatalf("memory hog: %+v", ex.Error)
	}
	t.Logf("memory hog: %s: %s (oom %v)", ex.Error.Name, ex.Error.Value, ex.OutOfMemory)
	ex = e.code(id, agentapi.RunCodeRequest{Code: "1 + 1", Language: "javascript"})
	if mainText(t, ex) != "2" || !ex.Restarted {
		t.Fatalf("after the hog: %+v", ex)
	}
	// Java: a heap that takes the sandbox's memory is an OutOfMemoryError
	// of the JVM's own or the kernel killed; either way the context comes
	// back.
	ex = e.code(id, agentapi.RunCodeRequest{Language: "java", TimeoutSeconds: 60,
		Code: "var a = new ArrayList<byte[]>(); while (true) { byte[] b = new byte[16 << 20]; Arrays.fill(b, (byte) 1); a.add(b); }"})
	if ex.Error == nil {
		t.Fatalf("java memory hog: no error")
	}
	t.Logf("java memory hog: %s: %s (oom %v, state lost %v)", ex.Error.Name, ex.Error.Value, ex.OutOfMemory, ex.StateLost)
	if ex = e.code(id, agentapi.RunCodeRequest{Code: "6 * 7", Language: "java"}); mainText(t, ex) != "42" {
		t.Fatalf("java after the hog: %+v", ex)
	}
	// Java: a loop that catches the interrupt's ThreadDeath cannot be
	// stopped; at the timeout's grace its kernel is killed and restarted,
	// and the context answers again.
	ex = e.code(id, agentapi.RunCodeRequest{Language: "java", TimeoutSeconds: 2,
		Code: "while (true) { try { while (true) {} } catch (Throwable t) { } }"})
	if !ex.TimedOut || ex.Error == nil || !ex.StateLost {
		t.Fatalf("java loop that ignores the interrupt: timedOut %v stateLost %v %+v", ex.TimedOut, ex.StateLost, ex.Error)
	}
	if ex = e.code(id, agentapi.RunCodeRequest{Code: "6 * 7", Language: "java"}); mainText(t, ex) != "42" || !ex.Restarted {
		t.Fatalf("java after the stubborn loop: %+v", ex)
	}
	// The Python kernel of the same sandbox is unharmed.
	if ex = e.code(id, agentapi.RunCodeRequest{Code: "6 * 7"}); mainText(t, ex) != "42" {
		t.Fatalf("python after: %+v", ex)
	}
}

func resultsJSON(ex agentapi.Execution) []byte {
	b, _ := json.Marshal(ex.Results)
	return b
}

// TestKernelsReseeded (issue 26): in every copy of a snapshot the kernels'
// random generators are seeded anew: Python's random, Bash's $RANDOM and
// R's generator (each drawn from once before the snapshot) draw different
// numbers in two copies, where one saved state would draw the same.
// (Deno's and Java's Math.random cannot be seeded from a cell:
// docs/behaviour.md.)
func TestKernelsReseeded(t *testing.T) {
	e := newEnv(t)
	draws := map[string]string{
		"python": "import random; print(random.random(), random.random())",
		"bash":   "echo $RANDOM $RANDOM $RANDOM",
		"r":      "cat(runif(2))",
	}
	src := e.ciSandbox(api.CreateSandboxRequest{MemoryMiB: 1024})
	for lang, code := range draws {
		if ex := e.code(src.ID, agentapi.RunCodeRequest{Code: code, Language: lang}); ex.Error != nil || stdoutOf(ex) == "" {
			t.Fatalf("%s in the source: %+v", lang, ex)
		}
	}
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{})
	var copies [2]map[string]string
	for i := range copies {
		sb := e.create(api.CreateSandboxRequest{Snapshot: sn.ID, MemoryMiB: 1024})
		copies[i] = map[string]string{}
		for lang, code := range draws {
			ex := e.code(sb.ID, agentapi.RunCodeRequest{Code: code, Language: lang})
			if ex.Error != nil || stdoutOf(ex) == "" {
				t.Fatalf("%s in copy %d: %+v", lang, i, ex)
			}
			copies[i][lang] = stdoutOf(ex)
		}
	}
	for lang := range draws {
		t.Logf("%s: %q and %q", lang, copies[0][lang], copies[1][lang])
		if copies[0][lang] == copies[1][lang] {
			t.Errorf("%s: two copies of one snapshot drew the same numbers, %q", lang, copies[0][lang])
		}
	}
}
