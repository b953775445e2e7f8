import type { CallOptions, HttpClient } from "./http.js";
import { RangeNotSatisfiableError, WithRuntimeError } from "./errors.js";
import type { FileInfo, FileListPage, FileURL, Schemas } from "./types.js";
import { watch, type FileWatch, type WatchOptions } from "./watch.js";

/** A listing page's entry count when ListPageOptions.limit is not given. */
export const DEFAULT_LIST_LIMIT = 1000;
/** The largest ListPageOptions.limit. */
export const MAX_LIST_LIMIT = 10000;
/** About the most entry JSON Files.list holds (the pages come from inside the sandbox). */
const MAX_LIST_BYTES = 256 * 1024 * 1024;

/**
 * What a file can be written from: text (written as UTF-8), bytes, a Blob,
 * or a stream of bytes (a web ReadableStream, or an async iterable such as
 * a Node Readable), which is uploaded as it is read.
 */
export type FileData =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array | string>;

/** Options of Files.list and Files.entries. */
export interface ListOptions extends CallOptions {
  /** How many levels to list: 1 (the default) lists the direct children; at most 10. */
  depth?: number;
}

/** Options of Files.listPage. */
export interface ListPageOptions extends ListOptions {
  /** The most entries the page may hold (default 1000, at most 10000); a page may hold fewer. */
  limit?: number;
  /** The next of the page before; absent for the first page. */
  cursor?: string;
}

/** Options of Files.open, read and readFile: a part of the file. */
export interface ReadOptions extends CallOptions {
  /** The first byte to read (default 0). */
  offset?: number;
  /** How many bytes to read (default: to the end). */
  length?: number;
}

/** The Range header of a read of opts.length bytes from opts.offset; none for the whole file. */
function rangeHeader(path: string, opts: ReadOptions): Record<string, string> {
  const offset = opts.offset ?? 0;
  const length = opts.length;
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`withruntime: reading ${path}: offset ${offset} is not a byte offset from 0`);
  }
  if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) {
    throw new RangeError(`withruntime: reading ${path}: length ${length} is not a byte count from 0`);
  }
  if (offset === 0 && length === undefined) return {};
  // A length of 0 still asks for one byte (a range cannot be empty); none of it is given.
  const last = length === undefined ? "" : String(offset + Math.max(length, 1) - 1);
  return { Range: `bytes=${offset}-${last}` };
}

/** body without its first skip bytes, cut after limit bytes (undefined: no cut). */
function trimStream(body: ReadableStream<Uint8Array>, skip: number, limit: number | undefined): ReadableStream<Uint8Array> {
  if (skip === 0 && limit === undefined) return body;
  let left = limit;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (skip > 0) {
          if (chunk.byteLength <= skip) {
            skip -= chunk.byteLength;
            return;
          }
          chunk = chunk.subarray(skip);
          skip = 0;
        }
        if (left !== undefined) {
          if (left <= 0) return;
          if (chunk.byteLength > left) chunk = chunk.subarray(0, left);
          left -= chunk.byteLength;
        }
        if (chunk.byteLength > 0) controller.enqueue(chunk);
      },
    }),
  );
}

function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({ start: (c) => c.close() });
}

function toBody(data: FileData): NonNullable<RequestInit["body"]> {
  if (typeof data === "string" || data instanceof Blob || data instanceof ReadableStream) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (data instanceof Uint8Array) return data;
  // An async iterable: pull from it as the upload goes, so that a large
  // source is never held whole.
  const it = data[Symbol.asyncIterator]();
  const enc = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await it.next();
      if (done) controller.close();
      else controller.enqueue(typeof value === "string" ? enc.encode(value) : value);
    },
    async cancel(reason) {
      await it.return?.(reason);
    },
  });
}

/**
 * Downloads, uploads and listings over a file API: a sandbox's (Files) or a
 * volume's (VolumeFiles), whose routes are the same under their API path
 * (`.../files`, `.../files/list`).
 */
export class FileTransfer {
  protected readonly c: HttpClient;
  protected readonly base: string;

  /** Use sandbox.files or client.volumeFiles(name). */
  constructor(client: HttpClient, base: string) {
    this.c = client;
    this.base = base;
  }

  protected query(route: string, path: string, extra: Record<string, string> = {}): string {
    return `${this.base}/files${route}?${new URLSearchParams({ path, ...extra }).toString()}`;
  }

  /** Whether offset is the size of the file at path: a read from there gives nothing rather than RangeNotSatisfiableError. */
  protected atEnd(_path: string, _offset: number, _opts: CallOptions): Promise<boolean> {
    return Promise.resolve(false);
  }

  /** The listing's query, less path (Files adds depth). */
  protected listQuery(opts: ListPageOptions): Record<string, string> {
    const q: Record<string, string> = {};
    if (opts.limit !== undefined) q["limit"] = String(Math.trunc(opts.limit));
    if (opts.cursor) q["cursor"] = opts.cursor;
    return q;
  }

  /**
   * Streams a regular file's content, without holding it whole: all of it,
   * or opts.length bytes from opts.offset, asked for with a Range request, so
   * an interrupted download resumes where it stopped. An offset at the end
   * gives an empty stream; one past it throws RangeNotSatisfiableError. A
   * file the server sends whole (one that reports size 0, such as those in
   * /proc) has its first offset bytes skipped here, so the bytes are the same
   * either way. Read the stream to its end or cancel it.
   */
  async open(path: string, opts: ReadOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const offset = opts.offset ?? 0;
    const headers = rangeHeader(path, opts);
    let resp: Response;
    try {
      resp = await this.c.request("GET", this.query("", path), { accept: "application/octet-stream", signal: opts.signal, headers });
    } catch (err) {
      if (err instanceof RangeNotSatisfiableError && offset > 0 && (await this.atEnd(path, offset, opts))) {
        return emptyStream(); // at the end: nothing left
      }
      throw err;
    }
    const body = resp.body ?? emptyStream();
    if (resp.status === 206) {
      const cr = resp.headers.get("Content-Range") ?? "";
      const m = /^bytes (\d+)-/.exec(cr);
      if (!m || Number(m[1]) !== offset) {
        await body.cancel();
        throw new WithRuntimeError(`withruntime: reading ${path}: the answer holds ${JSON.stringify(cr)}, not bytes from ${offset}`);
      }
      return trimStream(body, 0, opts.length);
    }
    return trimStream(body, offset, opts.length);
  }

  /** Copies a regular file's content (or a part of it: opts.offset, opts.length) into dest, streamed, and returns the number of bytes copied. */
  async read(path: string, dest: WritableStream<Uint8Array>, opts: ReadOptions = {}): Promise<number> {
    const src = await this.open(path, opts);
    let n = 0;
    const count = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        n += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    await src.pipeThrough(count).pipeTo(dest, opts.signal ? { signal: opts.signal } : {});
    return n;
  }

  /** A regular file's whole content (or a part of it: opts.offset, opts.length), as bytes. */
  async readFile(path: string, opts: ReadOptions = {}): Promise<Uint8Array> {
    if (opts.offset === undefined && opts.length === undefined) {
      const resp = await this.c.request("GET", this.query("", path), { accept: "application/octet-stream", signal: opts.signal });
      return new Uint8Array(await resp.arrayBuffer());
    }
    return new Uint8Array(await new Response(await this.open(path, opts)).arrayBuffer());
  }

  /** A regular file's whole content, decoded as UTF-8 text. */
  async readText(path: string, opts: CallOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path, opts));
  }

  /**
   * Writes data to the file at path, creating missing parent directories,
   * and returns the file's new description. Streams are uploaded as they
   * are read. The file is written under a temporary name and renamed into
   * place, so a failed upload leaves nothing behind. A new file is mode 0644
   * and owned by the sandbox user; a replaced one keeps its mode and owner.
   */
  async write(path: string, data: FileData, opts: CallOptions = {}): Promise<FileInfo> {
    const resp = await this.c.request("PUT", this.query("", path), {
      body: toBody(data),
      contentType: "application/octet-stream",
      accept: "application/json",
      signal: opts.signal,
    });
    return (await resp.json()) as FileInfo;
  }

  /** Writes text or bytes to the file at path (see write). */
  writeFile(path: string, data: string | Uint8Array, opts: CallOptions = {}): Promise<FileInfo> {
    return this.write(path, data, opts);
  }

  /** Every entry of a listing, following its pages (list). */
  protected async listAll(path: string, opts: ListOptions): Promise<FileInfo[]> {
    const out: FileInfo[] = [];
    let cursor: string | undefined;
    let read = 0;
    for (;;) {
      const page = await this.page(path, { ...opts, limit: MAX_LIST_LIMIT, cursor });
      out.push(...page.entries);
      if (!page.truncated) return out;
      for (const e of page.entries) read += e.path.length + e.name.length + (e.target?.length ?? 0) + 128;
      if (read > MAX_LIST_BYTES) {
        throw new WithRuntimeError(`withruntime: listing ${path}: over ${out.length} entries, more than list holds; walk it with entries`);
      }
      cursor = page.next;
    }
  }

  /** One page of a listing (listPage). */
  protected async page(path: string, opts: ListPageOptions): Promise<FileListPage> {
    const page = await this.c.json<FileListPage>("GET", this.query("/list", path, this.listQuery(opts)), undefined, opts.signal);
    page.entries ??= [];
    if (page.truncated && (page.entries.length === 0 || !page.next || page.next === opts.cursor)) {
      throw new WithRuntimeError(
        `withruntime: listing ${path}: a page that does not move the listing forward (was the sandbox's agent replaced from inside?)`,
      );
    }
    return page;
  }

  /** Every entry of a listing, a page at a time as the iteration goes (entries). */
  protected async *walk(path: string, opts: ListOptions): AsyncGenerator<FileInfo, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.page(path, { ...opts, limit: MAX_LIST_LIMIT, cursor });
      yield* page.entries;
      if (!page.truncated) return;
      cursor = page.next;
    }
  }
}

/**
 * The file API of one sandbox (sandbox.files). Paths are absolute inside the
 * sandbox, or relative to /workspace. Errors: NotFoundError (no such file or
 * parent), BadRequestError (a directory where a file is wanted, or the
 * reverse; a path with NUL), ConflictError (the destination exists),
 * TooLargeError (over the server's upload cap), NoSpaceError, and
 * LeaseEndedError / SandboxStoppedError.
 */
export class Files extends FileTransfer {
  protected override async atEnd(path: string, offset: number, opts: CallOptions): Promise<boolean> {
    return (await this.stat(path, opts)).size === offset;
  }

  protected override listQuery(opts: ListPageOptions): Record<string, string> {
    return { depth: String(Math.max(1, Math.trunc(opts.depth ?? 1))), ...super.listQuery(opts) };
  }

  /**
   * Lists a directory ("" for /workspace) down to opts.depth levels (default
   * 1: its direct children), every entry, in listing order: by path compared
   * one component at a time (a directory, then its contents, then its next
   * sibling; at depth 1, by name). Symlinked directories are listed but not
   * descended into. It follows the server's pages (listPage) to the last,
   * holding at most about 256 MiB of entries; walk a larger listing with
   * entries.
   */
  list(path = "", opts: ListOptions = {}): Promise<FileInfo[]> {
    return this.listAll(path, opts);
  }

  /**
   * One page of a directory's listing: at most opts.limit entries (default
   * 1000, at most 10000), from the start or, with opts.cursor (the next of
   * the page before), strictly after the page before; so an entry present
   * from the first page to the last is listed exactly once. Throws
   * BadRequestError for a cursor no listing gave, a depth or limit out of
   * range, or a path that is not a directory.
   */
  listPage(path = "", opts: ListPageOptions = {}): Promise<FileListPage> {
    return this.page(path, opts);
  }

  /**
   * Every entry of a directory's listing (as list), fetched a page of 10000
   * at a time as the iteration goes (for await), so a directory of any size
   * is walked in bounded memory.
   */
  entries(path = "", opts: ListOptions = {}): AsyncGenerator<FileInfo, void, undefined> {
    return this.walk(path, opts);
  }

  /** Describes one path (a symlink itself, not its target). */
  stat(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.c.json<FileInfo>("GET", this.query("/stat", path), undefined, opts.signal);
  }

  /**
   * A URL that reads (operation "read": GET) or writes ("write": PUT the
   * bytes) path with no API key, as this key, for expiresInSeconds (default
   * 3600, at most 7 days). It stops working when it expires, when the
   * sandbox stops, or when the key is revoked; changing any part of it voids
   * it. Throws BadRequestError, NotFoundError, SandboxStoppedError.
   */
  signedUrl(path: string, opts: { operation?: "read" | "write"; expiresInSeconds?: number } & CallOptions = {}): Promise<FileURL> {
    const body: Schemas["FileURLRequest"] = { path, operation: opts.operation ?? "read" };
    if (opts.expiresInSeconds) body.expiresInSeconds = opts.expiresInSeconds;
    return this.c.json<FileURL>("POST", `${this.base}/files/url`, body, opts.signal);
  }

  /** Removes a file, a symlink or an empty directory. */
  async remove(path: string, opts: CallOptions = {}): Promise<void> {
    await this.c.json("DELETE", this.query("", path), undefined, opts.signal);
  }

  /** Removes path and, if it is a directory, everything in it. The server refuses / and /workspace themselves. */
  async removeAll(path: string, opts: CallOptions = {}): Promise<void> {
    await this.c.json("DELETE", this.query("", path, { recursive: "true" }), undefined, opts.signal);
  }

  /** Creates one directory owned by the sandbox user; its parent must exist. */
  mkdir(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.c.json<FileInfo>("POST", `${this.base}/files/mkdir`, { path } satisfies Schemas["MkdirRequest"], opts.signal);
  }

  /** Creates a directory and any missing parents, like mkdir -p; an existing directory is not an error. */
  mkdirAll(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.c.json<FileInfo>("POST", `${this.base}/files/mkdir`, { path, parents: true } satisfies Schemas["MkdirRequest"], opts.signal);
  }

  /** Moves from to to, replacing to if it is a file and creating its missing parents, and returns to's description. */
  rename(from: string, to: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.c.json<FileInfo>("POST", `${this.base}/files/rename`, { from, to } satisfies Schemas["RenameRequest"], opts.signal);
  }

  /**
   * Watches the directory path (absolute, or relative to /workspace; "" for
   * /workspace) and, with opts.recursive, every directory under it, and
   * resolves once the watch is in place: every change made after that is
   * reported, however short-lived (a file created and removed at once is a
   * create and a remove), from inotify inside the sandbox. A rename within
   * the watch is one event with oldPath and path. Events wait in a queue of
   * WATCH_QUEUE_EVENTS on the server for a client that reads slowly; past it
   * an "overflow" event says how many were dropped. Changes another sandbox
   * makes to a shared volume are not seen.
   *
   * ```ts
   * await using w = await sbx.files.watch("src", { recursive: true });
   * for await (const ev of w) {
   *   if (ev.type === "rename") console.log(ev.oldPath, "->", ev.path);
   * }
   * ```
   *
   * Stop it with close(), `await using`, leaving the loop, or opts.signal
   * (see FileWatch). Throws NotFoundError (no such directory),
   * BadRequestError (not a directory; a recursive tree of more than 8192
   * directories), LeaseEndedError / SandboxStoppedError.
   */
  watch(path = "", opts: WatchOptions = {}): Promise<FileWatch> {
    return watch(this.c, this.base, path, opts);
  }
}
