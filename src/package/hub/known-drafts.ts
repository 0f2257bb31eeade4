// DFlash drafts published for targets Splash builds, so that a plain checkpoint given to `serve --model` (or to
// `package build` without --draft) can be told which draft to add. The table lists the z-lab drafts of the families
// in models/ (Qwen3.5, Qwen3.6, Qwen3-Coder, Qwen3), keyed by the target model's name without its owner, so
// mirrors and conversions of the same model under other owners match too. docs/hub-and-export.md says where the
// list was checked.
import {basename} from 'node:path'
import {isRepoId} from '../paths.js'

const DRAFTS: ReadonlyArray<[targets: string[], draft: string]> = [
  [['Qwen3.5-4B'], 'z-lab/Qwen3.5-4B-DFlash'],
  [['Qwen3.5-9B'], 'z-lab/Qwen3.5-9B-DFlash'],
  [['Qwen3.5-27B'], 'z-lab/Qwen3.5-27B-DFlash'],
  [['Qwen3.5-35B-A3B'], 'z-lab/Qwen3.5-35B-A3B-DFlash'],
  [['Qwen3.5-122B-A10B'], 'z-lab/Qwen3.5-122B-A10B-DFlash'],
  [['Qwen3.6-27B'], 'z-lab/Qwen3.6-27B-DFlash'],
  [['Qwen3.6-35B-A3B'], 'z-lab/Qwen3.6-35B-A3B-DFlash'],
  [['Qwen3-Coder-Next'], 'z-lab/Qwen3-Coder-Next-DFlash'],
  [['Qwen3-Coder-30B-A3B', 'Qwen3-Coder-30B-A3B-Instruct'], 'z-lab/Qwen3-Coder-30B-A3B-DFlash'],
  [['Qwen3-4B'], 'z-lab/Qwen3-4B-DFlash-b16'],
  [['Qwen3-8B'], 'z-lab/Qwen3-8B-DFlash-b16'],
]

/** The published DFlash draft for a target repo id, if the project knows one. */
export function knownDraft(repo: string): string | undefined {
  const name = repo.split('/').pop()!.toLowerCase()
  return DRAFTS.find(([targets]) => targets.some(t => t.toLowerCase() === name))?.[1]
}

/** The exact `splash package build` command for a repo id or checkpoint folder. */
export function buildCommand(source: string): string {
  const draft = isRepoId(source) ? knownDraft(source) : undefined
  const out = `./${basename(source)}-splash`
  return `splash package build ${source}${draft ? ` --draft ${draft}` : ''} --out ${out}`
}

/** A sentence naming the known draft, or nothing. */
export function draftHint(source: string): string {
  const draft = isRepoId(source) ? knownDraft(source) : undefined
  return draft ? ` (${draft} is the published DFlash draft for it)` : ''
}
