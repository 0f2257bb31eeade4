import {BaseCommand} from '../cli/base-command.js'
import {formatBytes} from '../config/units.js'
import {listLinks} from '../package/links.js'

export default class List extends BaseCommand {
  static override summary = 'List the packages this machine has served or pulled, with their sizes'
  static override examples = ['<%= config.bin %> list']

  async run(): Promise<void> {
    await this.parse(List)
    const links = await listLinks()
    if (links.length === 0) {
      this.log('no packages yet: splash pull owner/repo, or splash serve --model <folder|owner/repo>')
      return
    }
    const rows = links.map(l => [l.name, formatBytes(l.size), l.repo ?? 'local', l.present ? l.dir : `${l.dir} (missing)`])
    const widths = [0, 1, 2].map(i => Math.max(...rows.map(r => r[i].length), ['NAME', 'SIZE', 'FROM'][i].length))
    const fmt = (r: string[]) => r.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c)).join('  ')
    this.log(fmt(['NAME', 'SIZE', 'FROM', 'PATH']))
    for (const r of rows) this.log(fmt(r))
  }
}
