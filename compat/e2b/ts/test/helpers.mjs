// Shared by the tests: the environment compat/e2b/run.sh sets, and a raw
// call to the data plane for what the SDK never sends on its own.
for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY', 'COMPAT_OTHER_API_KEY']) {
  if (!process.env[name]) throw new Error(`${name} is not set: run the suite with compat/e2b/run.sh`)
}

export const otherKey = process.env.COMPAT_OTHER_API_KEY

export async function envd(path, sandboxId, token, body = '{}') {
  const headers = { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': '49983' }
  if (token) headers['X-Access-Token'] = token
  return fetch(process.env.E2B_SANDBOX_URL + path, { method: 'POST', headers, body })
}

export async function eventually(what, cond, ms = 5000) {
  const end = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}
