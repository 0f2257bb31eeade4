import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base-command.js'
import {formatBytes} from '../config/units.js'
import {clearPrefixFolders, listPrefixFolders, prefixCacheRoot} from '../cache/prefix-folders.js'

export default class Cache extends BaseCommand {
  static override summary = "Show (or clear) the prefix cache's disk folders: the conversations kept across restarts"
  static override examples = ['<%= config.bin %> cache', '<%= config.bin %> cache --clear']
  static override flags = {
    clear: Flags.boolean({description: 'Delete every folder (a running server then recomputes what it would have read)'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Cache)
    const root = prefixCacheRoot()
    if (flags.clear) {
      const gone = clearPrefixFolders(root)
      const bytes = gone.reduce((a, f) => a + f.bytes, 0)
      this.log(`cleared ${gone.length} folder${gone.length === 1 ? '' : 's'} (${formatBytes(bytes)}) in ${root}`)
      return
    }
    const folders = listPrefixFolders(root).reverse()
    if (folders.length === 0) {
      this.log(`no prefix cache on disk yet (${root})`)
      return
    }
    const rows = folders.map(f => [f.signature, String(f.snapshots), formatBytes(f.bytes), f.newest ? new Date(f.newest).toISOString().replace(/\.\d+Z$/, 'Z') : '-'])
    const head = ['FOLDER', 'SNAPSHOTS', 'SIZE', 'LAST USED']
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i]!.length)))
    const fmt = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()
    this.log(`${root}:`)
    this.log(fmt(head))
    for (const r of rows) this.log(fmt(r))
  }
}
