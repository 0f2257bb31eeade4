// Browser-test helpers: Debian's Chromium driven by playwright-core (nothing is downloaded at test time;
// scripts/setup-system.sh installs the chromium package), a PNG made from scratch, and screenshots kept in
// .tap/webui-screenshots/ for a person to look at.
import {chromium, type Browser, type Page} from 'playwright-core'
import {existsSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {deflateSync, crc32} from 'node:zlib'
import path from 'node:path'
import {root} from '../helpers/cli.js'

export const CHROMIUM = '/usr/bin/chromium'
export const screenshotDir = path.join(root, '.tap', 'webui-screenshots')

export function haveChromium(): boolean {
  return existsSync(CHROMIUM)
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  })
}

/** Saves a full-window screenshot and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(screenshotDir, {recursive: true})
  const file = path.join(screenshotDir, `${name}.png`)
  await page.screenshot({path: file})
  return file
}

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4)
  len.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body) >>> 0)
  return Buffer.concat([len, body, crc])
}

/** An RGB PNG of `w`×`h` pixels: a diagonal gradient with a dark square in the middle. */
export function makePng(w: number, h: number): Buffer {
  const raw = Buffer.alloc((w * 3 + 1) * h)
  for (let y = 0; y < h; y++) {
    const row = y * (w * 3 + 1)
    raw[row] = 0 // filter: none
    for (let x = 0; x < w; x++) {
      const inner = x > w / 3 && x < (2 * w) / 3 && y > h / 3 && y < (2 * h) / 3
      const p = row + 1 + x * 3
      raw[p] = inner ? 20 : Math.round((255 * x) / (w - 1))
      raw[p + 1] = inner ? 20 : Math.round((255 * y) / (h - 1))
      raw[p + 2] = inner ? 60 : 200
    }
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(w, 0)
  ihdr.writeUInt32BE(h, 4)
  ihdr[8] = 8 // bit depth
  ihdr[9] = 2 // colour type: RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

/** WCAG contrast ratio of two CSS colours given as rgb()/rgba() strings. */
export function contrast(a: string, b: string): number {
  const lum = (c: string) => {
    const [r, g, bl] = (c.match(/[\d.]+/g) ?? []).slice(0, 3).map(Number).map(v => {
      const s = v / 255
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4
    })
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl
  }
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x)
  return (hi + 0.05) / (lo + 0.05)
}
