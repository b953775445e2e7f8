// Terminals (sbx.pty) against a real Runtime server: a program on a
// pseudo-terminal, its output through onData, input, resize, signals, kill,
// wait, and connecting again.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ConflictError, NotFoundError, Sandbox, TerminalDisconnectedError } from "withruntime";

/** What onData got, and waits for a whole line of it or for some text (the terminal's echo of typed input is not a line of its own). */
function screen() {
  const chunks: Buffer[] = [];
  let wake: (() => void)[] = [];
  const text = () => Buffer.concat(chunks).toString("utf8");
  const until = async (pred: (t: string) => boolean, what: string, ms = 30_000) => {
    const end = Date.now() + ms;
    while (!pred(text())) {
      const left = end - Date.now();
      if (left <= 0) throw new Error(`no ${what} in ${JSON.stringify(text())}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 500));
        wake.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
      wake = [];
    }
  };
  return {
    onData: (d: Uint8Array) => {
      assert.ok(d instanceof Uint8Array);
      chunks.push(Buffer.from(d));
      for (const w of wake) w();
    },
    text,
    until: (s: string, count = 1) => until((t) => t.split(s).length - 1 >= count, `${count} x ${JSON.stringify(s)}`),
    line: (l: string) => {
      const re = new RegExp(`[\\r\\n]${l.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\r\\n`);
      return until((t) => re.test(t), `line ${JSON.stringify(l)}`);
    },
  };
}

describe("terminals", { concurrency: 2 }, () => {
  test("a shell: stty size, tty, TERM, resize, echo hi, Ctrl-C, exit 3", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 300 });
    const out = screen();
    const term = await sbx.pty.create({ cols: 100, rows: 30, onData: out.onData });
    assert.ok(term.pid > 0);
    assert.deepEqual(term.process?.pty, { cols: 100, rows: 30 });
    await term.sendInput("stty size; tty; echo term=$TERM\n");
    await out.line("30 100");
    await out.line("term=xterm-256color");
    assert.match(out.text(), /\n\/dev\/pts\/\d+\r\n/);
    await term.resize({ cols: 132, rows: 50 });
    await term.sendInput("stty size\n");
    await out.line("50 132");
    await sbx.pty.resize(term.pid, { cols: 90, rows: 20 }); // without the connection
    await sbx.pty.sendInput(term.pid, "stty size\n");
    await out.line("20 90");
    await term.sendInput(new TextEncoder().encode("echo hi\n"));
    await out.line("hi");
    await term.sendInput("sleep 100\n");
    await new Promise((r) => setTimeout(r, 1000));
    await term.sendInput("\x03"); // Ctrl-C: SIGINT to the foreground job
    await term.sendInput("echo status=$?\n");
    await out.line("status=130");
    await term.sendInput("exit 3\n");
    assert.deepEqual(await term.wait(), { exitCode: 3 });
    assert.equal(term.dropped, 0);
    assert.equal(await sbx.pty.kill(term.pid), false); // already ended
  });

  test("python3's prompt, disconnect, connect again, two connections, kill", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 300 });
    const first = screen();
    const term = await sbx.pty.create({ command: "python3", onData: first.onData });
    await first.until(">>> ");
    await term.sendInput("x = 6*7\r");
    await first.until(">>> ", 2); // evaluated: the next prompt
    await term.disconnect(); // the program runs on
    await assert.rejects(term.wait(), TerminalDisconnectedError);
    await assert.rejects(term.sendInput("x\r"), TerminalDisconnectedError);

    const again = screen();
    const term2 = await sbx.pty.connect(term.pid, { onData: again.onData });
    await again.until(">>> x = 6*7"); // the recent output comes first
    await term2.sendInput("print(x)\r");
    await again.line("42");
    const third = screen();
    const term3 = await sbx.pty.connect(term.pid, {
      // an async onData: no more output until it is done
      onData: async (d) => {
        await new Promise((r) => setTimeout(r, 1));
        third.onData(d);
      },
    });
    await term3.sendInput("print(x+1)\r");
    await third.line("43");
    await again.line("43");
    assert.deepEqual((await sbx.pty.list()).map((p) => p.pid), [term.pid]);
    assert.equal(await term2.kill(), true);
    assert.equal((await term2.wait()).signal, "SIGKILL");
    assert.equal((await term3.wait()).exitCode, 137);
  });

  test("argv, a signal message, a timeout, refusals", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 300 });
    const term = await sbx.pty.create({ command: ["sleep", "600"] });
    await term.signal("SIGNOPE");
    await term.signal("SIGTERM");
    const x = await term.wait();
    assert.equal(x.signal, "SIGTERM");
    assert.equal(x.exitCode, 143);
    assert.equal(term.errors.length, 1); // the unknown signal
    const timed = await sbx.pty.create({ command: "sleep 600", timeoutSeconds: 1 });
    const tx = await timed.wait();
    assert.equal(tx.timedOut, true);
    assert.equal(tx.exitCode, 124);
    await assert.rejects(sbx.pty.create({ cols: 0 }), RangeError);
    await assert.rejects(term.resize({ cols: 2000, rows: 24 }), RangeError);
    await assert.rejects(sbx.pty.connect(99999), NotFoundError);
    // A process without a terminal.
    const plain = await sbx.client.json<{ pid: number }>("POST", `/v1/sandboxes/${sbx.id}/processes`, { command: "sleep 600" });
    await assert.rejects(sbx.pty.connect(plain.pid), ConflictError);
    await assert.rejects(sbx.pty.resize(plain.pid, { cols: 10, rows: 10 }), ConflictError);
    assert.equal(await sbx.pty.kill(plain.pid), true);
  });

  test("an onData that throws ends the connection with its error; the program runs on", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 300 });
    const term = await sbx.pty.create({
      command: "echo out; sleep 600",
      onData: () => {
        throw new Error("onData failed");
      },
    });
    await assert.rejects(term.wait(), /onData failed/);
    assert.equal(await sbx.pty.kill(term.pid), true);
  });
});
