// The e2b JS SDK's pseudo-terminals (sb.pty) over envd's process service:
// Start with a pty, SendInput with pty input, Update (resize), Connect,
// SendSignal; Runtime serves them with its terminals.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, InvalidArgumentError, SandboxError } from 'e2b'

let sb
before(async () => { sb = await Sandbox.create({ timeoutMs: 300_000, metadata: { suite: 'ts-pty' } }) })
after(async () => { await sb?.kill() })

// screen collects a terminal's output; line(s) waits for a whole line of
// it (the terminal's echo of what was typed does not count).
function screen() {
  const chunks = []
  let waiters = []
  const text = () => Buffer.concat(chunks).toString('latin1')
  const s = {
    onData: (data) => {
      chunks.push(Buffer.from(data))
      for (const w of waiters) w()
    },
    text,
    async until(pred, what, ms = 30_000) {
      const end = Date.now() + ms
      while (!pred(text())) {
        const left = end - Date.now()
        if (left <= 0) throw new Error(`no ${what} in ${JSON.stringify(text())}`)
        await new Promise((resolve) => {
          const t = setTimeout(resolve, Math.min(left, 500))
          waiters.push(() => { clearTimeout(t); resolve() })
        })
        waiters = []
      }
    },
    line(l) {
      const re = new RegExp(`[\\r\\n]${l.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\r\\n`)
      return s.until((t) => re.test(t), `line ${JSON.stringify(l)}`)
    },
  }
  return s
}

const enc = new TextEncoder()

test('pty: create, stty size, resize, input, a second connection, kill', async () => {
  const out = screen()
  const h = await sb.pty.create({ cols: 80, rows: 24, onData: out.onData, timeoutMs: 0 })
  assert.ok(h.pid > 0)
  await sb.pty.sendInput(h.pid, enc.encode('stty size; tty; echo term=$TERM\n'))
  await out.line('24 80')
  await out.until((t) => t.includes('\n/dev/pts/'), 'a /dev/pts/N')
  await out.line('term=xterm-256color')

  await sb.pty.resize(h.pid, { cols: 120, rows: 40 })
  await sb.pty.sendInput(h.pid, enc.encode('stty size\n'))
  await out.line('40 120')
  await sb.pty.sendInput(h.pid, enc.encode('echo hi\n'))
  await out.line('hi')

  // The pty is listed with the commands.
  assert.ok((await sb.commands.list()).some((p) => p.pid === h.pid))

  // A second connection gets the recent output, then what both see.
  const out2 = screen()
  const h2 = await sb.pty.connect(h.pid, { onData: out2.onData, timeoutMs: 0 })
  await out2.line('40 120')
  await sb.pty.sendInput(h.pid, enc.encode('echo both\n'))
  await out2.line('both')
  await out.line('both')

  assert.equal(await sb.pty.kill(h.pid), true)
  await assert.rejects(h.wait(), CommandExitError) // killed: no exit code 0
  await assert.rejects(h2.wait(), CommandExitError)
  assert.equal(await sb.pty.kill(h.pid), false) // it has ended
})

test('pty: disconnect, the shell runs on, connect again', async () => {
  const h = await sb.pty.create({ cols: 80, rows: 24, onData: () => {}, timeoutMs: 0 })
  await sb.pty.sendInput(h.pid, enc.encode('cd /tmp; echo before\n'))
  await h.disconnect()
  const out = screen()
  const again = await sb.pty.connect(h.pid, { onData: out.onData, timeoutMs: 0 })
  await out.line('before')
  await sb.pty.sendInput(h.pid, enc.encode('pwd\n'))
  await out.line('/tmp')
  await sb.pty.sendInput(h.pid, enc.encode('exit 3\n'))
  const err = await again.wait().catch((e) => e)
  assert.ok(err instanceof CommandExitError, `got ${err}`)
  assert.equal(err.exitCode, 3)
})

test('pty: Ctrl-C ends the foreground job with 130, exit 0 ends the terminal', async () => {
  const out = screen()
  const h = await sb.pty.create({ cols: 80, rows: 24, onData: out.onData, timeoutMs: 0 })
  await sb.pty.sendInput(h.pid, enc.encode('sleep 100\n'))
  await new Promise((r) => setTimeout(r, 1000))
  await sb.pty.sendInput(h.pid, enc.encode('\x03'))
  await sb.pty.sendInput(h.pid, enc.encode('echo status=$?\n'))
  await out.line('status=130')
  await sb.pty.sendInput(h.pid, enc.encode('exit\n'))
  assert.equal((await h.wait()).exitCode, 0)
})

test('pty: refusals', async () => {
  await assert.rejects(sb.pty.create({ cols: 0, rows: 24, onData: () => {} }), InvalidArgumentError)
  const cmd = await sb.commands.run('sleep 600', { background: true })
  await assert.rejects(sb.pty.resize(cmd.pid, { cols: 100, rows: 30 }), SandboxError)
  await cmd.kill()
})
