// Snapshots and fork behind Client and Sandbox: a running sandbox saved
// whole (memory, processes, files) while it runs on after a brief pause,
// from which new sandboxes start (SandboxOptions.snapshot); fork is one
// snapshot and count sandboxes from it. A snapshot belongs to the key that
// took it (another tenant key's is not found); its bytes count in the
// key's disk quota and are billed at the storage price until it is
// deleted. Each call is a request through the HTTP core; the bodies and
// answers are the schemas of api/openapi.yaml. Sandbox handles for a
// fork's sandboxes are made in sandbox.ts, which imports this module.
import type { CallOptions, HttpClient } from "./http.js";
import type { NetworkPolicy, Schemas, SnapshotInfo } from "./types.js";
import { CHECKPOINT_WAIT, BOOT_WAIT } from "./wait.js";

/** The most sandboxes one fork makes. */
export const MAX_FORK_COUNT = 32;

/** Options of Sandbox.snapshot. Every field is optional. */
export interface SnapshotOptions extends CallOptions {
  /**
   * Names the snapshot among the key's own (1 to 63 lower-case letters,
   * digits, '.', '_', '-', starting with a letter or digit; unique per key),
   * so that a create may give it instead of the id.
   */
  name?: string;
  /** "full" (the default: memory, processes and files) or "filesystem" (the root filesystem's files alone, taken while the sandbox runs on; a sandbox made from it boots fresh with them). */
  mode?: Schemas["CreateSnapshotRequest"]["mode"];
}

/**
 * Options of Sandbox.fork: what each new sandbox gets, as in SandboxOptions
 * (its template and disk are the source's), and whether the fork's
 * snapshot is kept.
 */
export interface ForkOptions extends CallOptions {
  /** Each new sandbox's lease, in seconds (default 300). */
  timeoutSeconds?: number;
  /** vCPUs of each (default: the source's). */
  cpu?: number;
  /** Memory of each in MiB, at least the source's (default: the source's). */
  memoryMiB?: number;
  /** Added to the environment of commands started in each new sandbox; processes already running keep theirs. */
  env?: Record<string, string>;
  /** Each new sandbox's labels. */
  metadata?: Record<string, string>;
  /** Each new sandbox's network policy (default `{ internet: false }`: the source's is not inherited). */
  network?: NetworkPolicy;
  /** Stored secrets each new sandbox may use, as in a create (the source's are not inherited). */
  secrets?: string[];
  /** Refuse each new sandbox whose first lease could cost more, in micro-dollars. */
  maxCostMicros?: number;
  /** What each new sandbox's lease end does: "stop" (default) or "pause". */
  onLeaseEnd?: Schemas["ForkRequest"]["onLeaseEnd"];
  /** As in SandboxOptions. */
  autoResume?: boolean;
  /** What each new sandbox's lease-end pause saves, as in SandboxOptions. */
  pauseMode?: Schemas["ForkRequest"]["pauseMode"];
  /**
   * What the fork's snapshot holds: "full" (default: each new sandbox starts
   * where the source was) or "filesystem" (its files alone: each new
   * sandbox boots fresh with them, with at least twice their size plus
   * 128 MiB of memory).
   */
  mode?: Schemas["ForkRequest"]["mode"];
  /** Keep the fork's snapshot afterwards (then the key's, billed and counted as any); by default the server deletes it once the sandboxes are made. */
  keepSnapshot?: boolean;
  /** Names the kept snapshot (only with keepSnapshot). */
  name?: string;
}

/** The server's answer to a fork (Sandbox.fork gives it as a ForkResult, with handles). (Schema `ForkResult`.) */
export type ForkAnswer = Schemas["ForkResult"];

/** Options of Client.snapshots. */
export interface SnapshotListOptions extends CallOptions {
  /** Only the snapshots taken of this sandbox. */
  sourceSandboxId?: string;
}

const snapshotPath = (ref: string) => `/v1/snapshots/${encodeURIComponent(ref)}`;

export function takeSnapshot(c: HttpClient, sandboxPath: string, opts: SnapshotOptions): Promise<SnapshotInfo> {
  const body: Schemas["CreateSnapshotRequest"] = {};
  if (opts.name) body.name = opts.name;
  if (opts.mode) body.mode = opts.mode;
  return c.json<SnapshotInfo>("POST", sandboxPath + "/snapshots", body, opts.signal, CHECKPOINT_WAIT);
}

export function fork(c: HttpClient, sandboxPath: string, count: number, opts: ForkOptions): Promise<ForkAnswer> {
  const req: Schemas["ForkRequest"] = { count };
  if (opts.timeoutSeconds !== undefined) req.timeoutSeconds = opts.timeoutSeconds;
  if (opts.cpu !== undefined) req.cpu = opts.cpu;
  if (opts.memoryMiB !== undefined) req.memoryMiB = opts.memoryMiB;
  if (opts.env !== undefined) req.env = opts.env;
  if (opts.metadata !== undefined) req.metadata = opts.metadata;
  if (opts.network !== undefined) req.network = opts.network;
  if (opts.secrets !== undefined && opts.secrets.length > 0) req.secrets = opts.secrets;
  if (opts.maxCostMicros) req.maxCostMicros = opts.maxCostMicros;
  if (opts.onLeaseEnd !== undefined) req.onLeaseEnd = opts.onLeaseEnd;
  if (opts.autoResume !== undefined) req.autoResume = opts.autoResume;
  if (opts.pauseMode !== undefined) req.pauseMode = opts.pauseMode;
  if (opts.mode !== undefined) req.mode = opts.mode;
  if (opts.keepSnapshot) req.keepSnapshot = true;
  if (opts.name) req.name = opts.name;
  return c.json<ForkAnswer>("POST", sandboxPath + "/fork", req, opts.signal, CHECKPOINT_WAIT + BOOT_WAIT);
}

export async function listSnapshots(c: HttpClient, opts: SnapshotListOptions): Promise<SnapshotInfo[]> {
  const qs = opts.sourceSandboxId ? "?" + new URLSearchParams({ sourceSandboxId: opts.sourceSandboxId }).toString() : "";
  const out = await c.json<Schemas["SnapshotList"]>("GET", "/v1/snapshots" + qs, undefined, opts.signal);
  return out.snapshots ?? [];
}

export function getSnapshot(c: HttpClient, ref: string, signal?: AbortSignal): Promise<SnapshotInfo> {
  return c.json<SnapshotInfo>("GET", snapshotPath(ref), undefined, signal);
}

export async function deleteSnapshot(c: HttpClient, ref: string, signal?: AbortSignal): Promise<void> {
  await c.json("DELETE", snapshotPath(ref), undefined, signal);
}
