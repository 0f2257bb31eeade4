import t from 'tap'
import {mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {ALIGNMENT, SafetensorsReader, SafetensorsWriter, toFloat32, writeSafetensors} from '../../src/package/safetensors.js'

const dir = mkdtempSync(join(tmpdir(), 'splash-st-'))

t.test('round trip with 64-byte alignment, padding tensors and metadata', async t => {
  const path = join(dir, 'a.safetensors')
  const a = new Float32Array([1, 2, 3]) // 12 bytes: forces a gap
  const b = new Uint16Array([0x3f80, 0xc000, 0x0000, 0x7f80]) // bf16 1, -2, 0, inf
  const c = new Uint32Array(40).map((_, i) => i * 7)
  const d = new BigInt64Array([1n, -2n])
  const e = new Int32Array([-5, 5, 7])
  await writeSafetensors(
    path,
    [
      {name: 'a', dtype: 'F32', shape: [3], data: a},
      {name: 'b', dtype: 'BF16', shape: [2, 2], data: b},
      {name: 'c', dtype: 'U32', shape: [4, 10], data: c},
      {name: 'd', dtype: 'I64', shape: [2], data: d},
      {name: 'e', dtype: 'I32', shape: [3], data: e},
      {name: 'f', dtype: 'U8', shape: [0], data: new Uint8Array(0)},
    ],
    {format: 'pt'},
  )
  const raw = readFileSync(path)
  const n = Number(raw.readBigUInt64LE(0))
  t.equal((8 + n) % ALIGNMENT, 0, 'data section aligned')
  const header = JSON.parse(raw.subarray(8, 8 + n).toString())
  t.ok(raw.subarray(8, 8 + n).toString().endsWith(' '), 'header padded with spaces')
  // contiguous offsets, as the Rust safetensors library demands
  const entries = Object.entries(header).filter(([k]) => k !== '__metadata__') as [string, {data_offsets: number[]}][]
  entries.sort((x, y) => x[1].data_offsets[0] - y[1].data_offsets[0])
  let pos = 0
  for (const [, v] of entries) {
    t.equal(v.data_offsets[0], pos)
    pos = v.data_offsets[1]
  }
  t.equal(8 + n + pos, raw.length, 'file ends at the last tensor')

  const r = await SafetensorsReader.open(path)
  t.same(r.names(), ['a', 'b', 'c', 'd', 'e', 'f'], 'padding tensors hidden')
  t.same(r.metadata, {format: 'pt'})
  for (const name of r.names()) t.equal(r.info(name).offset % ALIGNMENT, 0, `${name} aligned`)
  t.same([...(await r.readFloat32('a'))], [1, 2, 3])
  t.same([...(await r.readFloat32('b'))], [1, -2, 0, Infinity])
  t.same([...new Uint32Array((await r.read('c')).buffer.slice(0))].slice(0, 0), [])
  const cRows = await r.readRows('c', 1, 3)
  t.same([...new Uint32Array(new Uint8Array(cRows).buffer)], [...c.slice(10, 30)])
  t.same([...(await r.readFloat32('d'))], [1, -2])
  t.same([...(await r.readFloat32('e'))], [-5, 5, 7])
  const part = await r.readRange('c', 4, 12)
  t.same([...new Uint32Array(new Uint8Array(part).buffer)], [7, 14])
  await t.rejects(r.readRange('c', 0, 1000))
  t.throws(() => r.info('zzz'))
  await r.close()
})

t.test('writer writes in parts and checks completeness', async t => {
  const path = join(dir, 'b.safetensors')
  const w = await SafetensorsWriter.create(path, [
    {name: 'x', dtype: 'U8', shape: [100]},
    {name: 'y', dtype: 'F16', shape: [2]},
  ])
  await w.writePart('x', 0, new Uint8Array(50).fill(1))
  await w.writePart('x', 50, new Uint8Array(50).fill(2))
  await t.rejects(w.write('y', new Uint8Array(3)), /needs 4 bytes/)
  await t.rejects(w.close(), /y was not written/)
  const w2 = await SafetensorsWriter.create(path, [{name: 'y', dtype: 'F16', shape: [2]}])
  await w2.write('y', new Uint16Array([0x3c00, 0xc000]))
  await w2.close()
  const r = await SafetensorsReader.open(path)
  t.same([...(await r.readFloat32('y'))], [1, -2])
  await r.close()
})

t.test('reader rejects garbage', async t => {
  const path = join(dir, 'bad.safetensors')
  const {writeFileSync} = await import('node:fs')
  writeFileSync(path, Buffer.from('hello'))
  await t.rejects(SafetensorsReader.open(path), /not a valid safetensors/)
  t.same([...toFloat32(new Uint8Array([0, 0x3c]), 'F16')], [1])
})
