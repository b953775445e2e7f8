// Device login (RFC 8628), as `withruntime login` does it: the server
// answers a device code and a user code; the user has an administrator
// approve the code in the server's dashboard; the poll that follows gets a
// new API key, which is saved in the CLI's config file (0600, written
// atomically) where every SDK finds it.

import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname, userInfo } from "node:os";
import { dirname, join } from "node:path";

import { configFilePath, ENV_API_KEY, ENV_URL } from "./http.js";
import { WithRuntimeError } from "./errors.js";
import type { Schemas } from "./types.js";

/** Where `withruntime serve` listens by default. */
export const DEFAULT_SERVER_URL = "http://127.0.0.1:7780";

/** The saved connection: the config file's contents. */
export interface SavedConnection {
  url: string;
  apiKey: string;
}

/** An error answer's body, its fields unchecked (the answer to a poll may be either). */
type ErrorBody = Partial<Schemas["Error"]>;

function readConfigFile(): Partial<SavedConnection> | undefined {
  const path = configFilePath();
  if (!path) return undefined;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Partial<SavedConnection>;
  } catch {
    return undefined;
  }
}

/** Whether a server and key are configured without logging in (both env variables, or a config file with both). */
export function configured(): boolean {
  if (process.env[ENV_URL] && process.env[ENV_API_KEY]) return true;
  const fc = readConfigFile();
  return typeof fc?.url === "string" && fc.url !== "" && typeof fc.apiKey === "string" && fc.apiKey !== "";
}

/** The server to log in to: WITHRUNTIME_URL, the config file's, or the default address. */
export function loginURL(): string {
  const env = process.env[ENV_URL];
  if (env) return env;
  const fc = readConfigFile();
  if (typeof fc?.url === "string" && fc.url !== "") return fc.url;
  return DEFAULT_SERVER_URL;
}

async function post<T>(url: string, body: unknown, signal?: AbortSignal): Promise<{ status: number; body: T & ErrorBody }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  return { status: res.status, body: (await res.json()) as T & ErrorBody };
}

/**
 * Logs in to baseURL by device login, printing the link and the code with
 * log, and saves the new key in the config file. Throws when the code is
 * refused or expires.
 */
export async function deviceLogin(
  baseURL: string,
  opts: { trial?: boolean; log?: (line: string) => void; signal?: AbortSignal } = {},
): Promise<SavedConnection> {
  const base = baseURL.replace(/\/+$/, "");
  if (!/^https?:\/\//.test(base)) throw new WithRuntimeError(`withruntime: server URL ${JSON.stringify(baseURL)} must start with http:// or https://`);
  const path = configFilePath();
  if (!path) throw new WithRuntimeError("withruntime: no config directory to save the key in: set HOME or XDG_CONFIG_HOME");
  const log = opts.log ?? ((line: string) => process.stderr.write(line + "\n"));
  let user = "someone";
  try {
    user = userInfo().username;
  } catch {
    // no user name: keep the placeholder
  }
  const authorize: Schemas["DeviceAuthorizeRequest"] = { clientName: `${user}@${hostname()}`.slice(0, 100), trial: !!opts.trial };
  const auth = await post<Schemas["DeviceAuthorization"]>(base + "/v1/device/authorize", authorize, opts.signal);
  if (auth.status !== 200) {
    throw new WithRuntimeError(`withruntime: login to ${base}: ${auth.body.error?.message ?? "HTTP " + auth.status}`);
  }
  const g = auth.body;
  log(`To use ${base}, open\n\n    ${g.verificationUriComplete}\n\nand have an administrator approve the code ${g.userCode} (it expires in ${Math.round(g.expiresIn / 60)} min).\nWaiting for approval...`);
  let interval = Math.max(g.interval, 1) * 1000;
  const deadline = Date.now() + g.expiresIn * 1000;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, interval));
    opts.signal?.throwIfAborted();
    const poll: Schemas["DeviceTokenRequest"] = { deviceCode: g.deviceCode };
    const tok = await post<Schemas["DeviceToken"]>(base + "/v1/device/token", poll, opts.signal);
    if (tok.status === 200) {
      const saved = { url: base, apiKey: tok.body.apiKey };
      writeConfig(path, saved);
      const trial = tok.body.trialHours ? `, a trial of ${tok.body.trialHours} sandbox-hours` : "";
      log(`Logged in to ${base} with key ${tok.body.keyName} (${tok.body.keyId})${trial}; saved in ${path}`);
      return saved;
    }
    const code = tok.body.error?.code;
    if (code === "authorization_pending") continue;
    if (code === "slow_down") {
      interval += 5000;
      continue;
    }
    if (code === "access_denied") throw new WithRuntimeError(`withruntime: login refused: an administrator denied the code ${g.userCode}`);
    if (Date.now() > deadline || code) throw new WithRuntimeError(`withruntime: login: ${tok.body.error?.message ?? "HTTP " + tok.status}`);
  }
}

/** Replaces the config file atomically: a 0600 temporary file in the same (0700) directory, renamed over it. */
function writeConfig(path: string, saved: SavedConnection): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = join(dirname(path), `.config-${process.pid}-${Date.now()}.json`);
  try {
    writeFileSync(tmp, JSON.stringify(saved, null, 2) + "\n", { mode: 0o600, flag: "wx" });
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // already renamed or never written
    }
    throw err;
  }
}
