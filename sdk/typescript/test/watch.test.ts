// File watches against the real server: sbx.files.watch as an async
// iterator of typed events (create, write, remove, rename with both names,
// chmod) in the kernel's order; stopped by close, by leaving the loop and by
// an AbortSignal; its errors.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BadRequestError, FileWatch, NotFoundError, Sandbox, type WatchEvent } from "withruntime";

async function take(w: FileWatch, n: number): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  while (out.length < n) {
    const r = await w.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

test("a watch reports each change in order, a rename as one event with both names", async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 120 });
  await sbx.files.mkdir("/workspace/w");
  await using w = await sbx.files.watch("w", { recursive: true });
  assert.equal(w.path, "/workspace/w");
  const res = await sbx.exec(
    `cd /workspace/w && python3 -c 'import os; open("blink", "w").close(); os.unlink("blink")' ` +
      "&& echo x > b && mv b c && chmod 600 c && mkdir d && : > d/inner",
  );
  assert.equal(res.exitCode, 0, res.stderr);
  const got = await take(w, 8);
  assert.deepEqual(
    got.map((e) => [e.type, e.path, e.oldPath ?? "", e.isDir ?? false]),
    [
      ["create", "/workspace/w/blink", "", false],
      ["remove", "/workspace/w/blink", "", false],
      ["create", "/workspace/w/b", "", false],
      ["write", "/workspace/w/b", "", false],
      ["rename", "/workspace/w/c", "/workspace/w/b", false],
      ["chmod", "/workspace/w/c", "", false],
      ["create", "/workspace/w/d", "", true],
      ["create", "/workspace/w/d/inner", "", false],
    ],
  );
  assert.ok(got.every((e) => typeof e.time === "string" && !Number.isNaN(Date.parse(e.time))));
  assert.ok(got.every((e) => !("code" in e) && !("message" in e)));
  await w.close();
  assert.ok(w.closed);
  assert.deepEqual(await w.next(), { done: true, value: undefined });
});

test("a watch stops: close from elsewhere ends a pending read, a for-await break closes it, an abort throws its reason", async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 120 });
  const w = await sbx.files.watch();
  assert.equal(w.path, "/workspace");
  const pending = w.next();
  await new Promise((r) => setTimeout(r, 200));
  await w.close();
  assert.deepEqual(await pending, { done: true, value: undefined });

  const w2 = await sbx.files.watch("/workspace");
  await sbx.exec(": > /workspace/one");
  for await (const ev of w2) {
    assert.deepEqual([ev.type, ev.path], ["create", "/workspace/one"]);
    break;
  }
  assert.ok(w2.closed, "leaving the loop closes the watch");

  const ac = new AbortController();
  const w3 = await sbx.files.watch("/workspace", { signal: ac.signal });
  const read = w3.next();
  ac.abort(new Error("stop watching"));
  await assert.rejects(read, /stop watching/);
  assert.ok(w3.closed);
});

test("watch errors: no such directory, not a directory, the directory removed", async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 120 });
  await assert.rejects(sbx.files.watch("/workspace/missing"), NotFoundError);
  await sbx.files.write("/workspace/file.txt", "x");
  await assert.rejects(sbx.files.watch("/workspace/file.txt"), BadRequestError);
  await sbx.files.mkdir("/workspace/gone");
  const w = await sbx.files.watch("/workspace/gone");
  await sbx.exec("rmdir /workspace/gone");
  await assert.rejects(
    (async () => {
      for await (const _ of w) {
        // the removal may come first as an event; the watch then ends
      }
    })(),
    NotFoundError,
  );
  assert.ok(w.closed);
});
