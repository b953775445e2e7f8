// Runs one of E2B's own JS suites (copied by compat/e2b/upstream.sh from a
// checkout of E2B's repository into a scratch directory under .trees/, never
// into this repository) against the SDK pinned in package.json: every import
// of the package's own source (`../src`, `../../src/errors`, ...) is the
// installed package instead (UPSTREAM_PKG: e2b or @e2b/code-interpreter), so a
// test that reaches into the source's internals fails to import or finds its
// module mocks unused (the suite's own mocks, counted as such). Tests run one
// file at a time (a 2-core host), with E2B's own timeouts (30 s, 180 s for
// template builds); the suite's setup
// files are not used (they mock the source's internals).
import { defineConfig } from 'vitest/config'

const pkg = process.env.UPSTREAM_PKG || 'e2b'
const exclude = (process.env.UPSTREAM_EXCLUDE || 'tests/runtimes/**').split(',')

const common = {
  globals: false,
  environment: 'node',
  fileParallelism: false,
  maxWorkers: 1,
  isolate: true,
}

export default defineConfig({
  resolve: {
    alias: [{ find: /^(\.\.?\/)+src(\/.*)?$/, replacement: pkg }],
  },
  test: {
    reporters: ['default', 'junit'],
    projects: [
      {
        extends: true,
        test: { ...common, name: 'sdk', include: ['tests/**/*.test.ts'], exclude: [...exclude, 'tests/template/**'], testTimeout: 30000 },
      },
      {
        extends: true,
        test: { ...common, name: 'template', include: ['tests/template/**/*.test.ts'], exclude, testTimeout: 180000 },
      },
    ],
  },
})
