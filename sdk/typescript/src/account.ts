// The server's account-level calls behind Client: stored secrets, API keys
// and metered usage. Each is a request through the HTTP core; the bodies
// and answers are the schemas of api/openapi.yaml.
import type { CallOptions, HttpClient } from "./http.js";
import type { GroupBy, KeyInfo, Schemas, SecretInfo, UsageReport } from "./types.js";

/**
 * Selects a usage report (Client.usage). Absent fields take the server's
 * defaults: the last 30 days (from midnight UTC), grouped by day.
 */
export interface UsageQuery extends CallOptions {
  /**
   * Start of the window, exclusive: a Date, or a string the server parses
   * (RFC 3339, or YYYY-MM-DD for that UTC day's midnight). Default 30 days
   * before `to`, at midnight UTC.
   */
  from?: Date | string;
  /**
   * End of the window, inclusive: a Date, or an RFC 3339 string, or
   * YYYY-MM-DD (through the end of that UTC day). Default now.
   */
  to?: Date | string;
  /** "day" (the default), "sandbox" or "key". */
  groupBy?: GroupBy;
}

/** Options of Client.createKey. */
export interface CreateKeyOptions extends CallOptions {
  /**
   * Cap on what the key's sandboxes may cost per UTC day, in micro-dollars
   * (1 USD = 1,000,000); absent or 0: no limit.
   */
  dailyLimitMicros?: number;
  /**
   * Cap, in MiB, on the host disk the key's sandboxes hold (running and
   * paused sandboxes' diskMiB plus pause images); absent or 0: the server's
   * default for a key with a daily limit, none for an administrator's key.
   */
  diskQuotaMiB?: number;
  /** Cap on how many of the key's sandboxes may be paused at once; absent or 0: as diskQuotaMiB. */
  pausedQuota?: number;
  /** Cap on how many sandboxes the key may hold at once, starting, running and paused together; absent or 0: as diskQuotaMiB. */
  sandboxesQuota?: number;
}

function when(v: Date | string): string {
  return v instanceof Date ? v.toISOString() : v;
}

export function setSecret(c: HttpClient, name: string, value: string, hosts: string[], signal?: AbortSignal): Promise<SecretInfo> {
  const body: Schemas["CreateSecretRequest"] = { name, value, hosts };
  return c.json<SecretInfo>("POST", "/v1/secrets", body, signal);
}

export async function listSecrets(c: HttpClient, signal?: AbortSignal): Promise<SecretInfo[]> {
  return (await c.json<Schemas["SecretList"]>("GET", "/v1/secrets", undefined, signal)).secrets;
}

export async function deleteSecret(c: HttpClient, name: string, signal?: AbortSignal): Promise<void> {
  await c.json<void>("DELETE", `/v1/secrets/${encodeURIComponent(name)}`, undefined, signal);
}

export function createKey(c: HttpClient, name: string, opts: CreateKeyOptions): Promise<KeyInfo & { secret: string }> {
  const body: Schemas["CreateKeyRequest"] = { name };
  if (opts.dailyLimitMicros) body.dailyLimitMicros = opts.dailyLimitMicros;
  if (opts.diskQuotaMiB) body.diskQuotaMiB = opts.diskQuotaMiB;
  if (opts.pausedQuota) body.pausedQuota = opts.pausedQuota;
  if (opts.sandboxesQuota) body.sandboxesQuota = opts.sandboxesQuota;
  return c.json<KeyInfo & { secret: string }>("POST", "/v1/keys", body, opts.signal);
}

export async function listKeys(c: HttpClient, signal?: AbortSignal): Promise<KeyInfo[]> {
  return (await c.json<Schemas["KeyList"]>("GET", "/v1/keys", undefined, signal)).keys;
}

export async function revokeKey(c: HttpClient, id: string, signal?: AbortSignal): Promise<void> {
  await c.json<void>("DELETE", `/v1/keys/${encodeURIComponent(id)}`, undefined, signal);
}

export function usageReport(c: HttpClient, query: UsageQuery): Promise<UsageReport> {
  const q = new URLSearchParams();
  if (query.from !== undefined && query.from !== "") q.set("from", when(query.from));
  if (query.to !== undefined && query.to !== "") q.set("to", when(query.to));
  if (query.groupBy) q.set("groupBy", query.groupBy);
  const qs = q.toString();
  return c.json<UsageReport>("GET", "/v1/usage" + (qs ? "?" + qs : ""), undefined, query.signal);
}
