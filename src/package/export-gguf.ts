export interface ExportOptions {
  dir: string
  out: string
  log?: (line: string) => void
}
export async function exportGguf(_o: ExportOptions): Promise<void> {
  throw new Error('not yet')
}
