// Where Splash keeps state of its own (agent launcher configs, caches): one folder per user, never inside another
// tool's configuration. SPLASH_DATA_DIR overrides the platform default (tests point it at a temp folder).
import os from 'node:os'
import path from 'node:path'

export interface DataDirContext {
  env?: NodeJS.ProcessEnv
  platform?: NodeJS.Platform
  home?: string
}

/**
 * The Splash data directory:
 * SPLASH_DATA_DIR if set; macOS ~/Library/Application Support/Splash; Windows %LOCALAPPDATA%\Splash;
 * elsewhere $XDG_DATA_HOME/splash, else ~/.local/share/splash. Relative XDG paths are ignored, as the spec says.
 */
export function dataDir(ctx: DataDirContext = {}): string {
  const env = ctx.env ?? process.env
  const platform = ctx.platform ?? process.platform
  const home = ctx.home ?? env.HOME ?? os.homedir()
  const override = env.SPLASH_DATA_DIR?.trim()
  if (override) return path.resolve(override)
  if (platform === 'darwin') return path.join(home, 'Library', 'Application Support', 'Splash')
  if (platform === 'win32') {
    const local = env.LOCALAPPDATA?.trim()
    return path.win32.join(local || path.win32.join(home, 'AppData', 'Local'), 'Splash')
  }
  const xdg = env.XDG_DATA_HOME?.trim()
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, 'splash')
  return path.join(home, '.local', 'share', 'splash')
}
