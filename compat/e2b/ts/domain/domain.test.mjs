// E2B's domain mode with the unmodified JS SDK: only E2B_DOMAIN and
// E2B_API_KEY are set (compat/e2b/run.sh serves the domain over TLS with a
// test CA, trusted through NODE_EXTRA_CA_CERTS, and resolves its names to a
// loopback address with a DNS server of its own). sandbox.getHost(port) is
// the host of a program listening in the sandbox.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

for (const name of ['E2B_DOMAIN', 'E2B_API_KEY']) {
  if (!process.env[name]) throw new Error(`${name} is not set: run the suite with compat/e2b/run.sh`)
}
for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL']) {
  if (process.env[name]) throw new Error(`${name} is set: the domain tests use E2B_DOMAIN alone`)
}

async function fetchWhenUp(url, headers = {}, ms = 20000) {
  const end = Date.now() + ms
  for (;;) {
    const r = await fetch(url, { headers })
    if (r.status !== 502 || Date.now() > end) return { status: r.status, body: await r.text() }
    await r.body?.cancel()
    await new Promise((res) => setTimeout(res, 200))
  }
}

test('getHost reaches a web server in the sandbox', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 })
  try {
    assert.equal((await sbx.commands.run('echo hi')).stdout, 'hi\n')
    await sbx.files.write('/home/user/site/index.html', 'hello from the sandbox')
    await sbx.commands.run('cd /home/user/site && python3 -m http.server 8002', { background: true })
    const host = sbx.getHost(8002)
    assert.equal(host, `8002-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
    assert.deepEqual(await fetchWhenUp(`https://${host}/index.html`), { status: 200, body: 'hello from the sandbox' })
  } finally {
    await sbx.kill()
  }
})

test('a sandbox without public traffic needs its traffic access token', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, network: { allowPublicTraffic: false } })
  try {
    await sbx.files.write('/home/user/site/index.html', 'private page')
    await sbx.commands.run('cd /home/user/site && python3 -m http.server 8003', { background: true })
    const url = `https://${sbx.getHost(8003)}/index.html`
    assert.equal((await fetchWhenUp(url, {}, 0)).status, 403)
    assert.ok(sbx.trafficAccessToken)
    assert.deepEqual(await fetchWhenUp(url, { 'e2b-traffic-access-token': sbx.trafficAccessToken }),
      { status: 200, body: 'private page' })
  } finally {
    await sbx.kill()
  }
})
