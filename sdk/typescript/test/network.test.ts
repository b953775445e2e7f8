// Network policies, write-only secrets, API keys, usage and cost caps
// against a real Runtime server (npm test starts it and sets
// WITHRUNTIME_URL and WITHRUNTIME_API_KEY).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BadRequestError,
  Client,
  ForbiddenError,
  CostCapError,
  NotFoundError,
  Sandbox,
  SandboxStoppedError,
  UnauthorizedError,
  type UsageRow,
} from "withruntime";

const VALUE = "ts-secret-value-91c2e4";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) assert.fail(`no ${what} within ${ms} ms`);
    await sleep(200);
  }
}

test("secrets, network policy, keys, usage and the cost cap", async () => {
  // Every answer body the clients receive, to check that the secret's value never comes back.
  const bodies: string[] = [];
  const recording = (async (input: string | URL | Request, init?: RequestInit) => {
    const resp = await fetch(input, init);
    bodies.push(`${init?.method ?? "GET"} ${String(input)}: ${await resp.clone().text()}`);
    return resp;
  }) as typeof fetch;
  const url = process.env["WITHRUNTIME_URL"]!;
  const admin = new Client({ baseURL: url, apiKey: process.env["WITHRUNTIME_API_KEY"]!, fetch: recording });

  // A write-only secret.
  const sec = await admin.setSecret("TS_TOKEN", VALUE, ["api.example.com"]);
  assert.deepEqual([sec.name, sec.hosts], ["TS_TOKEN", ["api.example.com"]]);
  assert.ok(!("value" in sec) && sec.createdAt !== "");
  assert.deepEqual(
    (await admin.listSecrets()).filter((s) => s.name === "TS_TOKEN").map((s) => s.hosts),
    [["api.example.com"]],
  );
  await assert.rejects(admin.setSecret("TS TOKEN", VALUE, ["api.example.com"]), (err: unknown) => {
    return err instanceof BadRequestError && !err.message.includes(VALUE);
  });

  // A key with a daily limit, and a client that uses it.
  const key = await admin.createKey("ts-sdk", { dailyLimitMicros: 5_000_000 });
  assert.match(key.id, /^key_/);
  assert.ok(key.secret.startsWith(key.prefix));
  assert.equal(key.dailyLimitMicros, 5_000_000);
  const listed = (await admin.listKeys()).filter((k) => k.id === key.id);
  assert.equal(listed.length, 1);
  assert.equal(listed[0]!.secret, undefined);
  assert.equal(listed[0]!.dailyLimitMicros, 5_000_000);
  assert.equal(listed[0]!.revokedAt, undefined);
  const keyed = new Client({ baseURL: url, apiKey: key.secret, fetch: recording });

  // The key's own secret: the admin's of the same name is another one.
  const own = await keyed.setSecret("TS_TOKEN", VALUE, ["api.example.com"]);
  assert.equal(own.owner, key.id);
  assert.deepEqual((await keyed.listSecrets()).map((s) => s.owner), [key.id]);

  let id = "";
  {
    // A sandbox of that key with the secret: its variable holds a placeholder.
    await using sbx = await keyed.create({
      timeoutSeconds: 120,
      memoryMiB: 256,
      secrets: ["TS_TOKEN"],
      network: { allow: ["api.example.com"] },
      maxCostMicros: 1_000_000,
    });
    id = sbx.id;
    const res = await sbx.exec('printf %s "$TS_TOKEN"');
    assert.equal(res.exitCode, 0);
    assert.match(res.stdout, /^wr_placeholder_ts_token_[0-9a-f]+$/);
    await keyed.deleteSecret("TS_TOKEN");

    // Network policy: read, change, refuse an invalid one.
    assert.deepEqual(await sbx.network(), { internet: false, allow: ["api.example.com"] });
    const want = { internet: true, deny: ["blocked.example.com"] };
    assert.deepEqual(await sbx.setNetwork(want), want);
    assert.deepEqual(await sbx.network(), want);
    await assert.rejects(sbx.setNetwork({ internet: true, allow: ["x.example.com"] }), BadRequestError);

    // Some CPU, then the running cost.
    assert.equal((await sbx.exec("timeout 1 sh -c 'while :; do :; done'; true")).exitCode, 0);
    await waitFor("running cost", async () => (await sbx.refresh()).costMicros > 0);
  }
  await assert.rejects(admin.connect(id), SandboxStoppedError);
  const info = (await admin.list({ state: "stopped" })).find((s) => s.id === id);
  assert.ok(info && info.costMicros > 0 && info.endReason === "deleted", JSON.stringify(info));

  // Usage by sandbox and by key: the sandbox's final cost.
  const row = (await admin.usage({ groupBy: "sandbox" })).find((r) => r.group === id) as UsageRow;
  assert.ok(row.cpuSeconds > 0 && row.billedCpuSeconds >= row.cpuSeconds && row.gibSeconds > 0, JSON.stringify(row));
  assert.ok(row.overheadCpuSeconds > 0, JSON.stringify(row)); // gVisor's own CPU, reported apart
  assert.equal(row.costMicros, info.costMicros);
  const rep = await keyed.usageReport({ from: new Date(Date.now() - 3600_000), groupBy: "key" });
  assert.equal(rep.groupBy, "key");
  assert.equal(rep.total.group, "total");
  assert.ok(rep.prices.cpuMicrosPerVcpuHour > 0);
  const krow = rep.rows.find((r) => r.group === key.id);
  assert.deepEqual([krow?.cpuSeconds, krow?.costMicros], [row.cpuSeconds, row.costMicros]);
  await assert.rejects(admin.usage({ groupBy: "week" as "day" }), /groupBy/);

  // A key with a daily limit manages no keys; a revoked key is refused.
  await assert.rejects(keyed.revokeKey(key.id), ForbiddenError);
  await admin.revokeKey(key.id);
  await assert.rejects(keyed.listKeys(), UnauthorizedError);
  await assert.rejects(admin.revokeKey(key.id), NotFoundError);
  assert.ok((await admin.listKeys()).find((k) => k.id === key.id)?.revokedAt);

  // A cost cap too small for the lease.
  await assert.rejects(
    Sandbox.create({ client: admin, cpu: 2, memoryMiB: 4096, timeoutSeconds: 3600, maxCostMicros: 79_999 }),
    (err: unknown) =>
      err instanceof CostCapError &&
      err instanceof BadRequestError &&
      err.status === 400 &&
      err.code === "cost_cap" &&
      err.message.includes("80000 µ$") &&
      err.message.includes("maxCostMicros 79999"),
  );

  // Deleting the secret.
  await admin.deleteSecret("TS_TOKEN");
  assert.ok(!(await admin.listSecrets()).some((s) => s.name === "TS_TOKEN"));
  await assert.rejects(admin.deleteSecret("TS_TOKEN"), NotFoundError);
  assert.deepEqual(
    bodies.filter((b) => b.includes(VALUE)),
    [],
  );
});
