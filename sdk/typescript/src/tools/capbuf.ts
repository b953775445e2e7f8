// A port of the Go SDK's tools/cap.go: the head and the tail of a stream of
// bytes in bounded memory, cut on UTF-8 boundaries.

const UTF_MAX = 4;

function isRuneStart(b: number): boolean {
  return (b & 0xc0) !== 0x80;
}

/** The largest i <= n that starts a UTF-8 sequence in b (or b.length). */
function runeBoundaryBefore(b: Uint8Array, n: number): number {
  if (n >= b.length) return b.length;
  for (let i = n; i > 0 && n - i < UTF_MAX; i--) {
    if (isRuneStart(b[i]!)) return i;
  }
  return n;
}

/** The smallest i >= n that starts a UTF-8 sequence in b. */
function runeBoundaryAfter(b: Uint8Array, n: number): number {
  if (n <= 0) return 0;
  for (let i = n; i < b.length && i - n < UTF_MAX; i++) {
    if (isRuneStart(b[i]!)) return i;
  }
  return n;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** The marker put where bytes were cut from the middle. */
export function marker(cut: number, total: number, what: string): string {
  return `\n[... ${cut} bytes cut from the middle of ${what} (${total} bytes in all); the first and last parts are shown ...]\n`;
}

/**
 * Keeps the first limit/2 and the last limit/2 bytes written (each cut back
 * to a UTF-8 boundary) and counts the rest.
 */
export class CapBuf {
  readonly limit: number;
  #head: Uint8Array = new Uint8Array(0);
  #tail: Uint8Array = new Uint8Array(0);
  #dropped = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  #headLimit(): number {
    return Math.floor(this.limit / 2);
  }
  #tailLimit(): number {
    return this.limit - Math.floor(this.limit / 2);
  }

  write(p: Uint8Array): void {
    const room = this.#headLimit() + UTF_MAX - this.#head.length;
    if (room > 0) {
      const k = Math.min(room, p.length);
      this.#head = concat(this.#head, p.subarray(0, k));
      p = p.subarray(k);
    }
    if (p.length === 0) return;
    this.#tail = concat(this.#tail, p);
    const keep = this.#tailLimit() + UTF_MAX;
    if (this.#tail.length > 2 * keep) {
      const drop = this.#tail.length - keep;
      this.#dropped += drop;
      this.#tail = this.#tail.slice(drop);
    }
  }

  /** The number of bytes written. */
  total(): number {
    return this.#head.length + this.#tail.length + this.#dropped;
  }

  /** The kept head and tail and the number of bytes cut between them (0 when nothing was: tail is then empty). */
  parts(): [Uint8Array, Uint8Array, number] {
    if (this.#dropped === 0) {
      const all = concat(this.#head, this.#tail);
      if (all.length <= this.limit) return [all, new Uint8Array(0), 0];
      const h = runeBoundaryBefore(all, this.#headLimit());
      const t = runeBoundaryAfter(all, all.length - this.#tailLimit());
      return [all.subarray(0, h), all.subarray(t), t - h];
    }
    const h = runeBoundaryBefore(this.#head, this.#headLimit());
    const t = runeBoundaryAfter(this.#tail, this.#tail.length - this.#tailLimit());
    return [this.#head.subarray(0, h), this.#tail.subarray(t), this.total() - h - (this.#tail.length - t)];
  }

  /** The kept text with a marker where bytes were cut, and the number cut; what names the stream in the marker. */
  text(what: string): [string, number] {
    const [head, tail, cut] = this.parts();
    const dec = new TextDecoder();
    if (cut === 0) return [dec.decode(head), 0];
    return [dec.decode(head) + marker(cut, this.total(), what) + dec.decode(tail), cut];
  }

  /** The first n bytes written (or all, if fewer), for n at most the head limit. */
  prefix(n: number): Uint8Array {
    const all = this.#dropped === 0 ? concat(this.#head, this.#tail) : this.#head;
    return all.subarray(0, Math.min(n, all.length));
  }
}
