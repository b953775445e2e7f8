// The unmodified e2b JS SDK (npm e2b 2.51.0) against Runtime: lifecycle,
// commands, files, pause/resume and bad input.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import {
  Sandbox, CommandExitError, FileNotFoundError, AuthenticationError, SandboxError, SandboxNotFoundError,
  TimeoutError, FilesystemEventType,
} from 'e2b'
import { otherKey, envd, eventually } from './helpers.mjs'

let sb
before(async () => { sb = await Sandbox.create({ timeoutMs: 300_000, envs: { FROM_CREATE: 'yes' }, metadata: { suite: 'ts' } }) })
after(async () => { await sb?.kill() })

test('create, getInfo, setTimeout, list, connect, kill', async () => {
  const s = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { case: 'ts-lifecycle' } })
  assert.equal(await s.isRunning(), true)
  const info = await s.getInfo()
  assert.equal(info.sandboxId, s.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { case: 'ts-lifecycle' })
  await s.setTimeout(600_000)
  const later = await Sandbox.getInfo(s.sandboxId)
  assert.ok(later.endAt.getTime() - later.startedAt.getTime() > 500_000)
  const page = await Sandbox.list({ query: { metadata: { case: 'ts-lifecycle' } } }).nextItems()
  assert.deepEqual(page.map((x) => x.sandboxId), [s.sandboxId])
  const again = await Sandbox.connect(s.sandboxId)
  assert.equal((await again.commands.run('echo $((6*7))')).stdout, '42\n')
  assert.equal((await s.commands.run('true')).exitCode, 0) // the first token still works
  assert.equal(await s.kill(), true)
  assert.equal(await Sandbox.kill(s.sandboxId), false)
  await assert.rejects(Sandbox.getInfo(s.sandboxId), SandboxNotFoundError)
})

test('commands: output, exit codes, env, cwd, user, streaming', async () => {
  const r = await sb.commands.run('echo out; echo err >&2')
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ['out\n', 'err\n', 0])
  await assert.rejects(sb.commands.run('echo partial; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
  assert.equal((await sb.commands.run('echo $FROM_CREATE $ONE', { envs: { ONE: '1' } })).stdout, 'yes 1\n')
  assert.equal((await sb.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
  assert.equal((await sb.commands.run('whoami')).stdout, 'user\n')
  assert.equal((await sb.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
  const chunks = []
  await sb.commands.run('for i in 1 2 3; do echo l$i; sleep 0.1; done', { onStdout: (d) => chunks.push(d) })
  assert.equal(chunks.join(''), 'l1\nl2\nl3\n')
  assert.ok(chunks.length >= 2, 'output came in one piece: not streamed')
  await assert.rejects(sb.commands.run('sleep 30', { timeoutMs: 1000 }), TimeoutError)
})

test('commands: background, wait, list, connect, kill, stdin', async () => {
  const h = await sb.commands.run('sleep 0.3; echo done', { background: true })
  assert.equal((await h.wait()).stdout, 'done\n')
  const long = await sb.commands.run('sleep 600', { background: true })
  assert.ok((await sb.commands.list()).some((p) => p.pid === long.pid))
  const again = await sb.commands.connect(long.pid)
  assert.equal(await long.kill(), true)
  await assert.rejects(again.wait(), CommandExitError)
  assert.equal(await sb.commands.kill(long.pid), false)

  const cat = await sb.commands.run('while read l; do echo got:$l; done; echo eof', { background: true, stdin: true })
  await sb.commands.sendStdin(cat.pid, 'one\n')
  await cat.sendStdin('two\n')
  await cat.closeStdin()
  assert.equal((await cat.wait()).stdout, 'got:one\ngot:two\neof\n')
})

test('files: text, bytes, list, makeDir, exists, rename, remove', async () => {
  const d = `/tmp/ts-${Date.now()}`
  await sb.files.write(`${d}/a.txt`, 'hello')
  assert.equal(await sb.files.read(`${d}/a.txt`), 'hello')
  const bytes = new Uint8Array(256).map((_, i) => i)
  await sb.files.write(`${d}/b.bin`, bytes.buffer)
  assert.deepEqual(await sb.files.read(`${d}/b.bin`, { format: 'bytes' }), bytes)
  await sb.files.write('rel.txt', 'home')
  assert.equal(await sb.files.read('/home/user/rel.txt'), 'home')
  assert.equal(await sb.files.makeDir(`${d}/sub`), true)
  assert.equal(await sb.files.makeDir(`${d}/sub`), false)
  assert.deepEqual((await sb.files.list(d)).map((e) => [e.name, e.type]), [['a.txt', 'file'], ['b.bin', 'file'], ['sub', 'dir']])
  assert.equal(await sb.files.exists(`${d}/a.txt`), true)
  const moved = await sb.files.rename(`${d}/a.txt`, `${d}/sub/c.txt`)
  assert.equal(moved.path, `${d}/sub/c.txt`)
  assert.equal(await sb.files.exists(`${d}/a.txt`), false)
  await sb.files.remove(d)
  assert.equal(await sb.files.exists(d), false)
  await assert.rejects(sb.files.read(`${d}/nothing`), FileNotFoundError)
})

test('files: metadata on a write, kept by a rename, cleared by a new write', async () => {
  const p = `/home/user/meta-${Date.now()}.txt`
  const w = await sb.files.write(p, 'x', { metadata: { Owner: 'agent-7' } })
  assert.deepEqual(w.metadata, { owner: 'agent-7' })
  assert.deepEqual((await sb.files.getInfo(p)).metadata, { owner: 'agent-7' })
  const moved = await sb.files.rename(p, p + '.moved')
  assert.deepEqual(moved.metadata, { owner: 'agent-7' })
  await sb.files.write(p + '.moved', 'y')
  assert.equal((await sb.files.getInfo(p + '.moved')).metadata, undefined)
})

test('files: watchDir', async () => {
  const d = `/tmp/watch-${Date.now()}`
  await sb.files.makeDir(`${d}/deep`)
  const events = []
  const w = await sb.files.watchDir(d, (e) => { events.push(e) }, { recursive: true })
  try {
    await sb.files.write(`${d}/new.txt`, 'content')
    await eventually('a write event', () => events.some((e) => e.name === 'new.txt' && e.type === FilesystemEventType.WRITE))
    await sb.files.write(`${d}/deep/in.txt`, 'x')
    await eventually('a nested create', () => events.some((e) => e.name === 'deep/in.txt' && e.type === FilesystemEventType.CREATE))
    await sb.commands.run(`rm ${d}/new.txt`)
    await eventually('a remove event', () => events.some((e) => e.name === 'new.txt' && e.type === FilesystemEventType.REMOVE))
  } finally {
    await w.stop()
  }
})

test('files: watchDir sees a file that lived 10 ms, and a rename', async () => {
  // Runtime's watch is inotify in the sandbox: nothing is missed between
  // polls, and a rename is RENAME of the old name then CREATE of the new.
  const d = `/tmp/watch-short-${Date.now()}`
  await sb.files.makeDir(d)
  const events = []
  const w = await sb.files.watchDir(d, (e) => { events.push(e) })
  try {
    await sb.commands.run(`python3 -c "import os, time; open('${d}/blink', 'w').close(); time.sleep(0.01); os.unlink('${d}/blink')" && echo x > ${d}/a && mv ${d}/a ${d}/b`)
    const want = [['blink', FilesystemEventType.CREATE], ['blink', FilesystemEventType.REMOVE],
      ['a', FilesystemEventType.RENAME], ['b', FilesystemEventType.CREATE]]
    const has = (n, t) => events.some((e) => e.name === n && e.type === t)
    await eventually('the events', () => want.every(([n, t]) => has(n, t)))
    const got = events.filter((e) => want.some(([n, t]) => e.name === n && e.type === t)).map((e) => [e.name, e.type])
    assert.deepEqual(got, want)
  } finally {
    await w.stop()
  }
})

test('pause and resume', async () => {
  const s = await Sandbox.create({ timeoutMs: 120_000 })
  try {
    await s.files.write('/home/user/kept.txt', 'on disk')
    const p = await s.commands.run('sleep 3600', { background: true })
    assert.equal(await s.pause(), true)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused')
    const back = await Sandbox.connect(s.sandboxId)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'running')
    assert.equal(await back.files.read('/home/user/kept.txt'), 'on disk')
    assert.ok((await back.commands.list()).some((x) => x.pid === p.pid))
  } finally {
    await Sandbox.kill(s.sandboxId)
  }
})

test('filesystem-only pause: keepMemory false, onTimeout keepMemory false, connect onResume reboot', async () => {
  const s = await Sandbox.create({ timeoutMs: 120_000 })
  try {
    await s.files.write('/home/user/kept.txt', 'on disk')
    const p = await s.commands.run('sleep 3600', { background: true })
    assert.equal(await s.pause({ keepMemory: false }), true)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused')
    const back = await Sandbox.connect(s.sandboxId)
    assert.equal(await back.files.read('/home/user/kept.txt'), 'on disk')
    assert.ok(!(await back.commands.list()).some((x) => x.pid === p.pid))
    // A sandbox paused whole, reconnected with onResume 'reboot': fresh, its files kept.
    await back.commands.run('sleep 3600', { background: true })
    assert.equal(await back.pause(), true)
    const rebooted = await Sandbox.connect(s.sandboxId, { onResume: 'reboot' })
    assert.equal(await rebooted.files.read('/home/user/kept.txt'), 'on disk')
    assert.equal((await rebooted.commands.run('pgrep -x sleep || echo none')).stdout.trim(), 'none')
  } finally {
    await Sandbox.kill(s.sandboxId)
  }
  const t = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  try {
    await t.files.write('/home/user/state', 'before')
    await t.commands.run('sleep 3600', { background: true })
    await eventually('the timeout to pause it', async () => (await Sandbox.getInfo(t.sandboxId)).state === 'paused', 30_000)
    const back = await Sandbox.connect(t.sandboxId)
    assert.equal(await back.files.read('/home/user/state'), 'before')
    assert.equal((await back.commands.run('pgrep -x sleep || echo none')).stdout.trim(), 'none')
  } finally {
    await Sandbox.kill(t.sandboxId)
  }
})

test('bad input: unknown template, wrong key, another tenant, tokens, unknown RPC', async () => {
  await assert.rejects(Sandbox.create('no-such-template'), (e) => e instanceof SandboxError && /no-such-template/.test(e.message))
  await assert.rejects(Sandbox.create({ apiKey: 'wr_not_a_real_key' }), AuthenticationError)
  await assert.rejects(Sandbox.getInfo(sb.sandboxId, { apiKey: otherKey }), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect(sb.sandboxId, { apiKey: otherKey }), SandboxNotFoundError)
  assert.equal(await Sandbox.kill(sb.sandboxId, { apiKey: otherKey }), false)
  assert.equal(await sb.isRunning(), true)

  const other = await Sandbox.create({ apiKey: otherKey, timeoutMs: 60_000 })
  try {
    const stat = '/filesystem.Filesystem/Stat'
    const body = '{"path":"/etc/hostname"}'
    assert.equal((await envd(stat, sb.sandboxId, sb.envdAccessToken, body)).status, 200)
    for (const token of [undefined, 'wre2b_made_up', other.envdAccessToken]) {
      const r = await envd(stat, sb.sandboxId, token, body)
      assert.equal(r.status, 401)
      assert.equal((await r.json()).code, 401)
    }
  } finally {
    await other.kill()
  }
  const r = await envd('/process.Process/NoSuchThing', sb.sandboxId, sb.envdAccessToken)
  assert.equal(r.status, 501)
  assert.equal((await r.json()).code, 'unimplemented')
})

test('a kill during a command ends its wait with the SDK\'s "killed" error', async () => {
  const s = await Sandbox.create('base', { timeoutMs: 120_000 })
  const cmd = await s.commands.run('sleep 60', { background: true })
  await s.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError, `got ${err}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

test('getMetrics: the host\'s samples of the sandbox', async () => {
  const info = await sb.getInfo()
  const metrics = await sb.getMetrics()
  assert.ok(metrics.length > 0)
  const m = metrics.at(-1)
  assert.equal(m.cpuCount, info.cpuCount)
  assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100)
  assert.equal(m.memTotal, info.memoryMB * 1024 * 1024)
  assert.ok(m.memUsed > 0 && m.diskTotal > 0)
  assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 30_000)
  const old = new Date(info.startedAt.getTime() - 3_600_000)
  assert.deepEqual(await Sandbox.getMetrics(sb.sandboxId, { start: new Date(old.getTime() - 3_600_000), end: old }), [])
})
