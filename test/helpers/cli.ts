// Runs the built CLI (bin/run.js → dist/) as a user would.
import {spawn, type ChildProcess} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import path from 'node:path'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const bin = path.join(root, 'bin', 'run.js')

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {env: {...process.env, ...env}, stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', d => (stdout += d))
    child.stderr.on('data', d => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`splash ${args.join(' ')} did not finish in ${timeoutMs} ms`))
    }, timeoutMs)
    child.on('close', code => {
      clearTimeout(timer)
      resolve({code, stdout, stderr})
    })
  })
}

export interface ServerProcess {
  child: ChildProcess
  url: string
  port: number
  output: () => string
  exited: Promise<number | null>
}

/** Starts `splash serve --port 0 ...` and resolves once it prints Ready with its URL. */
export function startServe(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    // each server its own data folder (the prefix cache's disk tier lives there), removed when it exits, unless
    // the test names one
    const data = env.SPLASH_DATA_DIR === undefined ? mkdtempSync(path.join(tmpdir(), 'splash-data-')) : undefined
    const child = spawn(process.execPath, [bin, 'serve', '--port', '0', ...args], {
      env: {...process.env, ...(data ? {SPLASH_DATA_DIR: data} : {}), ...env},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    const exited = new Promise<number | null>(r =>
      child.on('exit', code => {
        if (data) rmSync(data, {recursive: true, force: true})
        r(code)
      }),
    )
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`server did not print Ready in ${timeoutMs} ms:\n${out}`))
    }, timeoutMs)
    const onData = (d: Buffer) => {
      out += d.toString()
      const m = /Ready: (http:\/\/127\.0\.0\.1:(\d+))/.exec(out)
      if (m) {
        clearTimeout(timer)
        child.stdout.off('data', onData)
        child.stdout.on('data', d2 => (out += d2))
        resolve({child, url: m[1], port: Number(m[2]), output: () => out, exited})
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', d => (out += d))
    child.on('exit', code => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before Ready:\n${out}`))
    })
  })
}
