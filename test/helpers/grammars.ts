// Grammars that clients send with custom tools, as test fixtures.
import {readFileSync} from 'node:fs'

/** The Lark grammar of Codex's apply_patch tool, as Codex sends it in a Responses custom tool's format. */
export const APPLY_PATCH_LARK = readFileSync(new URL('../fixtures/grammars/apply_patch.lark', import.meta.url), 'utf8')
