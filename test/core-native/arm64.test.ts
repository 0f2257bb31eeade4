// ARM64: the engine library and the kernel self-test cross-built for aarch64 (g++-aarch64-linux-gnu) and run
// under qemu-user. The self-test checks every kernel this build has (scalar, and NEON dot-product where the
// emulated CPU has it) against the fp64 reference and the batch-invariance rule (n tokens == 1 token, bit for bit).
// scripts/setup-system.sh installs both tools on x86-64 Debian; the build directory is kept between runs.
import {createHash} from 'node:crypto'
import t from 'tap'
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, openSync, readSync, closeSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const hostOk = process.platform === 'linux' && process.arch === 'x64'

function has(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0
}

function run(cmd: string, args: string[]): {status: number | null; out: string} {
  const r = spawnSync(cmd, args, {encoding: 'utf8', maxBuffer: 64 << 20})
  return {status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`}
}

t.test('cross-built aarch64 kernel self-test passes under qemu', {skip: hostOk ? false : 'cross test runs on x86-64 Linux'}, async (t) => {
  t.ok(has('aarch64-linux-gnu-g++'), 'aarch64-linux-gnu-g++ is installed (scripts/setup-system.sh)')
  t.ok(has('qemu-aarch64'), 'qemu-aarch64 is installed (scripts/setup-system.sh)')
  if (!has('aarch64-linux-gnu-g++') || !has('qemu-aarch64')) return
  // one build folder per checkout: CMake refuses a cache made from another source folder
  const build = path.join(tmpdir(), `splash-arm64-build-${createHash('sha256').update(root).digest('hex').slice(0, 12)}`)
  mkdirSync(build, {recursive: true})
  const gen = has('ninja') ? ['-G', 'Ninja'] : []
  const conf = run('cmake', ['-S', path.join(root, 'core-native'), '-B', build, ...gen, '-DCMAKE_BUILD_TYPE=Release',
    '-DCMAKE_SYSTEM_NAME=Linux', '-DCMAKE_SYSTEM_PROCESSOR=aarch64', '-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++'])
  t.equal(conf.status, 0, 'cmake configures for aarch64', {out: conf.out.slice(-2000)})
  const jobs = String(Math.max(1, Number(process.env.SPLASH_BUILD_JOBS ?? 2)))
  const b = run('cmake', ['--build', build, '--target', 'splash_kernel_test', '-j', jobs])
  t.equal(b.status, 0, 'splash_engine and splash_kernel_test build', {out: b.out.slice(-4000)})
  const exe = path.join(build, 'splash_kernel_test')
  t.ok(existsSync(exe))
  // ELF e_machine (offset 18, little endian) is 183 for AArch64
  const hdr = Buffer.alloc(20)
  const fd = openSync(exe, 'r')
  readSync(fd, hdr, 0, 20, 0)
  closeSync(fd)
  t.equal(hdr.readUInt16LE(18), 183, 'the executable is AArch64')

  for (const cpu of ['cortex-a53', 'max']) {
    // cortex-a53: ARMv8.0 without the dot-product extension; max: every extension qemu emulates
    const r = run('qemu-aarch64', ['-cpu', cpu, '-L', '/usr/aarch64-linux-gnu', exe])
    t.equal(r.status, 0, `self-test exits 0 on ${cpu}`, {out: r.out.slice(-3000)})
    const lines = r.out.split('\n')
    t.match(r.out, /^0 failed$/m)
    t.ok(lines.filter((l) => /^matmul_q4_i8x2_\S+ +scalar +vs reference .* ok$/.test(l)).length >= 6, `${cpu}: q4 int8x2 vs reference`)
    t.ok(lines.filter((l) => /^batch_q4_i8x2_nt\d+_\S+ +scalar +vs one-token +err 0 .* ok$/.test(l)).length >= 10, `${cpu}: batch invariance`)
    t.notOk(lines.some((l) => / FAIL$/.test(l)), `${cpu}: no failure`)
    const neon = lines.filter((l) => /^batch_q4_i8x?2?_nt\d+_\S+ +neon-dotprod +vs one-token +err 0 .* ok$/.test(l)).length
    const neonVsScalar = lines.filter((l) => /^matmul_q4_i8\S* +neon-dotprod +vs scalar .* ok$/.test(l)).length
    if (cpu === 'max') t.ok(neon >= 20 && neonVsScalar >= 12, `max: the NEON dot-product kernels are chosen and checked (${neon}, ${neonVsScalar})`)
    else t.equal(neon + neonVsScalar, 0, 'cortex-a53 (no dot product): scalar only')
  }
})
