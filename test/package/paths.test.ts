import t from 'tap'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {dataDir, hubCacheDir, hubEndpoint, isRepoId, repoFolder} from '../../src/package/paths.js'
import {ByteProgress} from '../../src/package/progress.js'

t.test('hub cache and data dir resolution', async t => {
  t.equal(hubCacheDir({HF_HUB_CACHE: '/a', HF_HOME: '/b'}), '/a')
  t.equal(hubCacheDir({HF_HOME: '/b'}), '/b/hub')
  t.equal(hubCacheDir({XDG_CACHE_HOME: '/x'}), '/x/huggingface/hub')
  t.equal(hubCacheDir({}), join(homedir(), '.cache/huggingface/hub'))
  t.equal(repoFolder('/c', 'owner/name'), '/c/models--owner--name')
  t.equal(dataDir({SPLASH_DATA_DIR: '/d'}, 'linux'), '/d')
  t.equal(dataDir({XDG_DATA_HOME: '/x'}, 'linux'), '/x/splash')
  t.equal(dataDir({}, 'linux'), join(homedir(), '.local/share/splash'))
  t.equal(dataDir({}, 'darwin'), join(homedir(), 'Library/Application Support/Splash'))
  t.equal(hubEndpoint({HF_ENDPOINT: 'http://h:1/'}), 'http://h:1')
  t.equal(hubEndpoint({}), 'https://huggingface.co')
  t.ok(isRepoId('Qwen/Qwen3.5-27B'))
  t.notOk(isRepoId('./dir'))
  t.notOk(isRepoId('a/b/c'))
})

t.test('progress line: bytes, rate, ETA', async t => {
  let now = 0
  const lines: string[] = []
  const out = {isTTY: false, write: (s: string) => lines.push(s)} as unknown as NodeJS.WriteStream
  const p = new ByteProgress(out, () => now)
  p.start(100 * 1024 * 1024, 'org/x')
  now = 10000
  p.add(50 * 1024 * 1024)
  t.equal(p.line(), 'org/x [############............] 50.0 MiB / 100 MiB  5.00 MiB/s  ETA 10s')
  p.done()
  t.ok(lines.length >= 2)
})
