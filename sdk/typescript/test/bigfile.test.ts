// A 100 MiB file goes up and comes back streamed, without this process
// ever holding it whole (its own process: node --test runs each file in
// one, so the memory bound measures only this; see held).
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

import { Sandbox } from "withruntime";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const MiB = 1 << 20;
const SIZE = 100 * MiB;

// held is what this process holds: the V8 heap in use and the live
// ArrayBuffers (every Buffer and Uint8Array chunk), after a full
// collection. It takes two: a collection leaves the memory of the
// ArrayBuffers it found dead to a concurrent sweeper, and memoryUsage counts
// that memory until the sweep is over, which the next collection waits for
// (measured while streaming: 9 to 16 MiB after one gc, 2 MiB after two).
// RSS is no measure of what is held: it also counts that memory, what
// malloc keeps of freed chunks for reuse, and the V8 heap's free pages; it
// grew by 20 to 44 MiB from run to run while the stream held 2 MiB. (Kept
// in an array, the file makes held grow by 101 MiB.)
function held(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

test("a 100 MiB file is streamed up and down without being loaded whole", async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 300, memoryMiB: 1024 });

  // The file is generated as it is sent: 1 MiB of random bytes, each copy
  // stamped with its index so that no two MiB are the same.
  const block = randomBytes(MiB);
  const sent = createHash("sha256");
  let i = 0;
  const source = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (i === SIZE / MiB) {
          controller.close();
          return;
        }
        const chunk = new Uint8Array(block);
        new DataView(chunk.buffer).setUint32(0, i++);
        sent.update(chunk);
        controller.enqueue(chunk);
      },
    },
    { highWaterMark: 1 },
  );

  const base = held();
  const baseRSS = process.memoryUsage().rss;
  let peak = base;
  let peakRSS = baseRSS;
  const sample = () => {
    peak = Math.max(peak, held());
    peakRSS = Math.max(peakRSS, process.memoryUsage().rss);
  };
  const sampler = setInterval(sample, 100);
  try {
    const t0 = Date.now();
    const fi = await sbx.files.write("big.bin", source);
    const up = Date.now() - t0;
    assert.equal(fi.size, SIZE);
    const want = sent.digest("hex");
    const sum = await sbx.exec({ command: "sha256sum big.bin", timeoutSeconds: 120 });
    assert.equal(sum.stdout.split(" ")[0], want, "the sandbox has other bytes than were sent");

    const t1 = Date.now();
    const got = createHash("sha256");
    let n = 0;
    for await (const chunk of await sbx.files.open("big.bin")) {
      got.update(chunk);
      n += chunk.length;
    }
    const down = Date.now() - t1;
    assert.equal(n, SIZE);
    assert.equal(got.digest("hex"), want, "the bytes read back differ");
    sample();
    const grew = (peak - base) / MiB;
    const grewRSS = (peakRSS - baseRSS) / MiB;
    process.stderr.write(
      `bigfile: up ${up} ms, down ${down} ms, held ${Math.round(base / MiB)} MiB, peak +${grew.toFixed(1)} MiB (rss +${grewRSS.toFixed(1)} MiB)\n`,
    );
    // The stream holds a chunk or two (1 MiB each up, 64 KiB down).
    assert.ok(grew < 16, `this process held ${grew.toFixed(1)} MiB more while streaming a 100 MiB file: it was buffered`);
  } finally {
    clearInterval(sampler);
  }
});
