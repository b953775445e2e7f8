// Snapshots and fork against the real server: sbx.snapshot,
// Sandbox.create({ snapshot }), sbx.fork, client.snapshots, getSnapshot and
// deleteSnapshot, with the SDK's errors and another key's view.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { BadRequestError, Client, ConflictError, ForkResult, NotFoundError, Sandbox } from "withruntime";

// A process that keeps a count in memory and writes it to a file (replaced
// whole, so never read half-written): where it runs on in a copy, the count
// goes on from where it was at the snapshot.
const COUNTER = `import os, time
open("/tmp/counter.pid", "w").write(str(os.getpid()))
n = 0
while True:
    n += 1
    open("/tmp/count.new", "w").write(str(n))
    os.replace("/tmp/count.new", "/tmp/count")
    time.sleep(0.1)
`;

const count = async (sbx: Sandbox) => Number((await sbx.exec("cat /tmp/count")).stdout);
const note = (sbx: Sandbox) => sbx.files.readText("/workspace/note.txt");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startCounter(sbx: Sandbox): Promise<void> {
  await sbx.files.write("/workspace/counter.py", COUNTER);
  await sbx.files.write("/workspace/note.txt", "before the snapshot");
  await sbx.exec("nohup python3 /workspace/counter.py >/dev/null 2>&1 &");
  const end = Date.now() + 10_000;
  while (Number((await sbx.exec("cat /tmp/count 2>/dev/null")).stdout || 0) < 3) {
    assert.ok(Date.now() < end, "the counter did not start");
    await sleep(100);
  }
}

/** The counter runs in sbx, from at least where it was. */
async function countingOn(sbx: Sandbox, atLeast: number): Promise<void> {
  const first = await count(sbx);
  assert.ok(first >= atLeast, `the count restarted in ${sbx.id}: ${first} < ${atLeast}`);
  const end = Date.now() + 10_000;
  while ((await count(sbx)) <= first) {
    assert.ok(Date.now() < end, `the counter stopped in ${sbx.id}`);
    await sleep(100);
  }
}

test("a snapshot starts independent sandboxes; list, get, delete; another key sees none of it", async () => {
  const client = new Client();
  await using sbx = await Sandbox.create({ client, timeoutSeconds: 300 });
  await startCounter(sbx);
  const name = "ts-sdk-" + randomBytes(5).toString("hex");
  const snap = await sbx.snapshot({ name });
  assert.match(snap.id, /^snap_/);
  assert.equal(snap.name, name);
  assert.equal(snap.state, "ready");
  assert.equal(snap.mode, "full");
  assert.equal(snap.sourceSandboxId, sbx.id);
  assert.equal(snap.memoryMiB, sbx.info.memoryMiB);
  assert.ok(snap.bytes > 0);
  const atSnapshot = await count(sbx);

  await assert.rejects(sbx.snapshot({ name }), ConflictError);
  // Files alone: a fresh boot with the note, no counter, no /tmp.
  const files = await sbx.snapshot({ mode: "filesystem" });
  assert.equal(files.mode, "filesystem");
  {
    await using fresh = await Sandbox.create({ client, snapshot: files.id, timeoutSeconds: 120 });
    assert.equal(await note(fresh), "before the snapshot");
    assert.notEqual((await fresh.exec("cat /tmp/count")).exitCode, 0);
    assert.ok(!(await fresh.exec("ps -eo args")).stdout.includes("counter.py"));
  }
  await client.deleteSnapshot(files.id);

  await using a = await Sandbox.create({ client, snapshot: snap.id, timeoutSeconds: 120 });
  await using b = await client.create({ snapshot: name, timeoutSeconds: 120, env: { FROM_CREATE: "b" } });
  for (const copy of [a, b]) {
    assert.notEqual(copy.id, sbx.id);
    assert.equal(copy.info.template, "base");
    assert.equal(await note(copy), "before the snapshot");
    await countingOn(copy, atSnapshot);
  }
  assert.equal((await b.exec("echo $FROM_CREATE")).stdout, "b\n");
  await a.files.write("/workspace/note.txt", "changed in a");
  assert.equal((await a.exec("kill $(cat /tmp/counter.pid)")).exitCode, 0);
  assert.equal(await note(b), "before the snapshot");
  assert.equal(await note(sbx), "before the snapshot");
  await countingOn(b, atSnapshot);
  await countingOn(sbx, atSnapshot);

  assert.ok((await client.snapshots()).some((s) => s.id === snap.id));
  assert.deepEqual((await sbx.snapshots()).map((s) => s.id), [snap.id]);
  assert.deepEqual((await client.snapshots({ sourceSandboxId: sbx.id })).map((s) => s.id), [snap.id]);
  assert.deepEqual(await a.snapshots(), []);
  assert.equal((await client.getSnapshot(name)).id, snap.id);

  const key = await client.createKey("ts-sdk-snapshot-other", { dailyLimitMicros: 10_000_000 });
  const other = new Client({ baseURL: client.baseURL, apiKey: key.secret });
  assert.deepEqual(await other.snapshots(), []);
  await assert.rejects(other.getSnapshot(snap.id), NotFoundError);
  await assert.rejects(other.deleteSnapshot(snap.id), NotFoundError);
  await assert.rejects(other.create({ snapshot: snap.id, timeoutSeconds: 60 }), NotFoundError);

  await client.deleteSnapshot(name);
  await assert.rejects(client.getSnapshot(snap.id), NotFoundError);
  await assert.rejects(client.deleteSnapshot(snap.id), NotFoundError);
  await assert.rejects(Sandbox.create({ client, snapshot: snap.id, timeoutSeconds: 60 }), NotFoundError);
  assert.equal(await note(b), "before the snapshot"); // what was made from it runs on
});

test("fork: running copies, each its own; the snapshot kept only when asked", async () => {
  const client = new Client();
  await using sbx = await Sandbox.create({ client, timeoutSeconds: 300 });
  await startCounter(sbx);
  await assert.rejects(sbx.fork(0), BadRequestError);
  const atFork = await count(sbx);
  const res = await sbx.fork(2, { timeoutSeconds: 120, env: { N: "x" }, metadata: { fork: "yes" } });
  try {
    assert.ok(res instanceof ForkResult);
    assert.deepEqual(res.errors, [undefined, undefined]);
    res.throwIfErrors();
    assert.equal(res.made.length, 2);
    assert.match(res.snapshot.id, /^snap_/);
    assert.equal(res.snapshot.sourceSandboxId, sbx.id);
    assert.equal(res.snapshotKept, false);
    assert.equal(new Set([sbx.id, ...res.made.map((f) => f.id)]).size, 3);
    for (const f of res.made) {
      assert.ok(f instanceof Sandbox);
      assert.deepEqual(f.info.metadata, { fork: "yes" });
      assert.equal(f.info.state, "running");
      assert.equal(await note(f), "before the snapshot");
      assert.equal((await f.exec("echo $N")).stdout, "x\n");
      await countingOn(f, atFork);
    }
    await res.made[0]!.files.write("/workspace/note.txt", "changed in the first fork");
    assert.equal(await note(res.made[1]!), "before the snapshot");
    assert.equal(await note(sbx), "before the snapshot");
    await countingOn(sbx, atFork);
    assert.deepEqual(await sbx.snapshots(), []); // a fork's snapshot is not kept
  } finally {
    await res.killAll();
  }
  const kept = await sbx.fork(1, { keepSnapshot: true, name: "ts-sdk-kept-" + randomBytes(4).toString("hex"), timeoutSeconds: 60 });
  try {
    assert.equal(kept.snapshotKept, true);
    assert.deepEqual((await sbx.snapshots()).map((s) => s.id), [kept.snapshot.id]);
  } finally {
    await kept.killAll();
    await client.deleteSnapshot(kept.snapshot.id);
  }
});
