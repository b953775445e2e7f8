// The unmodified e2b code interpreter JS SDK (npm @e2b/code-interpreter
// 2.8.0 over e2b 2.51.0) against Runtime: Sandbox.create() asks for the
// template code-interpreter-v1 (Runtime's code-interpreter) and runs code
// through port 49999.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import './helpers.mjs'

let sb
before(async () => { sb = await Sandbox.create({ timeoutMs: 300_000 }) })
after(async () => { await sb?.kill() })

test('runCode keeps state between cells', async () => {
  assert.equal((await sb.runCode('x = 1')).error, undefined)
  const ex = await sb.runCode('x + 1')
  assert.equal(ex.text, '2')
  assert.equal(ex.results[0].isMainResult, true)
})

test('a matplotlib chart is a PNG result', async () => {
  const ex = await sb.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
  const pngs = ex.results.filter((r) => r.png).map((r) => r.png)
  assert.equal(pngs.length, 1)
  assert.deepEqual([...Buffer.from(pngs[0], 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47])
})

test('an exception is execution.error; onStdout sees prints', async () => {
  const ex = await sb.runCode('1/0')
  assert.equal(ex.error.name, 'ZeroDivisionError')
  const lines = []
  await sb.runCode("print('hello from js')", { onStdout: (m) => lines.push(m.line) })
  assert.match(lines.join(''), /hello from js/)
})

test('contexts: create, run, list, restart, remove', async () => {
  const ctx = await sb.createCodeContext({ language: 'python' })
  assert.equal((await sb.runCode('y = 41', { context: ctx })).error, undefined)
  assert.equal((await sb.runCode('y + 1', { context: ctx })).text, '42')
  assert.equal((await sb.runCode('y')).error.name, 'NameError')
  assert.ok((await sb.listCodeContexts()).some((c) => c.id === ctx.id))
  await sb.restartCodeContext(ctx)
  assert.equal((await sb.runCode('y', { context: ctx })).error.name, 'NameError')
  await sb.removeCodeContext(ctx)
  assert.ok(!(await sb.listCodeContexts()).some((c) => c.id === ctx.id))
})

test('a line chart and a bar chart come back as result.chart with their data', async () => {
  const line = await sb.runCode([
    'import matplotlib.pyplot as plt',
    "plt.plot([0, 1, 2], [5, 3, 8], label='load')",
    "plt.title('Load'); plt.xlabel('Hour'); plt.ylabel('Jobs [n]')",
    'plt.show()',
  ].join('\n'))
  const lc = line.results.find((r) => r.chart).chart
  assert.equal(lc.type, 'line')
  assert.equal(lc.title, 'Load')
  assert.equal(lc.y_unit, 'n')
  assert.equal(lc.x_scale, 'linear')
  assert.deepEqual(lc.elements.map((e) => [e.label, e.points]), [['load', [[0, 5], [1, 3], [2, 8]]]])

  const bar = await sb.runCode([
    'import matplotlib.pyplot as plt',
    "plt.bar(['mon', 'tue'], [4, 9], label='tickets')",
    "plt.title('Tickets')",
    'plt.show()',
  ].join('\n'))
  const bc = bar.results.find((r) => r.chart).chart
  assert.equal(bc.type, 'bar')
  assert.deepEqual(bc.elements.map((e) => [e.label, e.group, e.value]), [['mon', 'tickets', 4], ['tue', 'tickets', 9]])
})

// A sandbox of its own: each language's kernel takes its own memory (Deno's
// about 280 MiB) and the file's sandbox holds what the other tests left in
// Python's; the JavaScript context goes before the Bash one starts.
test('a JavaScript and a Bash cell run in kernels of their own', async () => {
  const own = await Sandbox.create({ timeoutMs: 300_000 })
  try {
    assert.equal((await own.runCode('let count = 2; count * 10', { language: 'js' })).text, '20')
    assert.equal((await own.runCode('count + 1', { language: 'javascript' })).text, '3')
    const lines = []
    await own.runCode('console.log("from deno")', { language: 'js', onStdout: (m) => lines.push(m.line) })
    assert.match(lines.join(''), /from deno/)
    await own.removeCodeContext('default-javascript')
    const bash = await own.runCode('GREETING=hi; echo "$GREETING from bash"', { language: 'bash' })
    assert.deepEqual(bash.logs.stdout, ['hi from bash\n'])
    const failed = await own.runCode('exit_with() { return 3; }; exit_with', { language: 'bash' })
    assert.equal(failed.error.value, '3')
  } finally {
    await own.kill()
  }
})
