#!/usr/bin/env node
// Renders synthetic coding-agent transcripts exactly as the server renders them, for tools/train/agentdata.py.
// Input: request bodies captured from the real agents by tools/train/agent-capture.mjs (the first request of a
// turn: the agent's system prompt, tools and wire format). Each transcript replaces the user's task, then adds
// the assistant's tool call, the tool's result (in the text the agent really sends back) and a short final
// answer, all in the agent's own wire format; the bodies go through the API plugins' own translators and the
// package's chat template (dist/, `npm run build` first), so the text is byte-identical to what the engine sees.
//   node tools/train/agent-render.mjs --captures /tmp/cap --package packages/default --out .gpu-train/agents.jsonl.gz
// Output (gzip JSON lines): {"head": id, "text": ...} once per distinct prompt head (system prompt + tools, the
// same for many transcripts), then {"agent", "split", "head", "segments": [[text, loss], ...], "task"} per
// transcript, where loss 1 marks what the model generates (after the generation prompt, up to <|im_end|>).
import {createHash} from 'node:crypto'
import {readFileSync, readdirSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {gzipSync} from 'node:zlib'

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..')
const dist = p => path.join(root, 'dist', p)
const {load} = await import(dist('models/qwen3_5/index.js'))
const {readManifest} = await import(dist('src/package/manifest.js'))
const {renderPrompt} = await import(dist('plugins/shared/render.js'))
const anthropic = await import(dist('plugins/anthropic-messages/lib/translate.js'))
const responses = await import(dist('plugins/openai-responses/lib/translate.js'))
const chatApi = await import(dist('plugins/openai-chat/lib/translate.js'))

const {values: opt} = parseArgs({
  options: {
    captures: {type: 'string', default: '/tmp/cap'},
    package: {type: 'string', default: path.join(root, 'packages', 'default')},
    out: {type: 'string', default: path.join(root, '.gpu-train', 'agents.jsonl.gz')},
    n: {type: 'string', default: '1500'},
    val: {type: 'string', default: '40'},
    seed: {type: 'string', default: '7'},
    heads: {type: 'string', default: '48'},
  },
})

// ---- seeded randomness
let seed = Number(opt.seed) >>> 0
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const pick = a => a[Math.floor(rand() * a.length)]
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1))

// ---- task material: file names, contents, wordings
const WORDS = ('alpha beta gamma delta apple river stone cloud paper green blue red orange silver quick brown fox lazy dog ' +
  'hello world splash model agent test note todo build deploy server client cache token window draft kernel fast ' +
  'small large first second third last line file data report summary budget march april monday friday coffee tea ' +
  'north south east west one two three four five seven nine ten zero done ready pending ok yes no maybe happy ' +
  'garden window table chair music piano guitar ocean forest mountain desert winter summer spring autumn').split(' ')
const STEMS = ('notes todo hello readme config data output result log summary list plan draft greeting answer message ' +
  'report test sample demo info status names items tasks ideas main app script numbers words poem story').split(' ')
const EXTS = ['.txt', '.txt', '.txt', '.md', '.md', '.py', '.json', '.csv', '.log', '.sh', '.yaml', '', '.js', '.toml']
const DIRS = ['/tmp/work', '/tmp/project', '/home/dev/project', '/home/user/code/app', '/srv/repo', '/work/demo', '/home/ana/src/site',
  '/tmp/splash-real-codex-x', '/tmp/splash-real-claude-y', '/tmp/splash-real-opencode-z', '/home/me/tasks', '/var/tmp/job']

// Stems come from an open set (common names, any word, random letters), so the model learns to copy the name the
// user gives rather than pick one it has seen: with STEMS alone it answered `mv draft.txt log.txt` to
// "Rename draft.txt to final.txt".
function stem() {
  const r = rand()
  if (r < 0.3) return pick(STEMS)
  if (r < 0.65) return pick(WORDS)
  return Array.from({length: int(3, 9)}, () => pick([...'abcdefghijklmnopqrstuvwxyz'])).join('')
}
function fileName() {
  const s = rand() < 0.25 ? `${stem()}${pick(['_', '-', ''])}${stem()}` : stem()
  return s + (rand() < 0.15 ? String(int(1, 99)) : '') + pick(EXTS)
}
function content() {
  const r = rand()
  if (r < 0.12) return String(int(0, 100000))
  if (r < 0.2) return `print(${JSON.stringify(pick(WORDS) + ' ' + pick(WORDS))})`
  if (r < 0.26) return `${pick(WORDS)} = ${int(0, 999)}`
  const n = int(1, 7)
  let s = Array.from({length: n}, () => pick(WORDS)).join(' ')
  if (rand() < 0.3) s = s[0].toUpperCase() + s.slice(1)
  if (rand() < 0.2) s += pick(['.', '!', '?'])
  return s
}
const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
function cwdName() {
  const r = rand()
  if (r < 0.35) return `/tmp/${pick(['splash-real-claude', 'splash-real-codex', 'splash-real-opencode', 'splash-real-hermes', 'task', 'tmp'])}-${Array.from({length: 6}, () => pick([...ALNUM])).join('')}/work`
  const d = pick(DIRS)
  return r < 0.7 ? `${d}-${Math.floor(rand() * 1e6).toString(36)}` : d
}
function date() {
  return `20${int(25, 27)}-${String(int(1, 12)).padStart(2, '0')}-${String(int(1, 28)).padStart(2, '0')}`
}
const q = s => pick([s, s, `"${s}"`, `'${s}'`, `\`${s}\``])
const CREATE = [
  (f, y) => `Create a file named ${f} containing ${q(y)}`,
  (f, y) => `Create a file named ${f} containing ${y}`,
  (f, y) => `create a file called ${f} with the content ${q(y)}`,
  (f, y) => `Write ${q(y)} to a new file ${f}`,
  (f, y) => `Make a file ${f} that contains the text ${q(y)}`,
  (f, y) => `Please create ${f} containing ${q(y)}.`,
  (f, y) => `Create the file ${f} with this exact content: ${y}`,
  (f, y) => `Save the text ${q(y)} in a file named ${f}`,
  (f, y) => `new file ${f}, content: ${y}`,
  (f, y) => `I need a file ${f} whose only line is ${q(y)}`,
  (f, y) => `Put ${q(y)} into a file called ${f}`,
  (f, y) => `Create ${f} and write ${q(y)} in it`,
]
const APPEND = [
  (f, y) => `Append the line ${q(y)} to ${f}`,
  (f, y) => `Append the line ${y} to ${f}`,
  (f, y) => `Add a line ${q(y)} at the end of ${f}`,
  (f, y) => `append ${q(y)} to the file ${f}`,
  (f, y) => `Please add the line ${q(y)} to the end of ${f}.`,
  (f, y) => `Add ${q(y)} as a new last line of ${f}`,
]
const RENAME = [
  (f, g) => `Rename ${f} to ${g}`,
  (f, g) => `rename the file ${f} to ${g}`,
  (f, g) => `Move ${f} to ${g}`,
  (f, g) => `Please rename ${f} so that it is called ${g}.`,
  (f, g) => `Change the name of the file ${f} to ${g}`,
]
const DONE = {
  create: f => pick([`Created ${f}.`, `Done: ${f} is created.`, `I created ${f}.`, `Created \`${f}\`.`, `Done.`]),
  append: f => pick([`Appended the line to ${f}.`, `Done: the line is appended to ${f}.`, `Added the line to ${f}.`, `Done.`]),
  rename: (f, g) => pick([`Renamed ${f} to ${g}.`, `Done: ${f} is now ${g}.`, `Moved ${f} to ${g}.`, `Done.`]),
}

/** One task: what the user says, what the tool does, the shell command for append/rename. */
function task() {
  const r = rand()
  if (r < 0.5) {
    const f = fileName()
    const y = content()
    return {kind: 'create', file: f, content: y, text: pick(CREATE)(f, y), done: DONE.create(f)}
  }
  if (r < 0.75) {
    const f = fileName()
    let y = content()
    y = y.replace(/'/g, '')
    return {kind: 'append', file: f, content: y, text: pick(APPEND)(f, y), shell: `echo '${y}' >> ${f}`, done: DONE.append(f)}
  }
  const f = fileName()
  let g = fileName()
  if (g === f) g = 'new_' + g
  return {kind: 'rename', file: f, to: g, text: pick(RENAME)(f, g), shell: `mv ${f} ${g}`, done: DONE.rename(f, g)}
}

// ---- per-agent wire formats
const hex = n => Array.from({length: n}, () => Math.floor(rand() * 16).toString(16)).join('')

const agents = {
  claude: {
    dir: 'claude',
    route: 'messages',
    withTask(body, t) {
      const b = structuredClone(body)
      const user = b.messages[0]
      const parts = user.content
      parts[parts.length - 1] = {...parts[parts.length - 1], text: t.text}
      return b
    },
    call(t, cwd, id) {
      if (t.kind === 'create') return {name: 'Write', input: {file_path: path.join(cwd, t.file), content: t.content + '\n'}, result: `File created successfully at: ${path.join(cwd, t.file)} (file state is current in your context — no need to Read it back)`}
      return {name: 'Bash', input: {command: t.shell, description: t.kind === 'append' ? `Append a line to ${t.file}` : `Rename ${t.file} to ${t.to}`}, result: '(Bash completed with no output)'}
    },
    addTurn(b, c, id, final) {
      b.messages.push({role: 'assistant', content: [{type: 'tool_use', id, name: c.name, input: c.input}]})
      b.messages.push({role: 'user', content: [{tool_use_id: id, type: 'tool_result', content: c.result}]})
      if (final !== undefined) b.messages.push({role: 'assistant', content: [{type: 'text', text: final}]})
    },
    addUser(b, text) {
      b.messages.push({role: 'user', content: [{type: 'text', text}]})
    },
    async render(family, b) {
      return renderPrompt(family.chat, anthropic.toPromptRequest(b, family.chat, () => {}))
    },
  },
  codex: {
    dir: 'codex',
    route: 'responses',
    withTask(body, t) {
      const b = structuredClone(body)
      const last = b.input[b.input.length - 1]
      last.content = [{type: 'input_text', text: t.text}]
      return b
    },
    call(t, cwd, id) {
      if (t.kind === 'create') {
        const patch = `*** Begin Patch\n*** Add File: ${t.file}\n+${t.content}\n*** End Patch`
        return {custom: true, name: 'apply_patch', input: patch, result: `Exit code: 0\nWall time: 0.${int(0, 3)} seconds\nOutput:\nSuccess. Updated the following files:\nA ${t.file}\n`}
      }
      return {name: 'exec_command', input: {cmd: t.shell}, result: `Chunk ID: ${hex(6)}\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n`}
    },
    addTurn(b, c, id, final) {
      if (c.custom) {
        b.input.push({type: 'custom_tool_call', status: 'completed', call_id: id, name: c.name, input: c.input})
        b.input.push({type: 'custom_tool_call_output', call_id: id, output: c.result})
      } else {
        b.input.push({type: 'function_call', status: 'completed', name: c.name, arguments: JSON.stringify(c.input), call_id: id})
        b.input.push({type: 'function_call_output', call_id: id, output: c.result})
      }
      if (final !== undefined) b.input.push({type: 'message', role: 'assistant', content: [{type: 'output_text', text: final, annotations: []}]})
    },
    addUser(b, text) {
      b.input.push({type: 'message', role: 'user', content: [{type: 'input_text', text}]})
    },
    async render(family, b) {
      const {request} = responses.toChatRequest(b, [], family.chat, () => undefined, new AbortController().signal, () => {})
      return renderPrompt(family.chat, request)
    },
  },
  opencode: {
    dir: 'opencode',
    route: 'chat_completions',
    withTask(body, t) {
      const b = structuredClone(body)
      b.messages[b.messages.length - 1] = {role: 'user', content: rand() < 0.5 ? `"${t.text}"` : t.text}
      return b
    },
    call(t, cwd, id) {
      if (t.kind === 'create') return {name: 'write', input: {filePath: path.join(cwd, t.file), content: t.content + '\n'}, result: 'Wrote file successfully.'}
      return {name: 'bash', input: {command: t.shell, description: t.kind === 'append' ? `Append a line to ${t.file}` : `Rename ${t.file} to ${t.to}`}, result: '(no output)'}
    },
    addTurn(b, c, id, final) {
      b.messages.push({role: 'assistant', content: '', tool_calls: [{id, type: 'function', function: {name: c.name, arguments: JSON.stringify(c.input)}}]})
      b.messages.push({role: 'tool', tool_call_id: id, content: c.result})
      if (final !== undefined) b.messages.push({role: 'assistant', content: final})
    },
    addUser(b, text) {
      b.messages.push({role: 'user', content: text})
    },
    async render(family, b) {
      return renderPrompt(family.chat, chatApi.toChatRequest(b, new AbortController().signal, () => {}))
    },
  },
}

// Hermes Agent ships only outside the registries reachable here: its request is the one in
// test/agents/fixtures/hermes-request.json (system prompt and tools from its public source), sent as Chat Completions.
agents.hermes = {
  ...agents.opencode,
  dir: 'hermes',
  withTask(body, t) {
    const b = structuredClone(body)
    b.messages[b.messages.length - 1] = {role: 'user', content: t.text}
    return b
  },
  call(t, cwd) {
    if (t.kind === 'create') return {name: 'write_file', input: {path: t.file, content: t.content + '\n'}, result: JSON.stringify({bytes_written: Buffer.byteLength(t.content + '\n'), dirs_created: false})}
    return {name: 'terminal', input: {command: t.shell}, result: JSON.stringify({output: '', exit_code: 0, error: null})}
  },
}

/** The first request of a turn with tools in a capture folder, and the cwd and date it was captured with. */
function captured(dir) {
  for (const f of readdirSync(dir).sort()) {
    const body = JSON.parse(readFileSync(path.join(dir, f), 'utf8'))
    if ((body.tools ?? []).length > 0) return body
  }
  throw new Error(`no request with tools in ${dir}`)
}
function captureCwd(body) {
  const s = JSON.stringify(body)
  const m = /Primary working directory: (\/[^\s"\\]+)/.exec(s) ?? /<cwd>(\/[^<]+)<\/cwd>/.exec(s) ?? /[Ww]orking directory: (\/[^\s"\\]+)/.exec(s)
  if (!m) throw new Error('no working directory found in the captured request')
  return m[1]
}
function substitute(body, from, to) {
  let s = JSON.stringify(body)
  for (const [a, b] of from.map((x, i) => [x, to[i]])) s = s.split(a).join(b)
  return JSON.parse(s)
}

const manifest = await readManifest(opt.package)
const family = await load(opt.package, manifest)
const heads = new Map()
const lines = []
const stats = {}
const n = Number(opt.n)
const nVal = Number(opt.val)

/** The text the model generates after prompt `before`, read off the render `after` (up to and with <|im_end|>). */
function generated(before, after) {
  if (!after.startsWith(before)) throw new Error('a later render does not extend the earlier prompt')
  const end = after.indexOf('<|im_end|>', before.length)
  return after.slice(before.length, end + '<|im_end|>'.length)
}

for (const [name, a] of Object.entries(agents)) {
  const base = captured(path.join(opt.captures, a.dir))
  const cwd0 = captureCwd(base)
  const date0 = /\d{4}-\d{2}-\d{2}/.exec(JSON.stringify(base))?.[0] ?? '@@no-date@@'
  stats[name] = {train: 0, val: 0, maxTokens: 0, minTokens: Infinity}
  const pool = Array.from({length: Number(opt.heads)}, () => [cwdName(), date()])
  for (let i = 0; i < n + nVal; i++) {
    const split = i < nVal ? 'val' : 'train'
    // a pool of working folders and dates per agent: each distinct prompt head travels once
    const [cwd, day] = pool[i % pool.length]
    const body0 = substitute(base, [cwd0, date0], [cwd, day])
    // a few earlier tasks of the same session come first now and then (their assistant turns are trained too)
    const earlier = split === 'val' ? 0 : pick([0, 0, 1, 1, 2, 3, 4, 5])
    const tasks = Array.from({length: earlier + 1}, task)
    let body = a.withTask(body0, tasks[0])
    const segs = []
    for (let k = 0; k < tasks.length; k++) {
      const t = tasks[k]
      if (k > 0) a.addUser(body, rand() < 0.5 && name === 'opencode' ? `"${t.text}"` : t.text)
      const r1 = (await a.render(family, body)).text
      const c = a.call(t, cwd, name === 'claude' ? `toolu_${hex(24)}` : `call_${hex(24)}`)
      const id = name === 'claude' ? `toolu_${hex(24)}` : `call_${hex(24)}`
      const b2 = structuredClone(body)
      a.addTurn(b2, c, id)
      const r2 = (await a.render(family, b2)).text
      const a1 = generated(r1, r2)
      // the final answer, in the same think form the tool-call turn had (the generation prompt is the same)
      const thinkPart = a1.slice(0, a1.indexOf('<tool_call>'))
      const a2 = thinkPart + t.done + '<|im_end|>'
      if (k === tasks.length - 1) {
        // earlier tasks appear in r1 as the template re-renders them (reasoning dropped): their answers are
        // marked from the rendered text, the last task from the generation prompts
        const pieces = splitEarlier(r1)
        segs.push(...pieces, [a1, 1], [r2.slice(r1.length + a1.length), 0], [a2, 1])
        const tokens = (await a.render(family, b2)).tokens.length
        stats[name].maxTokens = Math.max(stats[name].maxTokens, tokens)
        stats[name].minTokens = Math.min(stats[name].minTokens, tokens)
      }
      a.addTurn(body, c, id, t.done)
    }
    // the prompt head (system prompt + tools) is shared by many transcripts: stored once
    const first = segs[0][0]
    const at = first.indexOf(tasks[0].text)
    const headText = first.slice(0, at > 0 ? at : 0)
    const hid = createHash('sha256').update(headText).digest('hex').slice(0, 16)
    if (!heads.has(hid)) {
      heads.set(hid, headText)
      lines.push(JSON.stringify({head: hid, text: headText}))
    }
    segs[0] = [first.slice(headText.length), 0]
    const last = tasks[tasks.length - 1]
    lines.push(JSON.stringify({agent: name, split, head: hid, segments: segs, task: last}))
    stats[name][split] += 1
  }
  console.log(name, JSON.stringify(stats[name]))
}

/** The prompt r1 as segments: the assistant turns of earlier tasks marked for loss (the last opener is the generation prompt). */
function splitEarlier(r1) {
  const open = '<|im_start|>assistant\n'
  const starts = []
  for (let s = r1.indexOf(open); s >= 0; s = r1.indexOf(open, s + 1)) starts.push(s)
  starts.pop()
  const out = []
  let pos = 0
  for (const s of starts) {
    const e = r1.indexOf('<|im_end|>', s) + '<|im_end|>'.length
    out.push([r1.slice(pos, s + open.length), 0], [r1.slice(s + open.length, e), 1])
    pos = e
  }
  out.push([r1.slice(pos), 0])
  return out
}

writeFileSync(opt.out, gzipSync(lines.join('\n') + '\n'))
console.log(`wrote ${opt.out}: ${heads.size} heads, ${lines.length - heads.size} transcripts`)
await family.close()
