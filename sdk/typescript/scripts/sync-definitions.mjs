// Copies the canonical tool definitions, the Go SDK's golden files, into
// this package (definitions/NAME.json). Run it after the Go definitions
// change (`go test ./tools -update` in sdk/go); test/definitions.test.ts
// fails until the copies match.
import { copyFileSync } from "node:fs";

const names = ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files", "runtime_run_code"];
for (const name of names) {
  const from = new URL(`../../go/tools/testdata/${name}.golden`, import.meta.url);
  const to = new URL(`../definitions/${name}.json`, import.meta.url);
  copyFileSync(from, to);
  console.log(`${to.pathname} <- ${from.pathname}`);
}
