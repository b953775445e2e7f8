// The unmodified e2b JS SDK's snapshots and fork against Runtime:
// createSnapshot, Sandbox.create(<snapshot id>), listSnapshots,
// deleteSnapshot and fork.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'
import { otherKey, eventually } from './helpers.mjs'

// A process that keeps a count in memory and writes it to a file: where it
// runs on in a copy, the count goes on from where it was at the snapshot
// (a process started afresh would count from 1). The file is replaced
// whole, so a read never finds it empty.
const counter = `python3 -c 'import os, time
n = 0
while True:
    n += 1
    open("/tmp/count.new", "w").write(str(n))
    os.replace("/tmp/count.new", "/tmp/count")
    time.sleep(0.1)'`

const count = async (sb) => Number(await sb.files.read('/tmp/count'))

async function countingOn(sb, pid, atLeast) {
  assert.ok((await sb.commands.list()).some((p) => p.pid === pid), `process ${pid} is not running in ${sb.sandboxId}`)
  const first = await count(sb)
  assert.ok(first >= atLeast, `the count restarted: ${first} < ${atLeast}`)
  await eventually('the counter to go on', async () => (await count(sb)) > first, 10_000)
}

async function sourceWithState() {
  const sb = await Sandbox.create({ timeoutMs: 300_000, metadata: { case: 'ts-snapshot-source' } })
  await sb.files.write('/home/user/note.txt', 'before the snapshot')
  const proc = await sb.commands.run(counter, { background: true })
  await eventually('the counter to start', async () => (await sb.files.exists('/tmp/count')) && (await count(sb)) >= 20, 30_000) // 2 s: a copy counting afresh would be far below
  return { sb, pid: proc.pid }
}

const ids = async (paginator) => (await paginator.nextItems()).map((s) => s.snapshotId)

test('a snapshot starts independent sandboxes; list, delete; another key sees none of it', async () => {
  const { sb, pid } = await sourceWithState()
  const made = []
  try {
    const name = 'compat-ts-' + randomBytes(6).toString('hex')
    // Read before the snapshot: the source counts on while it is taken, so
    // a read after it may be past the count the copies start from.
    const atSnapshot = await count(sb)
    const snap = await sb.createSnapshot({ name })
    assert.match(snap.snapshotId, /^snap_/)
    assert.deepEqual(snap.names, [name])

    const a = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 })
    made.push(a)
    const b = await Sandbox.create(name, { timeoutMs: 120_000 })
    made.push(b)
    for (const copy of [a, b]) {
      assert.notEqual(copy.sandboxId, sb.sandboxId)
      assert.equal(await copy.files.read('/home/user/note.txt'), 'before the snapshot')
      await countingOn(copy, pid, atSnapshot)
    }
    assert.equal((await a.getInfo()).templateId, snap.snapshotId)

    await a.files.write('/home/user/note.txt', 'changed in a')
    assert.equal(await a.commands.kill(pid), true)
    assert.equal(await b.files.read('/home/user/note.txt'), 'before the snapshot')
    assert.equal(await sb.files.read('/home/user/note.txt'), 'before the snapshot')
    await countingOn(b, pid, atSnapshot)
    await countingOn(sb, pid, atSnapshot)

    assert.ok((await ids(Sandbox.listSnapshots())).includes(snap.snapshotId))
    assert.deepEqual(await ids(sb.listSnapshots()), [snap.snapshotId])
    assert.deepEqual(await ids(Sandbox.listSnapshots({ name })), [snap.snapshotId])
    assert.deepEqual(await ids(a.listSnapshots()), [])

    assert.ok(!(await ids(Sandbox.listSnapshots({ apiKey: otherKey }))).includes(snap.snapshotId))
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, { apiKey: otherKey }), false)
    await assert.rejects(Sandbox.create(snap.snapshotId, { timeoutMs: 60_000, apiKey: otherKey }), /404|no snapshot/)

    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    assert.ok(!(await ids(Sandbox.listSnapshots())).includes(snap.snapshotId))
    await assert.rejects(Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 }), /no snapshot/)
    assert.equal((await b.commands.run('cat /home/user/note.txt')).stdout, 'before the snapshot')
  } finally {
    for (const s of made) await s.kill()
    await sb.kill()
  }
})

test('fork(2): two running copies, each its own; another key cannot fork', async () => {
  const { sb, pid } = await sourceWithState()
  let forks = []
  try {
    await assert.rejects(Sandbox.fork(sb.sandboxId, { count: 1, apiKey: otherKey }), SandboxNotFoundError)
    const atFork = await count(sb)
    forks = await sb.fork({ count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) assert.ok(f instanceof Sandbox, String(f))
    assert.equal(new Set([sb.sandboxId, ...forks.map((f) => f.sandboxId)]).size, 3)
    for (const f of forks) {
      assert.equal(await f.files.read('/home/user/note.txt'), 'before the snapshot')
      await countingOn(f, pid, atFork)
      const info = await f.getInfo()
      assert.equal(info.templateId, 'base')
      assert.deepEqual(info.metadata, { case: 'ts-snapshot-source' })
      const lease = info.endAt.getTime() - info.startedAt.getTime()
      assert.ok(lease >= 100_000 && lease <= 121_000, `lease ${lease} ms`)
    }
    await forks[0].files.write('/home/user/note.txt', 'changed in the first fork')
    assert.equal(await forks[1].files.read('/home/user/note.txt'), 'before the snapshot')
    assert.equal(await sb.files.read('/home/user/note.txt'), 'before the snapshot')
    await countingOn(sb, pid, atFork)
    assert.deepEqual(await ids(sb.listSnapshots()), []) // a fork's snapshot is not kept
  } finally {
    for (const f of forks) if (f instanceof Sandbox) await f.kill()
    await sb.kill()
  }
})

test('a snapshot of a sandbox that is gone is SandboxNotFoundError', async () => {
  const sb = await Sandbox.create({ timeoutMs: 60_000 })
  await sb.kill()
  await assert.rejects(sb.createSnapshot(), SandboxNotFoundError)
  await assert.rejects(Sandbox.fork(sb.sandboxId, { count: 1 }), SandboxNotFoundError)
  await assert.rejects(Sandbox.create('no-such-snapshot-or-template', { timeoutMs: 60_000 }), SandboxError)
})
