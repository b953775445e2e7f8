import type { CallOptions, Client } from "./client.js";
import type { FileInfo } from "./types.js";

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

/** Options of Files.list. */
export interface ListOptions extends CallOptions {
  /** How many levels to list: 1 (the default) lists the direct children; at most 10. */
  depth?: number;
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
 * The file API of one sandbox (sandbox.files). Paths are absolute inside the
 * sandbox, or relative to /workspace. Errors: NotFoundError (no such file or
 * parent), BadRequestError (a directory where a file is wanted, or the
 * reverse; a path with NUL), ConflictError (the destination exists),
 * TooLargeError (over the server's upload cap), NoSpaceError, and
 * LeaseEndedError / SandboxStoppedError.
 */
export class Files {
  readonly #c: Client;
  readonly #base: string;

  /** Use sandbox.files. */
  constructor(client: Client, sandboxPath: string) {
    this.#c = client;
    this.#base = sandboxPath;
  }

  #query(route: string, path: string, extra: Record<string, string> = {}): string {
    return `${this.#base}/files${route}?${new URLSearchParams({ path, ...extra }).toString()}`;
  }

  /**
   * Streams a regular file's content, without holding it whole. Read the
   * stream to its end or cancel it.
   */
  async open(path: string, opts: CallOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.#c.request("GET", this.#query("", path), { accept: "application/octet-stream", signal: opts.signal });
    return resp.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  }

  /** Copies a regular file's content into dest, streamed, and returns the number of bytes copied. */
  async read(path: string, dest: WritableStream<Uint8Array>, opts: CallOptions = {}): Promise<number> {
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

  /** A regular file's whole content, as bytes. */
  async readFile(path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    const resp = await this.#c.request("GET", this.#query("", path), { accept: "application/octet-stream", signal: opts.signal });
    return new Uint8Array(await resp.arrayBuffer());
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
    const resp = await this.#c.request("PUT", this.#query("", path), {
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

  /**
   * Lists a directory ("" for /workspace) down to opts.depth levels (default
   * 1: its direct children), sorted by path. Symlinked directories are
   * listed but not descended into.
   */
  async list(path = "", opts: ListOptions = {}): Promise<FileInfo[]> {
    const depth = Math.max(1, Math.trunc(opts.depth ?? 1));
    const out = await this.#c.json<{ entries: FileInfo[] }>(
      "GET",
      this.#query("/list", path, { depth: String(depth) }),
      undefined,
      opts.signal,
    );
    return out.entries;
  }

  /** Describes one path (a symlink itself, not its target). */
  stat(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.#c.json<FileInfo>("GET", this.#query("/stat", path), undefined, opts.signal);
  }

  /** Removes a file, a symlink or an empty directory. */
  async remove(path: string, opts: CallOptions = {}): Promise<void> {
    await this.#c.json("DELETE", this.#query("", path), undefined, opts.signal);
  }

  /** Removes path and, if it is a directory, everything in it. The server refuses / and /workspace themselves. */
  async removeAll(path: string, opts: CallOptions = {}): Promise<void> {
    await this.#c.json("DELETE", this.#query("", path, { recursive: "true" }), undefined, opts.signal);
  }

  /** Creates one directory owned by the sandbox user; its parent must exist. */
  mkdir(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.#c.json<FileInfo>("POST", `${this.#base}/files/mkdir`, { path }, opts.signal);
  }

  /** Creates a directory and any missing parents, like mkdir -p; an existing directory is not an error. */
  mkdirAll(path: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.#c.json<FileInfo>("POST", `${this.#base}/files/mkdir`, { path, parents: true }, opts.signal);
  }

  /** Moves from to to, replacing to if it is a file and creating its missing parents, and returns to's description. */
  rename(from: string, to: string, opts: CallOptions = {}): Promise<FileInfo> {
    return this.#c.json<FileInfo>("POST", `${this.#base}/files/rename`, { from, to }, opts.signal);
  }
}
