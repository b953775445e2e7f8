// A port of the Go SDK's tools/args.go: the model's arguments are
// untrusted, so they are checked field by field, with messages for the
// model that say what to fix.

/** One argument of a tool. */
export interface Field {
  name: string;
  /** Whole numbers; other fields are strings. */
  integer?: boolean;
  /** Must be present (a sentinel-default field may be left out and takes "" or 0). */
  essential?: boolean;
  /** Bounds a string's length in UTF-8 bytes. */
  max?: number;
}

/** Decoded, checked arguments, with absent fields at their sentinel defaults. */
export interface Args {
  str: Record<string, string>;
  num: Record<string, number>;
}

/** An invalid argument; the message is for the model. */
export class ArgsError extends Error {}

function jsonKind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  switch (typeof v) {
    case "string":
      return "a string";
    case "object":
      return "an object";
    case "boolean":
      return "a boolean";
    case "number":
    case "bigint":
      return "a number";
  }
  return "nothing";
}

function parseJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ArgsError(`the arguments must be one JSON object (invalid JSON: ${(err as Error).message})`);
  }
}

/** Whether s has a lone surrogate, which UTF-8 cannot carry. */
function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

/**
 * Checks arguments against fields. args is the parsed JSON object, or the
 * JSON text of one (also JSON-encoded a second time, as some models send it).
 */
export function decodeArgs(raw: unknown, fields: Field[]): Args {
  const a: Args = { str: {}, num: {} };
  let v = raw;
  if (typeof v === "string") {
    const t = v.trim();
    v = t === "" ? undefined : parseJSON(t);
    if (typeof v === "string") v = v.trim() === "" ? undefined : parseJSON(v.trim());
  }
  let obj: Record<string, unknown> = {};
  if (v !== undefined && v !== null) {
    if (typeof v !== "object" || Array.isArray(v)) {
      throw new ArgsError(`the arguments must be one JSON object (got a JSON ${jsonKind(v).replace(/^an? /, "")})`);
    }
    obj = v as Record<string, unknown>;
  }
  const known = new Set(fields.map((f) => f.name));
  const unknown = Object.keys(obj)
    .filter((k) => !known.has(k))
    .map((k) => JSON.stringify(k))
    .sort();
  if (unknown.length > 0) throw new ArgsError(`unknown field ${unknown.join(", ")}`);
  for (const f of fields) {
    const val = obj[f.name];
    if (val === undefined || val === null) {
      if (f.essential) throw new ArgsError(`missing ${JSON.stringify(f.name)}`);
      continue;
    }
    const q = JSON.stringify(f.name);
    if (f.integer) {
      if (typeof val !== "number") throw new ArgsError(`${q} must be a whole number, not ${jsonKind(val)}`);
      if (!Number.isFinite(val) || !Number.isInteger(val) || Math.abs(val) > 2 ** 53) {
        throw new ArgsError(`${q} must be a whole number, not ${val}`);
      }
      a.num[f.name] = val;
      continue;
    }
    if (typeof val !== "string") throw new ArgsError(`${q} must be a string, not ${jsonKind(val)}`);
    const bytes = Buffer.byteLength(val, "utf8");
    if (f.max !== undefined && f.max > 0 && bytes > f.max) {
      throw new ArgsError(`${q} is ${bytes} bytes, over the limit of ${f.max}`);
    }
    if (val.includes("\u0000")) throw new ArgsError(`${q} contains a NUL character, which is not allowed`);
    if (hasLoneSurrogate(val)) throw new ArgsError(`${q} is not valid UTF-8`);
    a.str[f.name] = val;
  }
  return a;
}
