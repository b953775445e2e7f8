// Templates made on the server from a container image or a Dockerfile: the
// requests behind Client.createTemplate, uploadTemplate, buildTemplate,
// listTemplates, getTemplate and deleteTemplate, and what they read on this
// machine (an OCI image layout, sent as a `docker save` tarball; a build
// context, sent as a tar less what its .dockerignore excludes).
import { lstat, open, readdir, readFile, readlink, stat } from "node:fs/promises";
import { openAsBlob } from "node:fs";
import { join, posix, relative, resolve, sep } from "node:path";

import type { HttpClient } from "./http.js";
import { NotFoundError, ServerTimeoutError, WithRuntimeError, apiError, statusOfCode } from "./errors.js";
import { BUILD_WAIT } from "./wait.js";
import type {
  BuildTemplateOptions,
  Schemas,
  Template,
  TemplateEvent,
  TemplateOptions,
  TemplateStart,
  TemplateTarball,
  UploadTemplateOptions,
} from "./types.js";

const NDJSON = "application/x-ndjson";
/** The type of the line a stream carries after 2 s without another: the server is alive; skipped. */
const HEARTBEAT = "heartbeat";
const TAR = "application/x-tar";
/** Where a Dockerfile from outside the build context goes in the context's tar; the server's COPY and ADD leave it out. */
const CONTEXT_DOCKERFILE = ".withruntime.Dockerfile";
const MAX_LABEL_BYTES = 1024;
const MAX_LAYOUT_JSON = 4 << 20;
const CHUNK = 1 << 20;
const BLOCK = 512;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const INDEX_TYPES = ["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"];
const MANIFEST_TYPES = ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];

const templatePath = (name: string) => `/v1/templates/${encodeURIComponent(name)}`;
const notFound = (msg: string) => apiError(404, "not_found", msg);
const bad = (msg: string) => apiError(400, "bad_request", msg);

export async function listTemplates(c: HttpClient, signal?: AbortSignal): Promise<Template[]> {
  return (await c.json<Schemas["TemplateList"]>("GET", "/v1/templates", undefined, signal)).templates;
}

export function getTemplate(c: HttpClient, name: string, signal?: AbortSignal): Promise<Template> {
  return c.json<Template>("GET", templatePath(name), undefined, signal);
}

export async function deleteTemplate(c: HttpClient, name: string, signal?: AbortSignal): Promise<void> {
  await c.json<void>("DELETE", templatePath(name), undefined, signal);
}

/**
 * Whether image names a file or directory on this machine, by the rules of
 * the CLI and the server: ["oci-layout" | "docker-archive" | "path", path],
 * or ["", ""] for a registry reference.
 */
function localImage(image: string): [string, string] {
  const ref = image.trim();
  for (const prefix of ["oci-layout:", "docker-archive:"]) {
    if (ref.startsWith(prefix)) return [prefix.slice(0, -1), ref.slice(prefix.length)];
  }
  if (ref.startsWith("/") || ref.startsWith("./") || ref.startsWith("../") || ref.endsWith(".tar")) return ["path", ref];
  return ["", ""];
}

export async function createTemplate(c: HttpClient, name: string, image: string, opts: TemplateOptions): Promise<Template> {
  const [kind, path] = localImage(image);
  if (!kind) {
    const req: Schemas["CreateTemplateRequest"] = { name, fromImage: image };
    if (opts.start) req.start = opts.start;
    return build(c, "/v1/templates", JSON.stringify(req), "application/json", opts);
  }
  let st;
  try {
    st = await stat(path);
  } catch (err) {
    throw notFound(`image ${image}: ${(err as Error).message}`);
  }
  await checkFree(c, name, opts.signal);
  if (kind === "oci-layout" || (kind === "path" && st.isDirectory())) {
    if (!st.isDirectory()) throw bad(`image ${image}: ${path} is not a directory; an OCI layout is a directory with an oci-layout file`);
    const chunks = await ociLayoutArchive(path, image);
    return upload(c, name, image, toStream(chunks), opts);
  }
  if (!st.isFile()) throw bad(`image ${image}: ${path} is not a regular file; give a \`docker save\` tarball`);
  return upload(c, name, image, await openAsBlob(path), opts);
}

export async function uploadTemplate(c: HttpClient, name: string, tarball: TemplateTarball, opts: UploadTemplateOptions): Promise<Template> {
  await checkFree(c, name, opts.signal);
  let body: Blob | Uint8Array | ReadableStream<Uint8Array>;
  if (tarball instanceof ArrayBuffer) body = new Uint8Array(tarball);
  else if (tarball instanceof Uint8Array || tarball instanceof Blob || tarball instanceof ReadableStream) body = tarball;
  else body = toStream(tarball);
  return upload(c, name, opts.label, body, opts);
}

function upload(
  c: HttpClient,
  name: string,
  label: string | undefined,
  body: Blob | Uint8Array | ReadableStream<Uint8Array>,
  opts: TemplateOptions,
): Promise<Template> {
  const q = new URLSearchParams({ name });
  startQuery(q, opts.start);
  if (label) {
    const b = new TextEncoder().encode(label);
    q.set("image", b.length > MAX_LABEL_BYTES ? new TextDecoder().decode(b.subarray(0, MAX_LABEL_BYTES)).replace(/\uFFFD$/, "") : label);
  }
  return build(c, "/v1/templates?" + q.toString(), body, TAR, opts);
}

/** Adds a template's start to a tar body's query (startCommand, readyCommand, readyTimeoutSeconds, startKernel). */
function startQuery(q: URLSearchParams, start: TemplateStart | undefined): void {
  if (!start) return;
  if (start.command) q.set("startCommand", start.command);
  if (start.readyCommand) q.set("readyCommand", start.readyCommand);
  if (start.readyTimeoutSeconds) q.set("readyTimeoutSeconds", String(start.readyTimeoutSeconds));
  if (start.kernel) q.set("startKernel", "true");
}

export async function buildTemplate(c: HttpClient, name: string, context: string, opts: BuildTemplateOptions): Promise<Template> {
  const ctx = context || ".";
  let st;
  try {
    st = await stat(ctx);
  } catch (err) {
    throw notFound(`build context ${ctx}: ${(err as Error).message}`);
  }
  if (!st.isDirectory()) throw notFound(`build context ${ctx}: not a directory`);
  let df: Uint8Array;
  let dfName = CONTEXT_DOCKERFILE;
  if (opts.dockerfileContent !== undefined) {
    df = new TextEncoder().encode(opts.dockerfileContent);
  } else {
    const dfPath = opts.dockerfile ?? join(ctx, "Dockerfile");
    try {
      df = await readFile(dfPath);
    } catch (err) {
      throw notFound(`Dockerfile: ${(err as Error).message}`);
    }
    const rel = relative(resolve(ctx), resolve(dfPath));
    if (rel !== "" && rel !== ".." && !rel.startsWith(".." + sep)) dfName = rel.split(sep).join("/");
  }
  const ignore = await Dockerignore.read(ctx);
  const q = new URLSearchParams({ name, dockerfile: dfName });
  startQuery(q, opts.start);
  for (const k of Object.keys(opts.buildArgs ?? {}).sort()) q.append("buildArg", `${k}=${opts.buildArgs![k]}`);
  if (opts.internet) q.set("internet", "true");
  if (typeof opts.allow === "string") throw new TypeError('allow: give a list of hosts, such as allow: ["pypi.mirror.example"]');
  for (const h of opts.allow ?? []) q.append("allow", h);
  await checkFree(c, name, opts.signal);
  return build(c, "/v1/templates?" + q.toString(), toStream(contextArchive(ctx, ignore, dfName, df)), TAR, opts);
}

/** Refuses a taken name before a body is sent. */
async function checkFree(c: HttpClient, name: string, signal?: AbortSignal): Promise<void> {
  try {
    await getTemplate(c, name, signal);
  } catch (err) {
    if (err instanceof NotFoundError) return;
    throw err;
  }
  throw apiError(409, "conflict", `template ${JSON.stringify(name)} already exists; delete it first (deleteTemplate) or pick another name`);
}

/** Posts a build, passes its progress to onEvent, and returns the template or throws the error event's APIError. */
async function build(
  c: HttpClient,
  path: string,
  body: string | Blob | Uint8Array | ReadableStream<Uint8Array>,
  contentType: string,
  opts: TemplateOptions,
): Promise<Template> {
  const resp = await c.request("POST", path, { body, contentType, accept: NDJSON, signal: opts.signal, waitSeconds: BUILD_WAIT });
  if (!(resp.headers.get("Content-Type") ?? "").startsWith(NDJSON)) return (await resp.json()) as Template;
  if (!resp.body) throw new WithRuntimeError("withruntime: the template build's answer had no body");
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        if (err instanceof ServerTimeoutError) throw err;
        throw new WithRuntimeError(`withruntime: the template build's progress broke: ${(err as Error).message}`, { cause: err });
      }
      if (chunk.done) break;
      buf += dec.decode(chunk.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === "") continue;
        let ev: Schemas["TemplateEvent"];
        try {
          ev = JSON.parse(line) as Schemas["TemplateEvent"];
        } catch (err) {
          throw new WithRuntimeError(`withruntime: bad event in the template build's progress: ${(err as Error).message}`, { cause: err });
        }
        if (ev.type === HEARTBEAT) continue; // the server's sign of life during a quiet step
        if (ev.type === "template") {
          if (!ev.template) throw new WithRuntimeError("withruntime: template event without a template");
          return ev.template;
        }
        if (ev.type === "error") {
          const e = ev.error ?? { code: "internal", message: "the template build failed without a message" };
          throw apiError(statusOfCode(e.code), e.code, e.message);
        }
        opts.onEvent?.(ev as TemplateEvent); // not a heartbeat: checked above
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  throw new WithRuntimeError("withruntime: the template build's progress ended without a result");
}

function toStream(it: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iter = it[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await iter.next();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    async cancel(reason) {
      await iter.return?.(reason);
    },
  });
}

// -- tar ----------------------------------------------------------------------

const enc = new TextEncoder();

interface TarEntry {
  name: string;
  type: "file" | "dir" | "symlink";
  mode: number;
  size: number;
  mtime: number;
  linkname?: string;
}

function field(buf: Uint8Array, off: number, len: number, s: string): void {
  buf.set(enc.encode(s).subarray(0, len), off);
}

function octal(n: number, len: number): string {
  return n.toString(8).padStart(len - 1, "0");
}

/** One ustar header block, with the checksum. */
function ustar(e: TarEntry, name: string, linkname: string, size: number, typeflag: string): Uint8Array {
  const h = new Uint8Array(BLOCK);
  field(h, 0, 100, name);
  field(h, 100, 8, octal(e.mode & 0o7777, 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(size, 12));
  field(h, 136, 12, octal(Math.max(0, Math.floor(e.mtime)), 12));
  field(h, 148, 8, "        ");
  field(h, 156, 1, typeflag);
  field(h, 157, 100, linkname);
  field(h, 257, 8, "ustar\u000000");
  let sum = 0;
  for (const b of h) sum += b;
  field(h, 148, 8, octal(sum, 7) + "\u0000 ");
  return h;
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const n = enc.encode(body).length;
  let len = n + String(n).length;
  if (String(len).length !== String(n).length) len = n + String(len).length;
  return `${len}${body}`;
}

const pad = (n: number) => new Uint8Array((BLOCK - (n % BLOCK)) % BLOCK);
const ascii = (s: string) => /^[\x20-\x7e]*$/.test(s);

/** An entry's header: a PAX extended header first when a name is long or not ASCII, or the size does not fit. */
function tarHeader(e: TarEntry): Uint8Array[] {
  const typeflag = e.type === "dir" ? "5" : e.type === "symlink" ? "2" : "0";
  const link = e.linkname ?? "";
  let records = "";
  if (enc.encode(e.name).length > 100 || !ascii(e.name)) records += paxRecord("path", e.name);
  if (enc.encode(link).length > 100 || !ascii(link)) records += paxRecord("linkpath", link);
  if (e.size > 0o77777777777) records += paxRecord("size", String(e.size));
  const out: Uint8Array[] = [];
  if (records) {
    const data = enc.encode(records);
    const short = ascii(e.name) ? e.name.slice(-80) : "entry";
    out.push(ustar({ ...e, mode: 0o644 }, "PaxHeaders/" + short, "", data.length, "x"), data, pad(data.length));
  }
  const name = ascii(e.name) ? e.name.slice(0, 100) : "entry";
  out.push(ustar(e, name, ascii(link) ? link.slice(0, 100) : "", e.size > 0o77777777777 ? 0 : e.size, typeflag));
  return out;
}

/** A regular file's header, exactly e.size bytes of it, and padding. */
async function* fileEntry(path: string, e: TarEntry): AsyncGenerator<Uint8Array> {
  const fh = await open(path, "r");
  try {
    yield* tarHeader(e);
    let left = e.size;
    while (left > 0) {
      const buf = new Uint8Array(Math.min(CHUNK, left));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) throw new WithRuntimeError(`withruntime: ${path} shrank while it was read`);
      left -= bytesRead;
      yield buf.subarray(0, bytesRead);
    }
    yield pad(e.size);
  } finally {
    await fh.close();
  }
}

function* bytesEntry(name: string, data: Uint8Array): Generator<Uint8Array> {
  yield* tarHeader({ name, type: "file", mode: 0o644, size: data.length, mtime: 0 });
  yield data;
  yield pad(data.length);
}

const tarEnd = () => new Uint8Array(2 * BLOCK);

// -- OCI layouts ----------------------------------------------------------------

type Json = Record<string, unknown>;

async function readJSON(path: string, ref: string): Promise<Json> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    throw notFound(`image ${ref}: ${(err as Error).message}`);
  }
  if (data.length > MAX_LAYOUT_JSON) throw bad(`image ${ref}: ${posix.basename(path)} is over ${MAX_LAYOUT_JSON} bytes`);
  try {
    const v = JSON.parse(data.toString("utf8")) as unknown;
    return v && typeof v === "object" ? (v as Json) : {};
  } catch (err) {
    throw bad(`image ${ref}: ${posix.basename(path)} is not valid JSON: ${(err as Error).message}`);
  }
}

/** The name of digest's blob in the layout, blobs/ALG/ENCODED, checked to be a regular file. */
async function blob(layout: string, ref: string, digest: unknown): Promise<string> {
  if (typeof digest !== "string" || !DIGEST.test(digest)) throw bad(`image ${ref}: ${JSON.stringify(digest)} is not a digest`);
  const [alg, encoded] = digest.split(":") as [string, string];
  const name = `blobs/${alg}/${encoded}`;
  let st;
  try {
    st = await stat(join(layout, name));
  } catch (err) {
    throw notFound(`image ${ref}: blob ${digest}: ${(err as Error).message}`);
  }
  if (!st.isFile()) throw bad(`image ${ref}: blob ${digest} is not a regular file`);
  return name;
}

async function pickManifest(layout: string, ref: string, index: Json, depth = 0): Promise<Json> {
  if (depth > 4) throw bad(`image ${ref}: indexes nested too deep`);
  const others: string[] = [];
  const unlabelled: Json[] = [];
  for (const d of Array.isArray(index["manifests"]) ? (index["manifests"] as unknown[]) : []) {
    if (!d || typeof d !== "object") continue;
    const desc = d as Json;
    const mt = String(desc["mediaType"] ?? "");
    const plat = desc["platform"] && typeof desc["platform"] === "object" ? (desc["platform"] as Json) : undefined;
    if (INDEX_TYPES.includes(mt)) {
      const child = await readJSON(join(layout, await blob(layout, ref, desc["digest"])), ref);
      try {
        return await pickManifest(layout, ref, child, depth + 1);
      } catch (err) {
        others.push(`(a nested index: ${(err as Error).message})`);
      }
    } else if (!MANIFEST_TYPES.includes(mt)) {
      continue;
    } else if (!plat) {
      unlabelled.push(desc);
    } else if (plat["os"] === "linux" && plat["architecture"] === "amd64") {
      return desc;
    } else if (plat["os"] !== "unknown") {
      // "unknown": buildx attestations
      others.push(`${String(plat["os"])}/${String(plat["architecture"])}`);
    }
  }
  if (unlabelled.length === 1 && others.length === 0) return unlabelled[0]!;
  if (others.length > 0) {
    throw bad(`image ${ref} has no linux/amd64 variant (it has: ${others.join(", ")}); Runtime runs linux/amd64 images only`);
  }
  if (unlabelled.length === 0) throw bad(`image ${ref}: the layout's index holds no image`);
  throw bad(`image ${ref}: the layout's index holds ${unlabelled.length} images without a platform; keep one`);
}

/**
 * Checks the OCI image layout dir and returns its linux/amd64 image as a
 * `docker save` tarball, a stream of chunks (the blobs are read as it is
 * consumed, never whole).
 */
async function ociLayoutArchive(dir: string, ref: string): Promise<AsyncGenerator<Uint8Array>> {
  try {
    await stat(join(dir, "oci-layout"));
  } catch {
    throw bad(
      `image ${ref}: ${dir} has no oci-layout file, so it is not an OCI image layout (make one with \`skopeo copy ... oci:DIR\` or \`crane pull --format=oci\`)`,
    );
  }
  const desc = await pickManifest(dir, ref, await readJSON(join(dir, "index.json"), ref));
  const manifest = await readJSON(join(dir, await blob(dir, ref, desc["digest"])), ref);
  const cfg = manifest["config"];
  if (!cfg || typeof cfg !== "object") throw bad(`image ${ref}: its manifest has no config`);
  const config = await blob(dir, ref, (cfg as Json)["digest"]);
  const layers: string[] = [];
  for (const l of Array.isArray(manifest["layers"]) ? (manifest["layers"] as unknown[]) : []) {
    layers.push(await blob(dir, ref, l && typeof l === "object" ? (l as Json)["digest"] : undefined));
  }
  if (layers.length === 0) throw bad(`image ${ref} has no layers`);
  const index = enc.encode(JSON.stringify([{ Config: config, RepoTags: [], Layers: layers }]));
  return (async function* () {
    yield* bytesEntry("manifest.json", index);
    for (const name of new Set([config, ...layers])) {
      const path = join(dir, name);
      yield* fileEntry(path, { name, type: "file", mode: 0o644, size: (await stat(path)).size, mtime: 0 });
    }
    yield tarEnd();
  })();
}

// -- build contexts ---------------------------------------------------------------

const REGEXP_SPECIAL = "\\^$.*+?()[]{}|/-";

/** A .dockerignore pattern as a regular expression (moby's patternmatcher's translation). */
function ignoreRegExp(p: string): RegExp {
  const cs = [...p];
  let re = "^";
  for (let i = 0; i < cs.length; i++) {
    const ch = cs[i]!;
    if (ch === "*" && cs[i + 1] === "*") {
      i++;
      if (cs[i + 1] === "/") i++;
      re += i + 1 === cs.length ? ".*" : "(.*/)?";
    } else if (ch === "*") {
      re += "[^/]*";
    } else if (ch === "?") {
      re += "[^/]";
    } else if (".+()|{}$".includes(ch)) {
      re += "\\" + ch;
    } else if (ch === "\\") {
      if (i + 1 < cs.length) {
        const next = cs[++i]!;
        re += REGEXP_SPECIAL.includes(next) ? "\\" + next : next;
      } else {
        re += "\\\\";
      }
    } else {
      re += ch;
    }
  }
  return new RegExp(re + "$");
}

/**
 * A .dockerignore's patterns, matched as Docker matches them: a path is
 * excluded when the last pattern that matches it or one of its parent
 * directories is not an exception ("!"). "*" matches within a path
 * element, "?" one character of it, "**" any number of elements, "[...]" a
 * class, and "\" escapes.
 */
class Dockerignore {
  readonly patterns: { re: RegExp; exception: boolean }[] = [];

  constructor(lines: string[]) {
    for (const line of lines) {
      if (line.startsWith("#")) continue;
      let p = line.trim();
      if (p === "") continue;
      const exception = p.startsWith("!");
      if (exception) {
        p = p.slice(1).trim();
        if (p === "") throw bad(`.dockerignore: ${JSON.stringify(line)} is an exception without a pattern`);
      }
      p = posix.normalize(p.split(sep).join("/"));
      if (p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
      if (p.length > 1 && p.startsWith("/")) p = p.slice(1);
      let re: RegExp;
      try {
        re = ignoreRegExp(p);
      } catch (err) {
        throw bad(`.dockerignore: bad pattern ${JSON.stringify(line)}: ${(err as Error).message}`);
      }
      this.patterns.push({ re, exception });
    }
  }

  static async read(dir: string): Promise<Dockerignore | undefined> {
    let text: string;
    try {
      text = await readFile(join(dir, ".dockerignore"), "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new WithRuntimeError(`withruntime: .dockerignore: ${(err as Error).message}`, { cause: err });
    }
    return new Dockerignore(text.replace(/^\uFEFF/, "").split(/\r?\n/));
  }

  get hasExceptions(): boolean {
    return this.patterns.some((p) => p.exception);
  }

  /** Whether the context path rel ("a/b") is left out. */
  excluded(rel: string): boolean {
    const parent = posix.dirname(rel);
    const parents = parent === "." ? [] : parent.split("/");
    let matched = false;
    for (const { re, exception } of this.patterns) {
      if (exception !== matched) continue;
      let match = re.test(rel);
      for (let i = 0; !match && i < parents.length; i++) match = re.test(parents.slice(0, i + 1).join("/"));
      if (match) matched = !exception;
    }
    return matched;
  }
}

/**
 * The build context as a tar stream, in lexical order: its regular files,
 * directories and symlinks with their modes, without owners, less what
 * ignore excludes (a directory excluded with no exceptions in the file is
 * not descended into), and the Dockerfile as dfName unless it is among them.
 */
async function* contextArchive(
  dir: string,
  ignore: Dockerignore | undefined,
  dfName: string,
  dockerfile: Uint8Array,
): AsyncGenerator<Uint8Array> {
  let saw = false;
  async function* walk(abs: string, prefix: string): AsyncGenerator<Uint8Array> {
    const names = (await readdir(abs)).sort();
    for (const name of names) {
      const rel = prefix + name;
      const path = join(abs, name);
      if (rel === CONTEXT_DOCKERFILE) continue; // the place of a Dockerfile from elsewhere
      const st = await lstat(path);
      if (rel !== dfName && ignore?.excluded(rel)) {
        if (st.isDirectory() && ignore.hasExceptions) yield* walk(path, rel + "/");
        continue;
      }
      const e: TarEntry = { name: rel, type: "file", mode: st.mode, size: 0, mtime: st.mtimeMs / 1000 };
      if (st.isDirectory()) {
        yield* tarHeader({ ...e, type: "dir", name: rel + "/" });
        yield* walk(path, rel + "/");
      } else if (st.isSymbolicLink()) {
        yield* tarHeader({ ...e, type: "symlink", linkname: await readlink(path) });
      } else if (st.isFile()) {
        saw = saw || rel === dfName;
        yield* fileEntry(path, { ...e, size: st.size });
      } // devices, sockets and FIFOs are left out
    }
  }
  yield* walk(dir, "");
  if (!saw) yield* bytesEntry(dfName, dockerfile);
  yield tarEnd();
}

