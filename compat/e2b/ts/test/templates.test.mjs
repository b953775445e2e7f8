// The unmodified e2b JS SDK's Template.build against Runtime: a template
// from an image (a small one that compat/e2b/run.sh serves from a registry
// on loopback) with copy, setEnvs and runCmd steps, whose sandboxes hold
// what the steps made; one key's template is no other key's; a start
// command with a ready check is running at a sandbox's first command.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { Sandbox, Template, waitForPort } from 'e2b'
import { otherKey } from './helpers.mjs'

const image = process.env.COMPAT_IMAGE
const newName = () => 'compat-ts-' + randomBytes(5).toString('hex')

test('Template.build from an image with copy and runCmd; a sandbox of it runs the result', { skip: !image && 'COMPAT_IMAGE is not set: compat/e2b/run.sh serves the image (compat/e2b/imagereg needs Go)' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'compat-ts-template-'))
  writeFileSync(join(dir, 'hello.txt'), 'hello from the build context\n')
  mkdirSync(join(dir, 'tools'))
  writeFileSync(join(dir, 'tools', 'greet.sh'), '#!/bin/sh\necho "greetings from $(id -un)"\n')
  const name = newName()
  const template = Template({ fileContextPath: dir })
    .fromImage(image)
    .copy('hello.txt', '/home/user/')
    .copy('tools', '/opt/tools', { mode: 0o755 })
    .setEnvs({ BUILD_NOTE: 'seen by the build; $HOME stays as written' })
    .runCmd('echo "$BUILD_NOTE" > /home/user/run.txt')
    .runCmd('id -un > /opt/who.txt', { user: 'root' })
  const logs = []
  const info = await Template.build(template, name, { onBuildLogs: (l) => logs.push(l.message) })
  assert.ok(info.templateId && info.buildId)
  assert.ok(logs.some((m) => m.includes('RUN id -un > /opt/who.txt')), logs.join('\n'))

  const sb = await Sandbox.create(name, { timeoutMs: 120_000 })
  try {
    assert.equal(await sb.files.read('/home/user/hello.txt'), 'hello from the build context\n')
    const r = await sb.commands.run('cat run.txt /opt/who.txt && /opt/tools/greet.sh && echo "$COMPAT_IMAGE ${BUILD_NOTE:-unset}"')
    // COMPAT_IMAGE is the image's own environment; BUILD_NOTE was the build's only.
    assert.equal(r.stdout, 'seen by the build; $HOME stays as written\nroot\ngreetings from user\nsmall unset\n')
  } finally {
    await sb.kill()
  }

  // The template is its key's: another key neither finds nor boots it.
  assert.equal(await Template.exists(name), true)
  assert.equal(await Template.exists(name, { apiKey: otherKey }), false)
  await assert.rejects(Sandbox.create(name, { apiKey: otherKey, timeoutMs: 30_000 }), /not found/)
  // E2B's DELETE /templates/{id} (the SDK's deleteSnapshot sends it): not
  // another key's to delete; its owner's.
  assert.equal(await Sandbox.deleteSnapshot(info.templateId, { apiKey: otherKey }), false)
  assert.equal(await Sandbox.deleteSnapshot(info.templateId), true)
  assert.equal(await Template.exists(name), false)
})

test('Template.build with setStartCmd: the server answers at the first command', async () => {
  const name = newName()
  const t = Template()
    .fromBaseImage()
    .runCmd('mkdir -p /home/user/www && echo warm-from-js > /home/user/www/index.html')
    .setWorkdir('/home/user/www')
    .setStartCmd('python3 -m http.server 8000', waitForPort(8000))
  const info = await Template.build(t, name)
  const sb = await Sandbox.create(name, { timeoutMs: 120_000 })
  try {
    const r = await sb.commands.run('curl -sS --max-time 5 http://127.0.0.1:8000/index.html')
    assert.equal(r.stdout, 'warm-from-js\n')
  } finally {
    await sb.kill()
    assert.equal(await Sandbox.deleteSnapshot(info.templateId), true)
  }
})
