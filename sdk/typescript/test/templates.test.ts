// Templates from images and Dockerfiles against a real Runtime server (npm
// test starts it, with a templates directory of its own), and what
// buildTemplate sends (the .dockerignore matcher, the context's tar)
// checked with GNU tar through a fake fetch.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { BadRequestError, Client, ConflictError, NotFoundError, Sandbox, type TemplateEvent } from "withruntime";

const TEMPLATES = process.env["WITHRUNTIME_TEST_TEMPLATES"] || "/var/lib/withruntime/templates";
const VECTOR = new URL("../../../go/testdata/dockerignore.json", import.meta.url); // build-test/test/ -> sdk/go

function tmp(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), "withruntime-ts-tpl-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function write(root: string, files: Record<string, string>): void {
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), body);
  }
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const tar = (args: string[]) => execFileSync("tar", ["--numeric-owner", "--owner=0", "--group=0", ...args]);

/**
 * A tiny linux/amd64 image in dir, made with tar: dash as /bin/sh with the C
 * library it needs (from the base template), as a `docker save` tarball
 * (dir/dash.tar) and as an OCI image layout (dir/oci).
 */
function dashImage(dir: string): { tarball: string; layout: string } {
  const base = join(TEMPLATES, "base", "rootfs");
  const root = join(dir, "root");
  for (const [to, from] of [
    ["bin/sh", "usr/bin/dash"],
    ["lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6"],
    ["lib64/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2"],
  ] as const) {
    mkdirSync(dirname(join(root, to)), { recursive: true });
    copyFileSync(join(base, from), join(root, to));
  }
  const img = join(dir, "img");
  mkdirSync(img);
  tar(["-C", root, "-cf", join(img, "layer.tar"), "bin", "lib", "lib64"]);
  const layer = readFileSync(join(img, "layer.tar"));
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: { Env: ["GREETING=hi"] },
      rootfs: { type: "layers", diff_ids: [`sha256:${sha256(layer)}`] },
    }),
  );
  writeFileSync(join(img, "config.json"), config);
  writeFileSync(join(img, "manifest.json"), JSON.stringify([{ Config: "config.json", RepoTags: ["example.test/dash:1"], Layers: ["layer.tar"] }]));
  const tarball = join(dir, "dash.tar");
  tar(["-C", img, "-cf", tarball, "manifest.json", "config.json", "layer.tar"]);

  const layout = join(dir, "oci");
  const blob = (b: Uint8Array) => {
    const h = sha256(b);
    mkdirSync(join(layout, "blobs", "sha256"), { recursive: true });
    writeFileSync(join(layout, "blobs", "sha256", h), b);
    return { digest: `sha256:${h}`, size: b.length };
  };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...blob(config) },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...blob(layer) }],
    }),
  );
  const desc = { mediaType: "application/vnd.oci.image.manifest.v1+json", ...blob(manifest), platform: { os: "linux", architecture: "amd64" } };
  writeFileSync(join(layout, "oci-layout"), '{"imageLayoutVersion":"1.0.0"}');
  writeFileSync(join(layout, "index.json"), JSON.stringify({ schemaVersion: 2, manifests: [desc] }));
  return { tarball, layout };
}

test("templates from a docker-save tarball, an OCI layout and bytes run /bin/sh; conflicts and deletes", async (t) => {
  const c = new Client();
  const dir = tmp(t);
  const { tarball, layout } = dashImage(dir);
  const seen: TemplateEvent[] = [];
  const sources: [string, () => Promise<unknown>][] = [
    ["ts-tar", () => c.createTemplate("ts-tar", tarball, { onEvent: (ev) => seen.push(ev) })],
    ["ts-layout", () => c.createTemplate("ts-layout", `oci-layout:${layout}`, { onEvent: (ev) => seen.push(ev) })],
    ["ts-bytes", () => c.uploadTemplate("ts-bytes", readFileSync(tarball), { label: "bytes" })],
  ];
  for (const [name, make] of sources) {
    const tpl = (await make()) as Awaited<ReturnType<Client["getTemplate"]>>;
    assert.equal(tpl.name, name);
    assert.equal(tpl.origin?.shell, "/bin/sh");
    assert.deepEqual(tpl.origin?.env, ["GREETING=hi"]);
    assert.ok(tpl.sizeBytes > 0);
    assert.deepEqual(await c.getTemplate(name), tpl);
    const sbx = await Sandbox.create({ client: c, template: name });
    try {
      const res = await sbx.exec({ argv: ["/bin/sh", "-c", "echo ok $GREETING"] });
      assert.deepEqual([res.exitCode, res.stdout], [0, "ok hi\n"]);
      await assert.rejects(c.deleteTemplate(name), (err: unknown) => err instanceof ConflictError && err.message.includes(sbx.id));
    } finally {
      await sbx.kill();
    }
  }
  assert.equal((await c.getTemplate("ts-tar")).origin?.image, tarball);
  assert.equal((await c.getTemplate("ts-bytes")).origin?.image, "bytes");
  assert.ok(seen.length > 0 && seen.every((ev) => ev.type === "step"));
  const names = (await c.listTemplates()).map((x) => x.name);
  assert.ok(["ts-bytes", "ts-layout", "ts-tar"].every((n) => names.includes(n)), String(names));

  await assert.rejects(c.createTemplate("ts-tar", tarball), ConflictError);
  await assert.rejects(c.createTemplate("ts-missing", join(dir, "missing.tar")), NotFoundError);
  await assert.rejects(c.uploadTemplate("ts-bad", new TextEncoder().encode("not a tarball")), (err: unknown) => {
    return err instanceof BadRequestError && err.message.includes("docker save");
  });
  await assert.rejects(c.createTemplate("ts-bad", `oci-layout:${dir}`), /oci-layout file/);
  for (const [name] of sources) {
    await c.deleteTemplate(name);
    await assert.rejects(c.getTemplate(name), NotFoundError);
  }
});

test("a template from a Dockerfile: the context less .dockerignore, build args, RUN output, a refused instruction", async (t) => {
  const c = new Client();
  const ctx = tmp(t);
  write(ctx, {
    "app/main.sh": "echo built app\n",
    "secret.txt": "not sent\n",
    ".dockerignore": "secret.txt\n",
    Dockerfile: 'FROM base\nARG WHO\nENV APP=/srv/app\nCOPY . /srv/app/\nRUN echo "building for $WHO" && echo $WHO > /srv/app/who\n',
  });
  let output = "";
  const tpl = await c.buildTemplate("ts-built", ctx, { buildArgs: { WHO: "ts" }, onEvent: (ev) => (output += ev.data ?? "") });
  assert.match(output, /building for ts/);
  await using sbx = await Sandbox.create({ client: c, template: tpl.name });
  const res = await sbx.exec("sh $APP/app/main.sh; cat $APP/who; ls -A $APP | tr '\\n' ' '");
  assert.equal(res.stdout, "built app\nts\n.dockerignore Dockerfile app who ");
  await sbx.kill();
  await c.deleteTemplate("ts-built");
  await assert.rejects(c.buildTemplate("ts-refused", ctx, { dockerfileContent: 'FROM base\nENTRYPOINT ["sh"]\n' }), /ENTRYPOINT is not supported/);
  await assert.rejects(c.buildTemplate("ts-refused", join(ctx, "missing")), NotFoundError);
});

/** A client whose fetch keeps what buildTemplate would send, and answers a template. */
function capturing(): { client: Client; sent: { url: string; body: Uint8Array }[] } {
  const sent: { url: string; body: Uint8Array }[] = [];
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = String(input);
    if ((init?.method ?? "GET") === "GET") return new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 });
    sent.push({ url, body: new Uint8Array(await new Response(init!.body).arrayBuffer()) });
    return new Response('{"type":"template","template":{"name":"x","createdAt":"2026-01-01T00:00:00Z","sizeBytes":1}}\n', {
      headers: { "Content-Type": "application/x-ndjson" },
    });
  }) as typeof globalThis.fetch;
  return { client: new Client({ baseURL: "http://127.0.0.1:9", apiKey: "wr_x", fetch }), sent };
}

/** The tar's entries as GNU tar lists them (directories end in /), and their contents. */
function untar(dir: string, body: Uint8Array): Map<string, string> {
  const file = join(dir, `sent-${Math.random()}.tar`);
  writeFileSync(file, body);
  const out = new Map<string, string>();
  for (const line of execFileSync("tar", ["-tvf", file], { encoding: "utf8" }).split("\n").filter(Boolean)) {
    const name = line.split(/\s+/).slice(5).join(" ");
    const [path, link] = name.split(" -> ");
    out.set(path!, link !== undefined ? `-> ${link}` : "");
  }
  const x = join(dir, `x-${Math.random()}`);
  mkdirSync(x);
  execFileSync("tar", ["-xf", file, "-C", x]);
  for (const [path, v] of out) {
    if (v === "" && !path.endsWith("/")) out.set(path, readFileSync(join(x, path), "utf8"));
  }
  return out;
}

test("buildTemplate sends the context less .dockerignore, as Docker would, as a tar GNU tar reads", async (t) => {
  const dir = tmp(t);
  const { client, sent } = capturing();
  const ctx = join(dir, "ctx");
  const long = "d".repeat(60) + "/" + "f".repeat(80) + "-ünï.txt";
  write(ctx, {
    Dockerfile: "FROM base\n",
    "app/main.py": "print(1)\n",
    "app/debug.log": "x",
    "secret.txt": "no",
    "node_modules/big/index.js": "x",
    ".dockerignore": "secret.txt\n**/*.log\nnode_modules\n",
    ".withruntime.Dockerfile": "from the context",
    [long]: "a long name",
  });
  symlinkSync("app/main.py", join(ctx, "link"));
  await client.buildTemplate("app", ctx, { buildArgs: { B: "2", A: "1" }, internet: true, allow: ["h"] });
  const q = new URL(sent[0]!.url).searchParams;
  assert.deepEqual([...q], [["name", "app"], ["dockerfile", "Dockerfile"], ["buildArg", "A=1"], ["buildArg", "B=2"], ["internet", "true"], ["allow", "h"]]);
  const files = untar(dir, sent[0]!.body);
  assert.deepEqual([...files.keys()].sort(), [".dockerignore", "Dockerfile", "app/", "app/main.py", "d".repeat(60) + "/", long, "link"].sort());
  assert.equal(files.get("link"), "-> app/main.py");
  assert.equal(files.get(long), "a long name");

  for (const opts of [{ dockerfile: join(dir, "Dockerfile.dev") }, { dockerfileContent: "FROM other\n" }]) {
    writeFileSync(join(dir, "Dockerfile.dev"), "FROM other\n");
    await client.buildTemplate("app", ctx, opts);
    assert.equal(new URL(sent.at(-1)!.url).searchParams.get("dockerfile"), ".withruntime.Dockerfile");
    assert.equal(untar(dir, sent.at(-1)!.body).get(".withruntime.Dockerfile"), "FROM other\n");
  }

  // The .dockerignore cases every SDK shares (sdk/go/testdata), as contexts.
  if (!existsSync(VECTOR)) return t.skip("sdk/go/testdata/dockerignore.json not found");
  const { cases } = JSON.parse(readFileSync(VECTOR, "utf8")) as { cases: { patterns: string[]; paths: Record<string, boolean> }[] };
  for (const [i, c] of cases.entries()) {
    const root = join(dir, `case${i}`);
    const paths = Object.keys(c.paths);
    const dirs = new Set(paths.flatMap((p) => paths.filter((o) => o.startsWith(p + "/")).map(() => p)));
    for (const p of paths) {
      if (dirs.has(p)) mkdirSync(join(root, p), { recursive: true });
      else write(root, { [p]: "x" });
    }
    write(root, { ".dockerignore": c.patterns.join("\n") });
    await client.buildTemplate("app", root, { dockerfileContent: "FROM base\n" });
    const got = untar(dir, sent.at(-1)!.body);
    for (const [p, excluded] of Object.entries(c.paths)) {
      const present = got.has(p) || got.has(p + "/");
      assert.equal(!present, excluded, `${JSON.stringify(c.patterns)}: ${p}`);
    }
  }
});
