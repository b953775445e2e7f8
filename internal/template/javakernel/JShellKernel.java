// The code interpreter's Java kernel: JDK's JShell behind the Jupyter
// messaging of JJava's library (org.dflib.jjava:jjava-jupyter). The
// template build compiles this file inside the root filesystem
// (internal/template/kernels.go) and the agent starts it
// (internal/agent/languages.go).
//
// A cell is cut into JShell snippets and run in this JVM (no second JVM:
// half the memory and start time of JShell's default remote engine), on a
// thread of its own so that an interrupt_request stops it (Thread.stop,
// still there in JDK 17) and the context keeps its state. System.out and
// System.err are the cell's stream messages while it runs, one per print. The value of a
// cell whose last snippet is an expression is its execute_result, the
// object's toString as text/plain (a String unquoted). An exception, a
// compile error or an incomplete cell is an error reply naming it, with
// its message and a traceback.
package dev.withruntime.kernel;

import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.execution.LocalExecutionControl;
import jdk.jshell.spi.ExecutionControl;
import jdk.jshell.spi.ExecutionControlProvider;
import jdk.jshell.spi.ExecutionEnv;

import org.dflib.jjava.jupyter.channels.JupyterConnection;
import org.dflib.jjava.jupyter.channels.ShellReplyEnvironment;
import org.dflib.jjava.jupyter.kernel.BaseKernel;
import org.dflib.jjava.jupyter.kernel.BaseKernelBuilder;
import org.dflib.jjava.jupyter.kernel.JupyterIO;
import org.dflib.jjava.jupyter.kernel.KernelConnectionProperties;
import org.dflib.jjava.jupyter.kernel.LanguageInfo;
import org.dflib.jjava.jupyter.kernel.ReplacementOptions;
import org.dflib.jjava.jupyter.kernel.display.DisplayData;
import org.dflib.jjava.jupyter.messages.Message;
import org.dflib.jjava.jupyter.messages.publish.PublishError;
import org.dflib.jjava.jupyter.messages.publish.PublishExecuteInput;
import org.dflib.jjava.jupyter.messages.publish.PublishExecuteResult;
import org.dflib.jjava.jupyter.messages.reply.ErrorReply;
import org.dflib.jjava.jupyter.messages.reply.ExecuteReply;
import org.dflib.jjava.jupyter.messages.request.ExecuteRequest;

public final class JShellKernel extends BaseKernel {
    // The imports JShell's own tool starts with.
    private static final String[] IMPORTS = {
        "java.io.*", "java.math.*", "java.net.*", "java.nio.file.*", "java.util.*",
        "java.util.concurrent.*", "java.util.function.*", "java.util.prefs.*",
        "java.util.regex.*", "java.util.stream.*",
    };

    private final JShell shell;
    private final Engine engine;
    // interrupted: an interrupt came during the current cell; its
    // snippets not yet run are not run.
    private volatile boolean interrupted;

    private JShellKernel(Builder b, JupyterIO io) {
        super(b.name(), b.version(),
                new LanguageInfo("java", Runtime.version().toString(), "text/x-java", ".jshell", "java", "java", "java"),
                Collections.emptyList(), null, io, b.comms(), b.renderer(), null, null, false, b.styler());
        this.engine = new Engine();
        this.shell = JShell.builder().executionEngine(new Provider(engine), Map.of()).build();
        for (String i : IMPORTS) {
            shell.eval("import " + i + ";");
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: JShellKernel CONNECTION-FILE | --check");
            System.exit(2);
        }
        if (args[0].equals("--check")) {
            check();
            return;
        }
        // E2B's Java kernel answers System.getProperty(NAME) with the
        // sandbox's environment variables; so does this one (a property
        // given with -D wins).
        System.getenv().forEach((k, v) -> {
            if (System.getProperty(k) == null) {
                System.setProperty(k, v);
            }
        });
        // A stray SIGINT (kill -INT of the kernel's group) stops the
        // running cell instead of ending the JVM and the context's state.
        JShellKernel kernel = new Builder().build();
        installInterruptSignal(kernel);
        KernelConnectionProperties props = KernelConnectionProperties.parse(Files.readString(Path.of(args[0])));
        JupyterConnection conn = new JupyterConnection(props);
        kernel.onStartup();
        kernel.becomeHandlerForConnection(conn);
        conn.connect();
        conn.waitUntilClose();
        System.exit(0);
    }

    // check evaluates one cell without a connection: the template build
    // runs it to fail on a broken install (and to record the classes a
    // kernel loads into its CDS archive).
    private static void check() {
        JShellKernel k = new Builder().build();
        Object v = k.evalRaw("String s = \"4\" + 2; s");
        k.shell.close();
        if (!"42".equals(v)) {
            System.err.println("the Java kernel evaluated a test cell to " + v + ", not 42");
            System.exit(1);
        }
        System.out.println("the Java kernel works (JShell " + Runtime.version() + ")");
        System.exit(0);
    }

    @SuppressWarnings("removal")
    private static void installInterruptSignal(JShellKernel kernel) {
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> kernel.interrupt());
        } catch (Throwable t) {
            System.err.println("no SIGINT handler: " + t);
        }
    }

    // replaceOutputStreams makes System.out and System.err the cell's
    // streams as BaseKernel's does, but each print is a stream message of
    // its own, sent at once (as E2B's Java kernel: println("x") is "x" then
    // "\n"), not when a line ends.
    @Override
    protected void replaceOutputStreams(ShellReplyEnvironment env) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        InputStream oldIn = System.in;
        System.setOut(eager(io.out));
        System.setErr(eager(io.err));
        System.setIn(io.in);
        env.defer(() -> {
            System.setOut(oldOut);
            System.setErr(oldErr);
            System.setIn(oldIn);
        });
    }

    private static PrintStream eager(PrintStream to) {
        return new PrintStream(new OutputStream() {
            @Override
            public void write(int b) {
                to.write(b);
                to.flush();
            }

            @Override
            public void write(byte[] b, int off, int len) {
                to.write(b, off, len);
                to.flush();
            }
        }, true, StandardCharsets.UTF_8) {
            // A subclass: PrintStream's own println writes the text and its
            // newline in one go; a subclass's prints them one by one.
        };
    }

    @Override
    public void interrupt() {
        interrupted = true;
        engine.stopRunning();
    }

    @Override
    public void onShutdown(boolean restarting) {
        super.onShutdown(restarting);
        shell.close();
    }

    // Like BaseKernel's, but an error reply names the failure itself (the
    // user's exception class, CompilationException, ...) rather than the
    // Java class that carried it out of eval.
    @Override
    protected synchronized void handleExecuteRequest(ShellReplyEnvironment env, Message<ExecuteRequest> msg) {
        commManager.setMessageContext(msg);
        ExecuteRequest req = msg.getContent();
        int count = executionCount.getAndIncrement();
        interrupted = false;
        env.setBusyDeferIdle();
        env.publish(new PublishExecuteInput(req.getCode(), count));
        replaceOutputStreams(env);
        KernelIO kio = (KernelIO) io;
        kio.attach(env, req.isStdinEnabled());
        env.defer(() -> kio.detach(env));
        try {
            DisplayData out;
            try {
                out = eval(req.getCode());
            } finally {
                System.out.flush();
                System.err.flush();
                io.out.flush();
                io.err.flush();
            }
            if (out != null) {
                env.publish(new PublishExecuteResult(count, out));
            }
            env.defer().reply(new ExecuteReply(count, Collections.emptyMap()));
        } catch (CellError e) {
            replyError(env, count, e.name, e.getMessage(), e.traceback);
        } catch (RuntimeException e) {
            replyError(env, count, e.getClass().getName(), String.valueOf(e.getMessage()), traceOf(e));
        }
    }

    private static void replyError(ShellReplyEnvironment env, int count, String name, String message, List<String> tb) {
        env.publish(new PublishError(name, message, tb));
        ErrorReply r = new ErrorReply(name, message, tb);
        r.setExecutionCount(count);
        env.defer().replyError(ExecuteReply.MESSAGE_TYPE.error(), r);
    }

    @Override
    public Object evalRaw(String code) {
        String rest = code;
        Object value = null;
        boolean any = false;
        SourceCodeAnalysis sca = shell.sourceCodeAnalysis();
        while (!rest.isBlank()) {
            if (interrupted) {
                throw interruptedError();
            }
            SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(rest);
            switch (ci.completeness()) {
                case EMPTY:
                    return any ? value : null;
                case DEFINITELY_INCOMPLETE:
                case CONSIDERED_INCOMPLETE:
                    throw new CellError("IncompleteSourceException", "the cell ends before its code does: " + rest.strip(),
                            List.of("IncompleteSourceException: the code is incomplete", rest.strip()));
                default:
                    break;
            }
            String src = ci.completeness() == SourceCodeAnalysis.Completeness.UNKNOWN ? rest : ci.source();
            rest = ci.completeness() == SourceCodeAnalysis.Completeness.UNKNOWN ? "" : ci.remaining();
            value = evalSnippet(src);
            any = true;
        }
        return value;
    }

    // evalSnippet runs one snippet and returns its value when it is an
    // expression (null when it is not, or its value is null).
    private Object evalSnippet(String src) {
        engine.clearValue();
        List<SnippetEvent> events = shell.eval(src);
        Object value = null;
        for (SnippetEvent ev : events) {
            if (ev.causeSnippet() != null) {
                continue;
            }
            Snippet sn = ev.snippet();
            if (ev.status() == Snippet.Status.REJECTED) {
                throw compileError(sn);
            }
            JShellException ex = ev.exception();
            if (ex != null) {
                throw runError(ex);
            }
            if (engine.stopped()) {
                throw interruptedError();
            }
            value = null;
            switch (sn.subKind()) {
                case TEMP_VAR_EXPRESSION_SUBKIND:
                case VAR_VALUE_SUBKIND:
                case OTHER_EXPRESSION_SUBKIND:
                case ASSIGNMENT_SUBKIND:
                    // A String as it is; anything else as JShell shows it
                    // (its toString, an array's elements, a char quoted).
                    Object v = engine.value();
                    if (v instanceof String) {
                        value = v;
                    } else if (v != null && ev.value() != null) {
                        value = ev.value();
                    }
                    break;
                default:
                    break;
            }
        }
        return value;
    }

    private static CellError interruptedError() {
        return new CellError("EvaluationInterruptedException", "the cell was interrupted",
                List.of("EvaluationInterruptedException: the cell was interrupted"));
    }

    private CellError compileError(Snippet sn) {
        List<String> tb = new ArrayList<>();
        List<String> msgs = new ArrayList<>();
        String src = sn.source();
        shell.diagnostics(sn).forEach(d -> {
            String m = d.getMessage(Locale.ROOT);
            msgs.add(m);
            tb.addAll(diagLines(src, d, m));
        });
        if (msgs.isEmpty()) {
            msgs.add("the snippet was rejected");
            tb.add(src);
        }
        return new CellError("CompilationException", String.join("; ", msgs), tb);
    }

    // diagLines shows a diagnostic as javac does: the message, the source
    // line, a caret under the position.
    private static List<String> diagLines(String src, Diag d, String msg) {
        List<String> out = new ArrayList<>();
        out.add("error: " + msg);
        long pos = d.getPosition();
        if (pos < 0 || pos > src.length()) {
            out.add(src);
            return out;
        }
        int start = src.lastIndexOf('\n', (int) Math.max(0, pos - 1)) + 1;
        if (pos == 0) {
            start = 0;
        }
        int end = src.indexOf('\n', (int) pos);
        if (end < 0) {
            end = src.length();
        }
        out.add(src.substring(start, end));
        out.add(" ".repeat((int) pos - start) + "^");
        return out;
    }

    private static CellError runError(JShellException ex) {
        if (ex instanceof UnresolvedReferenceException) {
            Snippet sn = ((UnresolvedReferenceException) ex).getSnippet();
            String m = "the code uses a declaration that cannot run yet: " + sn.source().strip();
            return new CellError("UnresolvedReferenceException", m, List.of("UnresolvedReferenceException: " + m));
        }
        String name = ex instanceof EvalException ? ((EvalException) ex).getExceptionClassName() : ex.getClass().getName();
        String msg = ex.getMessage() == null ? "" : ex.getMessage();
        List<String> tb = new ArrayList<>();
        tb.add(msg.isEmpty() ? name : name + ": " + msg);
        for (Throwable t = ex; t != null; t = t.getCause()) {
            if (t != ex) {
                String cn = t instanceof EvalException ? ((EvalException) t).getExceptionClassName() : t.getClass().getName();
                tb.add("Caused by: " + cn + (t.getMessage() == null ? "" : ": " + t.getMessage()));
            }
            for (StackTraceElement e : t.getStackTrace()) {
                if (e.getClassName().startsWith(Engine.class.getName()) || e.getClassName().startsWith("jdk.internal.reflect.")) {
                    break; // the kernel's own frames below the cell
                }
                tb.add("\tat " + frame(e));
            }
        }
        return new CellError(name, msg, tb);
    }

    // frame names a cell's frames as JShell reports them: no class, the
    // snippet's number as the file (#N), a snippet's own code unnamed.
    private static String frame(StackTraceElement e) {
        if (!e.getClassName().isEmpty()) {
            return e.toString();
        }
        String m = e.getMethodName();
        String where = e.getFileName() == null ? "" : e.getFileName() + ":" + e.getLineNumber();
        return (m.isEmpty() ? "<cell>" : m) + "(" + where + ")";
    }

    private static List<String> traceOf(Throwable t) {
        List<String> tb = new ArrayList<>();
        tb.add(t.toString());
        for (StackTraceElement e : t.getStackTrace()) {
            tb.add("\tat " + e);
        }
        return tb;
    }

    @Override
    public DisplayData inspect(String code, int at, boolean extraDetail) {
        String docs = shell.sourceCodeAnalysis().documentation(code, at, extraDetail).stream()
                .map(SourceCodeAnalysis.Documentation::signature).collect(Collectors.joining("\n"));
        return docs.isEmpty() ? null : new DisplayData(docs);
    }

    @Override
    public ReplacementOptions complete(String code, int at) {
        int[] anchor = new int[1];
        List<String> s = shell.sourceCodeAnalysis().completionSuggestions(code, at, anchor).stream()
                .map(SourceCodeAnalysis.Suggestion::continuation).distinct().collect(Collectors.toList());
        return new ReplacementOptions(s, anchor[0], at);
    }

    @Override
    public String isComplete(String code) {
        switch (shell.sourceCodeAnalysis().analyzeCompletion(code).completeness()) {
            case COMPLETE:
            case COMPLETE_WITH_SEMI:
            case EMPTY:
                return IS_COMPLETE_YES;
            case DEFINITELY_INCOMPLETE:
            case CONSIDERED_INCOMPLETE:
                return "";
            default:
                return IS_COMPLETE_MAYBE;
        }
    }

    // A failure of a cell, as its error reply names it.
    private static final class CellError extends RuntimeException {
        final String name;
        final List<String> traceback;

        CellError(String name, String message, List<String> traceback) {
            super(message, null, false, false);
            this.name = name;
            this.traceback = traceback;
        }
    }

    // Engine runs snippets on JShell's local engine (a thread per
    // snippet, stopped with Thread.stop) and keeps the object a snippet
    // evaluated to, which JShell itself only reports as text.
    public static final class Engine extends LocalExecutionControl {
        private static final Method RUN;
        private static volatile Method pending;
        private static volatile Object last;

        static {
            try {
                RUN = Engine.class.getMethod("runPending");
            } catch (NoSuchMethodException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private volatile boolean running;
        private volatile boolean stopped;

        // runPending is what LocalExecutionControl invokes on its thread:
        // the snippet's own method, its result kept.
        public static Object runPending() throws Throwable {
            try {
                Object v = pending.invoke(null);
                last = v;
                return v;
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }

        @Override
        protected String invoke(Method doit) throws Exception {
            pending = doit;
            running = true;
            try {
                return super.invoke(RUN);
            } catch (ExecutionControl.StoppedException e) {
                stopped = true;
                throw e;
            } finally {
                running = false;
                pending = null;
            }
        }

        @Override
        public String varValue(String className, String varName)
                throws ExecutionControl.RunException, ExecutionControl.EngineTerminationException, ExecutionControl.InternalException {
            try {
                last = findClass(className).getField(varName).get(null);
            } catch (ReflectiveOperationException | RuntimeException e) {
                last = null;
            }
            return super.varValue(className, varName);
        }

        void clearValue() {
            last = null;
            stopped = false;
        }

        boolean stopped() {
            return stopped;
        }

        Object value() {
            return last;
        }

        void stopRunning() {
            if (!running) {
                return;
            }
            try {
                stop();
            } catch (ExecutionControl.ExecutionControlException e) {
                // nothing runs
            }
        }
    }

    private static final class Provider implements ExecutionControlProvider {
        private final Engine engine;

        Provider(Engine engine) {
            this.engine = engine;
        }

        @Override
        public String name() {
            return "withruntime";
        }

        @Override
        public ExecutionControl generate(ExecutionEnv env, Map<String, String> params) {
            return engine;
        }
    }

    // KernelIO lets the kernel attach its streams to a request the way
    // BaseKernel's own handler does.
    static final class KernelIO extends JupyterIO {
        KernelIO() {
            super(StandardCharsets.UTF_8);
        }

        void attach(ShellReplyEnvironment env, boolean stdin) {
            setEnv(env);
            setJupyterInEnabled(stdin);
        }

        void detach(ShellReplyEnvironment env) {
            retractEnv(env);
        }
    }

    static final class Builder extends BaseKernelBuilder<Builder, JShellKernel> {
        Builder() {
            name("withruntime-jshell");
            version("1");
        }

        String name() {
            return buildName();
        }

        String version() {
            return buildVersion();
        }

        org.dflib.jjava.jupyter.kernel.comm.CommManager comms() {
            return buildCommManager();
        }

        org.dflib.jjava.jupyter.kernel.display.Renderer renderer() {
            return buildRenderer();
        }

        org.dflib.jjava.jupyter.kernel.util.StringStyler styler() {
            return buildErrorStyler();
        }

        @Override
        public JShellKernel build() {
            return new JShellKernel(this, new KernelIO());
        }
    }
}
