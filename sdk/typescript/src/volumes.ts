// Volumes behind Client: storage that outlives sandboxes, owned by the key
// that made it and named among its volumes (another key's is never found).
// A create mounts them (SandboxOptions.volumes); their size is a hard quota
// (a write past it fails inside with ENOSPC, NoSpaceError through the file
// API), counted in the key's disk quota and billed at the storage price.
// VolumeFiles reads and writes a volume's files without a sandbox, over the
// same routes as a sandbox's files under /v1/volumes/{name}.
import { FileTransfer } from "./files.js";
import type { FileData, ReadOptions } from "./files.js";
import type { CallOptions, HttpClient } from "./http.js";
import type { FileInfo, FileListPage, Schemas, VolumeInfo } from "./types.js";

/** The smallest volume, in MiB. */
export const MIN_VOLUME_MIB = 16;
/** The most volumes one sandbox mounts. */
export const MAX_VOLUME_MOUNTS = 8;

/** Options of VolumeFiles.listPage. */
export interface VolumeListPageOptions extends CallOptions {
  /** The most entries the page may hold (default 1000, at most 10000). */
  limit?: number;
  /** The next of the page before; absent for the first page. */
  cursor?: string;
}

const volumePath = (name: string) => `/v1/volumes/${encodeURIComponent(name)}`;

export function createVolume(c: HttpClient, name: string, sizeMiB: number, signal?: AbortSignal): Promise<VolumeInfo> {
  if (!Number.isSafeInteger(sizeMiB)) {
    throw new TypeError(`withruntime: a volume's size is a whole number of MiB (at least ${MIN_VOLUME_MIB}), not ${String(sizeMiB)}`);
  }
  return c.json<VolumeInfo>("POST", "/v1/volumes", { name, sizeMiB } satisfies Schemas["CreateVolumeRequest"], signal);
}

export async function listVolumes(c: HttpClient, signal?: AbortSignal): Promise<VolumeInfo[]> {
  const out = await c.json<Schemas["VolumeList"]>("GET", "/v1/volumes", undefined, signal);
  return out.volumes ?? [];
}

export function getVolume(c: HttpClient, name: string, signal?: AbortSignal): Promise<VolumeInfo> {
  return c.json<VolumeInfo>("GET", volumePath(name), undefined, signal);
}

export async function deleteVolume(c: HttpClient, name: string, signal?: AbortSignal): Promise<void> {
  await c.json("DELETE", volumePath(name), undefined, signal);
}

/**
 * The files of one volume, without a sandbox (client.volumeFiles(name)):
 * download (open, read, readFile, readText), upload (write, writeFile) and
 * list (list, listPage, entries: one directory, depth 1).
 *
 * Paths are the volume's: absolute from its root ("/"), or relative to it,
 * with the sandbox file API's rules (names of at most 255 bytes, paths of at
 * most 4095, no NUL). No path leaves the volume: a symbolic link on the way
 * that leads out of it (a sandbox may have left one) is refused with
 * BadRequestError on a download, and replaced, never written through, by an
 * upload. An upload is written beside the target and renamed over it; new
 * files are 0644 and, with the directories made for them, owned by the
 * sandbox user, as files a sandbox writes are. Sandboxes that mount the
 * volume see an upload at once. There is no stat, mkdir or remove: the API
 * has no such routes for volumes (do those in a sandbox that mounts it).
 *
 * Errors: NotFoundError (no such volume of this key, or no such file),
 * BadRequestError (a directory where a file is wanted, or the reverse; a
 * path that leaves the volume), ConflictError (the volume is being created
 * or deleted, or is damaged), TooLargeError (over the server's upload cap),
 * NoSpaceError (the volume is full: nothing was written),
 * RangeNotSatisfiableError (a read from at or past a file's end),
 * UnsupportedError (the server keeps no volumes).
 */
export class VolumeFiles extends FileTransfer {
  /** The volume's name. */
  readonly name: string;

  /** Use client.volumeFiles(name). */
  constructor(client: HttpClient, name: string) {
    super(client, volumePath(name));
    this.name = name;
  }

  /** Lists a directory of the volume ("" for its root): its direct children, by name, every one (following the server's pages), with their paths in the volume. Symbolic links are listed, not followed. */
  list(path = "", opts: CallOptions = {}): Promise<FileInfo[]> {
    return this.listAll(path || "/", opts);
  }

  /** One page of a directory's listing: at most opts.limit entries, from the start or, with opts.cursor (the next of the page before), after the page before. */
  listPage(path = "", opts: VolumeListPageOptions = {}): Promise<FileListPage> {
    return this.page(path || "/", opts);
  }

  /** Every entry of a directory's listing (as list), fetched a page at a time as the iteration goes (for await). */
  entries(path = "", opts: CallOptions = {}): AsyncGenerator<FileInfo, void, undefined> {
    return this.walk(path || "/", opts);
  }
}

// Re-exported for the docs of VolumeFiles's inherited methods.
export type { FileData, ReadOptions };
