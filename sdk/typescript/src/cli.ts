#!/usr/bin/env node
// The package's `withruntime` command: the CLI's `sandbox run` against the
// configured server (WITHRUNTIME_URL / WITHRUNTIME_API_KEY, or
// ~/.config/withruntime/config.json). The full CLI is the Go binary.

import { parseArgs } from "node:util";

import { APIError } from "./errors.js";
import { configured, deviceLogin, loginURL, type SavedConnection } from "./login.js";
import { Sandbox } from "./sandbox.js";
import type { ExecRequest } from "./types.js";

/** The exit code when Runtime itself fails, as `docker run` uses 125 (the Go CLI's too). */
const EXIT_RUNTIME_ERROR = 125;

const USAGE = `Usage: withruntime sandbox run [flags] -- CMD [ARGS...]

Creates a sandbox on the configured server, runs CMD in it streaming stdout
and stderr, destroys the sandbox (also on Ctrl-C) and exits with CMD's exit
code (125 when Runtime itself fails, 130 when interrupted). One word after --
is run by bash (pipes work); several words are run as a program and its
arguments.

Flags:
  --template NAME        template to boot (default "base")
  --timeout DURATION     lease, and the command's timeout: 300, 300s, 10m, 1h (default 5m)
  --cpu N                vCPUs (default 1)
  --memory MIB           memory in MiB (default 512)
  --disk MIB             disk in MiB (default 2048)
  -e, --env KEY=VALUE    environment variable (repeatable)
  --metadata KEY=VALUE   label (repeatable)
  --trial                with no server and key configured, first log in to
                         WITHRUNTIME_URL (or the config file's server, or
                         http://127.0.0.1:7780) asking for a trial key: the
                         link and code to approve are printed on stderr

The server comes from WITHRUNTIME_URL and WITHRUNTIME_API_KEY, or from
~/.config/withruntime/config.json {"url": ..., "apiKey": ...}.`;

class UsageError extends Error {}

function pairs(flag: string, kvs: string[] | undefined): Record<string, string> | undefined {
  if (!kvs || kvs.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const kv of kvs) {
    const i = kv.indexOf("=");
    if (i <= 0) throw new UsageError(`${flag} ${JSON.stringify(kv)}: want KEY=VALUE`);
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

function num(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n < 0) throw new UsageError(`${flag} ${JSON.stringify(v)}: want a number`);
  return n;
}

/** A duration in seconds: "300", "300s", "10m", "1h30m" (as the Go CLI's --timeout takes it). */
function seconds(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  const rest = v.replace(/(\d+(?:\.\d+)?)(ms|h|m|s)/g, (_, n: string, u: string) => {
    total += Number(n) * unit[u]!;
    return "";
  });
  if (rest !== "" || v === "") throw new UsageError(`${flag} ${JSON.stringify(v)}: want a duration such as 300s, 10m or 1h`);
  return total;
}

async function sandboxRun(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      template: { type: "string" },
      timeout: { type: "string" },
      cpu: { type: "string" },
      memory: { type: "string" },
      disk: { type: "string" },
      env: { type: "string", short: "e", multiple: true },
      metadata: { type: "string", multiple: true },
      trial: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + "\n");
    return 0;
  }
  if (positionals.length === 0) throw new UsageError("give the command to run after --");
  const timeoutSeconds = Math.trunc(seconds("--timeout", values.timeout) ?? 300);
  if (timeoutSeconds < 1) throw new UsageError("--timeout must be at least 1 second");
  const req: ExecRequest =
    positionals.length === 1 ? { command: positionals[0]!, timeoutSeconds } : { argv: positionals, timeoutSeconds };

  const ac = new AbortController();
  const onSignal = () => ac.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  let sbx: Sandbox | undefined;
  try {
    let conn: SavedConnection | undefined;
    if (values.trial && !configured()) {
      conn = await deviceLogin(loginURL(), { trial: true, signal: ac.signal });
    }
    sbx = await Sandbox.create({
      ...(conn ? { baseURL: conn.url, apiKey: conn.apiKey } : {}),
      template: values.template ?? "base",
      timeoutSeconds,
      cpu: num("--cpu", values.cpu),
      memoryMiB: num("--memory", values.memory),
      diskMiB: num("--disk", values.disk),
      env: pairs("--env", values.env),
      metadata: pairs("--metadata", values.metadata),
      signal: ac.signal,
    });
    const res = await sbx.execTo(req, { stdout: process.stdout, stderr: process.stderr, signal: ac.signal });
    if (res.timedOut) {
      process.stderr.write(`withruntime: command timed out after ${(res.durationMs / 1000).toFixed(1)}s and was killed\n`);
    } else if (res.oomKilled) {
      process.stderr.write("withruntime: command was killed: the sandbox ran out of memory\n");
    }
    return res.exitCode;
  } catch (err) {
    if (ac.signal.aborted) {
      process.stderr.write("withruntime: interrupted; sandbox destroyed\n");
      return 130;
    }
    throw err;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    if (sbx) {
      await sbx.kill().catch((err: unknown) => {
        process.stderr.write(`withruntime: destroying ${sbx!.id}: ${(err as Error).message}\n`);
      });
    }
  }
}

async function main(argv: string[]): Promise<number> {
  // Everything after -- is the command, as given.
  const dd = argv.indexOf("--");
  const head = dd >= 0 ? argv.slice(0, dd) : argv;
  const cmd = dd >= 0 ? argv.slice(dd + 1) : [];
  if (head[0] === "sandbox" && head[1] === "run") {
    const flags = head.slice(2);
    return sandboxRun(dd >= 0 ? [...flags, "--", ...cmd] : flags);
  }
  if (head.length === 0 || head[0] === "help" || head[0] === "-h" || head[0] === "--help") {
    process.stdout.write(USAGE + "\n");
    return head.length === 0 ? 2 : 0;
  }
  throw new UsageError(`unknown command ${JSON.stringify(head.join(" "))}; this package's CLI has \`sandbox run\` (the full CLI is the Go binary)`);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
    process.stderr.write(`withruntime: ${(err as Error).message}\n\n${USAGE}\n`);
    process.exitCode = 2;
  } else {
    const msg = err instanceof APIError ? `${err.code} (${err.status}): ${err.message}` : (err as Error).message;
    process.stderr.write(`withruntime: ${msg.replace(/^withruntime: /, "")}\n`);
    process.exitCode = EXIT_RUNTIME_ERROR;
  }
}
