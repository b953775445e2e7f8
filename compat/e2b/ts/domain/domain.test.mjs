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

test('downloadUrl and uploadUrl: no header needed, bound to path and operation, gone with the sandbox', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 })
  let url
  try {
    await sbx.files.write('/home/user/data.csv', 'a,b\n1,2\n')
    url = await sbx.downloadUrl('/home/user/data.csv', { useSignatureExpiration: 60 })
    assert.deepEqual(await fetchWhenUp(url), { status: 200, body: 'a,b\n1,2\n' })
    const up = await sbx.uploadUrl('/home/user/in.txt')
    const form = new FormData()
    form.append('file', new Blob(['uploaded by url']), 'in.txt')
    assert.equal((await fetch(up, { method: 'POST', body: form })).status, 200)
    assert.equal(await sbx.files.read('/home/user/in.txt'), 'uploaded by url')
    const swapped = new URL(url)
    swapped.searchParams.set('path', '/home/user/in.txt')
    assert.equal((await fetchWhenUp(swapped.toString())).status, 401)
    assert.equal((await fetch(url, { method: 'POST', body: form })).status, 401)
  } finally {
    await sbx.kill()
  }
  assert.equal((await fetch(url)).status, 502)
})

test('network.maskRequestHost is the Host header a program in the sandbox sees', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, network: { maskRequestHost: '${PORT}-masked.example.com' } })
  try {
    await sbx.files.write('/home/user/host.py', [
      'import http.server',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      "        b = self.headers['Host'].encode()",
      '        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)',
      "http.server.HTTPServer(('', 8092), H).serve_forever()",
    ].join('\n'))
    await sbx.commands.run('python3 /home/user/host.py', { background: true })
    assert.deepEqual(await fetchWhenUp(`https://${sbx.getHost(8092)}/`), { status: 200, body: '8092-masked.example.com' })
  } finally {
    await sbx.kill()
  }
})
