package agent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// A language is one kernel the code interpreter can start: its command,
// how it is interrupted, and the code the agent runs in it for its own
// work (a call's env, a configure's env). The code-interpreter template
// installs them (internal/template/kernels.go):
//
//	python      ipykernel (Debian)              SIGINT -> KeyboardInterrupt
//	bash        bash_kernel (PyPI)              SIGINT -> ^C to its bash
//	javascript  deno jupyter --kernel (npm)     interrupt_request (SIGINT ends Deno)
//	typescript  the same Deno kernel            interrupt_request
//	r           IRkernel (Debian)               SIGINT -> R's interrupt
//	java        our JShell kernel (see below)   interrupt_request -> JShell's stop
//
// Java: Maven Central serves JJava's Jupyter library but not its kernel,
// so the template compiles a kernel of our own over that library and the
// JDK's JShell (internal/template/javakernel). Its cells run in the
// kernel's JVM, each snippet on a thread that an interrupt_request stops
// (JShell's stop(), Thread.stop under JDK 17): the JVM's default SIGINT
// action is to exit, so an interrupt by signal would lose the context.
// The kernel also handles SIGINT the same way, so a stray signal to its
// group does no harm. A loop that catches ThreadDeath cannot be stopped
// and is killed at the grace's end like any other kernel. Its per-call
// env is set as Java system properties (E2B's Java kernel answers
// System.getProperty with the sandbox's variables; the process's own
// environment cannot change). JVM flags and their measured start time and
// memory: agentapi.JavaKernelFlags.
type language struct {
	name string // canonical, as a Context reports it
	// title names the kernel in messages ("the Bash kernel (bash_kernel)").
	title string
	// argv starts the kernel; the connection file's path is appended.
	argv []string
	// installed are globs of which one must match for the kernel to be
	// there (besides argv[0] on PATH).
	installed []string
	// tcp: the kernel listens on loopback TCP ports (it has no ipc
	// transport); its key still guards every message.
	tcp bool
	// lateResults: the kernel may publish a cell's results after its idle
	// status (Deno does), so they are waited for a moment longer.
	lateResults bool
	// messageInterrupt: interrupt with a control-channel interrupt_request
	// instead of SIGINT to the kernel's process group.
	messageInterrupt bool
	// errorName names an error the kernel reports without a name (bash_kernel:
	// a command's non-zero exit, its code the error's value).
	errorName string
	// env is added to the kernel's environment.
	env map[string]string
	// startup runs silently before the kernel's first cell ("": none).
	startup string
	// reseed seeds the kernel's random generators again after a restore
	// ("": nothing to do, or nothing it can do: Deno's and the JVM's
	// Math.random generators cannot be seeded from a cell).
	reseed string
	// setEnv is code that sets env in the kernel's process environment;
	// save keeps the old values for restoreEnv.
	setEnv func(env map[string]string, save bool) string
	// restoreEnv is code that puts back what setEnv(env, true) saved.
	restoreEnv func(keys []string) string
}

// languages are the kernels, by canonical name (each language's needs
// above).
var languages = map[string]*language{
	wire.LanguagePython: {
		name: wire.LanguagePython, title: "the Python kernel (ipykernel)",
		argv:      kernelArgv,
		installed: []string{"/usr/lib/python3/dist-packages/ipykernel", "/usr/local/lib/python3*/dist-packages/ipykernel"},
		env:       kernelEnv, startup: kernelStartup, reseed: reseedCode,
		setEnv: func(env map[string]string, save bool) string {
			if save {
				return envSetCode(env)
			}
			vj, _ := json.Marshal(env)
			return fmt.Sprintf("__import__('os').environ.update(%s)", vj)
		},
		restoreEnv: func([]string) string { return envRestoreCode },
	},
	wire.LanguageBash: {
		name: wire.LanguageBash, title: "the Bash kernel (bash_kernel)",
		argv:      []string{"python3", "-m", "bash_kernel", "-f"},
		installed: []string{"/usr/local/lib/python3*/dist-packages/bash_kernel", "/usr/lib/python3/dist-packages/bash_kernel"},
		setEnv:    bashSetEnv, restoreEnv: bashRestoreEnv,
		errorName: "ExitCode",
		// Assigning RANDOM seeds it; SRANDOM (bash 5.1+) reads getrandom,
		// which a restored copy does not inherit.
		reseed: "RANDOM=$SRANDOM",
	},
	wire.LanguageJavaScript: denoLanguage(wire.LanguageJavaScript, "JavaScript"),
	wire.LanguageTypeScript: denoLanguage(wire.LanguageTypeScript, "TypeScript"),
	wire.LanguageR: {
		name: wire.LanguageR, title: "the R kernel (IRkernel)",
		argv:      []string{"R", "--no-save", "--no-restore", "--slave", "-e", "IRkernel::main()", "--args"},
		installed: []string{"/usr/lib/R/site-library/IRkernel", "/usr/local/lib/R/site-library/IRkernel"},
		setEnv:    rSetEnv, restoreEnv: rRestoreEnv,
		// Without .Random.seed R seeds its generator at the next draw from
		// the time and its pid: the copies' times differ.
		reseed: "if (exists('.Random.seed', envir = globalenv(), inherits = FALSE)) rm('.Random.seed', envir = globalenv())",
		// IRkernel names an ipc socket IP:PORT where Jupyter's convention
		// (and the agent's wait for the sockets) is IP-PORT.
		tcp: true,
	},
	wire.LanguageJava: {
		name: wire.LanguageJava, title: "the Java kernel (JShell)",
		argv: append(append([]string{"java"}, strings.Fields(agentapi.JavaKernelFlags)...),
			"-XX:SharedArchiveFile="+agentapi.JavaKernelDir+"/jshell.jsa", "-Xshare:auto",
			"-cp", agentapi.JavaKernelDir+"/*", agentapi.JavaKernelClass),
		installed: []string{agentapi.JavaKernelDir + "/withruntime-jshell.jar"},
		// JeroMQ (the library's ZeroMQ) has no ipc transport.
		tcp:              true,
		messageInterrupt: true,
		setEnv:           javaSetEnv, restoreEnv: javaRestoreEnv,
	},
}

// unavailable are languages E2B's interpreter has that no kernel here
// serves, and why (none today).
var unavailable = map[string]string{}

// aliases are other names a request may give a language by (E2B's among
// them).
var aliases = map[string]string{
	"python3": wire.LanguagePython, "py": wire.LanguagePython,
	"js": wire.LanguageJavaScript, "deno": wire.LanguageJavaScript, "node": wire.LanguageJavaScript,
	"ts": wire.LanguageTypeScript,
	"sh": wire.LanguageBash, "shell": wire.LanguageBash,
}

func denoLanguage(name, title string) *language {
	return &language{
		name: name, title: "the " + title + " kernel (Deno)",
		argv:      []string{"deno", "jupyter", "--kernel", "--conn"},
		installed: []string{"/usr/local/bin/deno", "/usr/bin/deno"},
		// Deno ends on SIGINT; its kernel stops a running cell on an
		// interrupt_request (V8's terminate_execution) and keeps its state.
		messageInterrupt: true,
		// Deno's kernel binds TCP only and publishes an execute_result
		// after its idle status.
		tcp: true, lateResults: true,
		env:    map[string]string{"NO_COLOR": "1"},
		setEnv: denoSetEnv, restoreEnv: denoRestoreEnv,
	}
}

// languageOf finds the language a request names ("" is Python). An
// unknown name, or a language whose kernel is not in this sandbox, is a
// 400 naming it.
func languageOf(name string) (*language, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" {
		n = wire.LanguagePython
	}
	if a, ok := aliases[n]; ok {
		n = a
	}
	if why, ok := unavailable[n]; ok {
		return nil, badRequest("language %q has no kernel in this sandbox: %s; the languages are %s", name, why, knownLanguages())
	}
	l := languages[n]
	if l == nil {
		return nil, badRequest("language %q is not one the code interpreter runs; the languages are %s (commands in other languages run with /exec)", name, knownLanguages())
	}
	return l, nil
}

// knownLanguages lists the languages' names for messages.
func knownLanguages() string {
	names := make([]string, 0, len(languages))
	for n := range languages {
		names = append(names, strconv.Quote(n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// isInstalled reports whether l's kernel is in the sandbox, by its files
// (without starting anything).
func (l *language) isInstalled() bool {
	for _, g := range l.installed {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return true
		}
	}
	return false
}

// defaultContextID is the context a call in l without a context runs in:
// "default" for Python (as before there were other languages),
// "default-<language>" for the others.
func defaultContextID(l *language) string {
	if l.name == wire.LanguagePython {
		return wire.DefaultContextID
	}
	return wire.DefaultContextID + "-" + l.name
}

// defaultContextLanguage says whether id is a language's default context,
// and which.
func defaultContextLanguage(id string) (*language, bool) {
	if id == wire.DefaultContextID {
		return languages[wire.LanguagePython], true
	}
	n, ok := strings.CutPrefix(id, wire.DefaultContextID+"-")
	if !ok {
		return nil, false
	}
	l := languages[n]
	return l, l != nil && n != wire.LanguagePython
}

func sortedKeys(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// bashQuote quotes s for bash as $'...' (every byte but letters and
// digits escaped, so no quoting rule of bash's is left to trust).
func bashQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "\\x%02x", c)
	}
	b.WriteByte('\'')
	return b.String()
}

// bashName is a variable name bash accepts; others are set with env(1)
// semantics impossible in a shell, so they are skipped by bash (export
// refuses them).
func bashName(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

func bashSetEnv(env map[string]string, save bool) string {
	var b strings.Builder
	for i, k := range sortedKeys(env) {
		if !bashName(k) {
			continue
		}
		if save {
			fmt.Fprintf(&b, "if [ -n \"${%s+x}\" ]; then __withruntime_env_%d=(1 \"$%s\"); else __withruntime_env_%d=(); fi; ", k, i, k, i)
		}
		fmt.Fprintf(&b, "export %s=%s; ", k, bashQuote(env[k]))
	}
	return b.String() + "true"
}

func bashRestoreEnv(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if !bashName(k) {
			continue
		}
		fmt.Fprintf(&b, "if [ ${#__withruntime_env_%d[@]} -gt 0 ]; then export %s=\"${__withruntime_env_%d[1]}\"; else unset %s; fi; unset __withruntime_env_%d; ", i, k, i, k, i)
	}
	return b.String() + "true"
}

func denoSetEnv(env map[string]string, save bool) string {
	vj, _ := json.Marshal(env)
	if !save {
		return fmt.Sprintf("for (const [k, v] of Object.entries(%s)) Deno.env.set(k, v);", vj)
	}
	return fmt.Sprintf("((e) => { (globalThis.__withruntimeEnv ??= []).push(Object.fromEntries(Object.keys(e).map((k) => [k, Deno.env.get(k) ?? null]))); for (const [k, v] of Object.entries(e)) Deno.env.set(k, v); })(%s);", vj)
}

func denoRestoreEnv([]string) string {
	return "for (const [k, v] of Object.entries(globalThis.__withruntimeEnv.pop())) { if (v === null) Deno.env.delete(k); else Deno.env.set(k, v); }"
}

// rString quotes s as an R string literal (JSON's escapes are R's).
func rString(s string) string {
	j, _ := json.Marshal(s)
	return string(j)
}

// rSetEnv keeps the saved values in .withruntime_env of the global
// environment (a dot name: ls() does not show it; the base environment is
// locked).
func rSetEnv(env map[string]string, save bool) string {
	var b strings.Builder
	keys := sortedKeys(env)
	if save {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = rString(k)
		}
		fmt.Fprintf(&b, "assign('.withruntime_env', c(get0('.withruntime_env', envir = globalenv(), ifnotfound = list()), list(Sys.getenv(c(%s), unset = NA, names = TRUE))), envir = globalenv()); ", strings.Join(names, ", "))
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "do.call(Sys.setenv, structure(list(%s), names = %s)); ", rString(env[k]), rString(k))
	}
	return b.String() + "invisible(NULL)"
}

func rRestoreEnv([]string) string {
	return "local({ s <- get('.withruntime_env', envir = globalenv()); old <- s[[length(s)]]; " +
		"assign('.withruntime_env', s[-length(s)], envir = globalenv()); " +
		"for (k in names(old)) if (is.na(old[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, structure(list(old[[k]]), names = k)) }); invisible(NULL)"
}

// javaString quotes s as a Java string literal. Every character stands for
// itself but the quote, the backslash, CR and LF (escaped) and the other
// control characters (octal escapes); no \\u escape is written, as javac
// reads those before the literal (and a backslash of s is doubled, so
// s's own "\\u" is no escape either).
func javaString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// javaEnvKey keeps the saved values of a call's env, a stack of maps in
// the system properties (whose table takes any object).
const javaEnvKey = "withruntime.env"

func javaSetEnv(env map[string]string, save bool) string {
	var b strings.Builder
	b.WriteString("{ ")
	var keys []string
	for _, k := range sortedKeys(env) {
		if k != "" { // System.setProperty refuses an empty key
			keys = append(keys, k)
		}
	}
	if save {
		b.WriteString("java.util.Map<String, String> wr$old = new java.util.HashMap<>(); ")
		for _, k := range keys {
			fmt.Fprintf(&b, "wr$old.put(%s, System.getProperty(%s)); ", javaString(k), javaString(k))
		}
		fmt.Fprintf(&b, "((java.util.Deque<java.util.Map<String, String>>) System.getProperties().computeIfAbsent(%s, k -> new java.util.ArrayDeque<java.util.Map<String, String>>())).push(wr$old); ", javaString(javaEnvKey))
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "System.setProperty(%s, %s); ", javaString(k), javaString(env[k]))
	}
	b.WriteString("}")
	return b.String()
}

func javaRestoreEnv([]string) string {
	return "{ java.util.Deque<java.util.Map<String, String>> wr$s = (java.util.Deque<java.util.Map<String, String>>) System.getProperties().get(" + javaString(javaEnvKey) + "); " +
		"java.util.Map<String, String> wr$old = wr$s.pop(); if (wr$s.isEmpty()) System.getProperties().remove(" + javaString(javaEnvKey) + "); " +
		"wr$old.forEach((k, v) -> { if (k.isEmpty()) return; if (v == null) System.clearProperty(k); else System.setProperty(k, v); }); }"
}
