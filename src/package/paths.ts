// Where things live on this machine: the Hugging Face hub cache (shared with Python's huggingface_hub) and Splash's
// own data directory.
import {homedir} from 'node:os'
import {readOptions} from '../config/options.js'
import {join} from 'node:path'

/** HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. */
export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE
  if (env.HUGGINGFACE_HUB_CACHE) return env.HUGGINGFACE_HUB_CACHE
  if (env.HF_HOME) return join(env.HF_HOME, 'hub')
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, 'huggingface', 'hub')
  return join(homedir(), '.cache', 'huggingface', 'hub')
}

/** models--owner--name inside the hub cache. */
export function repoFolder(cacheDir: string, repo: string): string {
  return join(cacheDir, `models--${repo.replace(/\//g, '--')}`)
}

/** SPLASH_DATA_DIR, else ~/Library/Application Support/Splash on macOS, else XDG_DATA_HOME/splash or ~/.local/share/splash. */
export function dataDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  const dir = readOptions(env).dataDir
  if (dir) return dir
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'Splash')
  return join(env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'splash')
}

export function hubEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '')
}

/** owner/name as the hub spells repo ids. */
export function isRepoId(spec: string): boolean {
  return /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(spec) && !spec.includes('..')
}
