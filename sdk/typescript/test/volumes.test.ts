// Volumes against the real server: createVolume, volumes, getVolume,
// deleteVolume; a volume's files without a sandbox (write, read, list);
// mounts on create, read-write and read-only, shared between sandboxes and
// outliving them; the SDK's errors and another key's view.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import {
  BadRequestError,
  Client,
  ConflictError,
  NotFoundError,
  RangeNotSatisfiableError,
  Sandbox,
  VolumeFiles,
  type VolumeInfo,
} from "withruntime";

const volName = () => "ts-" + randomBytes(6).toString("hex");

/** A fresh 32 MiB volume of the test key, deleted when the block ends. */
async function makeVolume(client: Client): Promise<VolumeInfo & AsyncDisposable> {
  const v = await client.createVolume(volName(), 32);
  return Object.assign(v, {
    [Symbol.asyncDispose]: () => client.deleteVolume(v.name).catch((err) => (err instanceof NotFoundError ? undefined : Promise.reject(err))),
  });
}

test("create, list, get and delete a volume, with their errors", async () => {
  const client = new Client();
  const name = volName();
  const v = await client.createVolume(name, 32);
  try {
    assert.equal(v.name, name);
    assert.match(v.id, /^vol_/);
    assert.equal(v.sizeMiB, 32);
    assert.equal(v.state, "ready");
    assert.ok(v.capacityBytes > 0 && v.capacityBytes <= 32 << 20, `capacity ${v.capacityBytes}`);
    assert.deepEqual(v.mountedBy, []);
    await assert.rejects(client.createVolume(name, 32), ConflictError);
    await assert.rejects(client.createVolume("-bad name-", 32), BadRequestError);
    assert.throws(() => client.createVolume(volName(), 1.5), TypeError);
    assert.ok((await client.volumes()).some((x) => x.name === name));
    assert.equal((await client.getVolume(name)).id, v.id);
  } finally {
    await client.deleteVolume(name);
  }
  await assert.rejects(client.getVolume(name), NotFoundError);
  await assert.rejects(client.deleteVolume(name), NotFoundError);
});

test("a volume's files without a sandbox: write, read, list", async () => {
  const client = new Client();
  await using v = await makeVolume(client);
  const files = client.volumeFiles(v.name);
  assert.ok(files instanceof VolumeFiles);
  const info = await files.write("/data/a.txt", "hello volume");
  assert.equal(info.path, "/data/a.txt");
  assert.equal(info.size, 12);
  await files.writeFile("b.txt", new TextEncoder().encode("relative to the root"));
  const big = new Uint8Array(300_000).fill(120);
  await files.write("/data/stream.bin", new Blob([big]).stream());
  assert.equal(await files.readText("/data/a.txt"), "hello volume");
  assert.equal(await files.readText("/b.txt"), "relative to the root");
  assert.equal(new TextDecoder().decode(await files.readFile("/data/a.txt", { offset: 6 })), "volume");
  assert.equal(new TextDecoder().decode(await files.readFile("/data/a.txt", { length: 5 })), "hello");
  assert.deepEqual(await files.readFile("/data/stream.bin"), big);
  const root = await files.list();
  assert.deepEqual(root.map((e) => e.name).sort(), ["b.txt", "data"]);
  assert.equal(root.find((e) => e.name === "data")?.type, "dir");
  assert.deepEqual((await files.list("data")).map((e) => e.path), ["/data/a.txt", "/data/stream.bin"]);
  const names: string[] = [];
  for await (const e of files.entries("/data")) names.push(e.name);
  assert.deepEqual(names, ["a.txt", "stream.bin"]);
  const page = await files.listPage("/data", { limit: 1 });
  assert.deepEqual([page.entries.map((e) => e.name), page.truncated], [["a.txt"], true]);
  const page2 = await files.listPage("/data", { limit: 1, cursor: page.next });
  assert.deepEqual([page2.entries.map((e) => e.name), page2.truncated], [["stream.bin"], false]);
  assert.ok((await client.getVolume(v.name)).usedBytes >= 300_000);

  await assert.rejects(files.readFile("/nope.txt"), NotFoundError);
  await assert.rejects(files.readFile("/data"), BadRequestError);
  await assert.rejects(files.readFile("/data/a.txt", { offset: 100 }), RangeNotSatisfiableError);
  await assert.rejects(client.volumeFiles(volName()).readFile("/a.txt"), NotFoundError);
});

test("mounts: shared by live sandboxes, read-only refuses writes, files outlive them; another key sees none", async () => {
  const client = new Client();
  await using v = await makeVolume(client);
  {
    await using writer = await Sandbox.create({ client, volumes: [{ name: v.name, path: "/data" }] });
    assert.deepEqual(writer.info.volumes, [{ name: v.name, path: "/data" }]);
    const res = await writer.exec("echo from-a > /data/note && stat -c %u /data");
    assert.deepEqual([res.exitCode, res.stdout], [0, "1000\n"]);
    await using reader = await Sandbox.create({ client, volumes: [{ name: v.name, path: "/mnt", readOnly: true }] });
    assert.equal((await reader.exec("cat /mnt/note")).stdout, "from-a\n");
    const ro = await reader.exec("echo x > /mnt/other");
    assert.notEqual(ro.exitCode, 0);
    assert.match(ro.stderr, /Read-only file system/);
    await client.volumeFiles(v.name).write("/from-api", "api");
    assert.equal((await reader.exec("cat /mnt/from-api")).stdout, "api");
    assert.deepEqual((await client.getVolume(v.name)).mountedBy.sort(), [writer.id, reader.id].sort());
    await assert.rejects(client.deleteVolume(v.name), (err: unknown) => err instanceof ConflictError && err.message.includes(writer.id));
  }
  {
    await using third = await Sandbox.create({ client, volumes: [{ name: v.name, path: "/srv", readOnly: true }] });
    assert.equal((await third.exec("cat /srv/note")).stdout, "from-a\n");
  }
  assert.equal(await client.volumeFiles(v.name).readText("/note"), "from-a\n");

  const tenant = await client.createKey("ts-volume-tenant", { dailyLimitMicros: 1_000_000 });
  try {
    const other = new Client({ apiKey: tenant.secret });
    assert.ok(!(await other.volumes()).some((x) => x.name === v.name));
    await assert.rejects(other.getVolume(v.name), NotFoundError);
    await assert.rejects(other.volumeFiles(v.name).list(), NotFoundError);
    await assert.rejects(other.deleteVolume(v.name), NotFoundError);
    await assert.rejects(Sandbox.create({ client: other, volumes: [{ name: v.name, path: "/data" }] }), NotFoundError);
  } finally {
    await client.revokeKey(tenant.id);
  }
  assert.equal((await client.getVolume(v.name)).state, "ready");
});
