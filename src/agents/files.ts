// Writing launcher-owned files under Splash's data directory: whole files replaced atomically, owner-only
// permissions (they may carry the server key).
import {mkdir, rename, writeFile} from 'node:fs/promises'
import path from 'node:path'

/** The folder for one agent's launcher state: <dataDir>/agents/<agent>. */
export function agentDir(dataDir: string, agent: string): string {
  return path.join(dataDir, 'agents', agent)
}

export async function writeOwnFile(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), {recursive: true, mode: 0o700})
  const tmp = `${file}.${process.pid}.tmp`
  await writeFile(tmp, text, {mode: 0o600})
  await rename(tmp, file)
}
