#!/usr/bin/env node
// Captures the requests a real coding agent sends, for tools/train/agent-render.mjs. It serves just enough of the
// Anthropic Messages, OpenAI Responses and Chat Completions wires (streaming) to play a scripted assistant: the
// first request of a turn gets one tool call that writes the file named by --file with --content through the
// agent's own tool, the request carrying its result gets a short final answer, and side requests (titles,
// summaries) get a short text. With --shell CMD the tool call runs CMD through the agent's shell tool instead. Every request body is stored as <out>/<n>-<route>.json. Run the agent through its
// launcher against it, e.g.:
//   node tools/train/agent-capture.mjs --port 18150 --out /tmp/cap/claude --cwd /tmp/w --file notes.txt --content hi &
//   (cd /tmp/w && SPLASH_PORT=18150 node bin/run.js claude -p "create a file named notes.txt containing hi")
import {mkdirSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import {parseArgs} from 'node:util'

const {values: opt} = parseArgs({
  options: {
    port: {type: 'string', default: '18150'},
    out: {type: 'string'},
    cwd: {type: 'string', default: process.cwd()},
    file: {type: 'string', default: 'notes.txt'},
    content: {type: 'string', default: 'hello'},
    model: {type: 'string', default: 'splash/default'},
    window: {type: 'string', default: '131072'},
    shell: {type: 'string'},
  },
})
if (!opt.out) throw new Error('--out DIR is required')
mkdirSync(opt.out, {recursive: true})
let n = 0
const FINAL = `Created ${opt.file}.`
const abs = path.join(opt.cwd, opt.file)
const body = opt.content.endsWith('\n') ? opt.content : opt.content + '\n'

/** The tool call that performs the task with whichever file tool the agent offers. */
function toolCall(names) {
  if (opt.shell) {
    if (names.includes('Bash')) return {name: 'Bash', input: {command: opt.shell, description: 'Run the command'}}
    if (names.includes('bash')) return {name: 'bash', input: {command: opt.shell, description: 'Run the command'}}
    if (names.includes('exec_command')) return {name: 'exec_command', input: {cmd: opt.shell}}
    if (names.includes('terminal')) return {name: 'terminal', input: {command: opt.shell}}
  }
  if (names.includes('Write')) return {name: 'Write', input: {file_path: abs, content: body}}
  if (names.includes('write')) return {name: 'write', input: {filePath: abs, content: body}}
  if (names.includes('write_file')) return {name: 'write_file', input: {path: abs, content: body}}
  if (names.includes('apply_patch')) {
    const patch = `*** Begin Patch\n*** Add File: ${opt.file}\n${body.split('\n').slice(0, -1).map(l => '+' + l).join('\n')}\n*** End Patch`
    return {name: 'apply_patch', custom: patch}
  }
  throw new Error(`no file tool among ${names.join(', ')}`)
}

function sse(res, events) {
  res.writeHead(200, {'content-type': 'text/event-stream', 'cache-control': 'no-cache'})
  for (const [event, data] of events) res.write((event ? `event: ${event}\n` : '') + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
  res.end()
}

function anthropic(req, res) {
  const names = (req.tools ?? []).map(t => t.name)
  const hasResult = req.messages.some(m => Array.isArray(m.content) && m.content.some(b => b.type === 'tool_result'))
  const wantsTool = names.length > 0 && !hasResult
  const usage = {input_tokens: 100, output_tokens: 10, cache_read_input_tokens: 0, cache_creation_input_tokens: 0}
  const ev = [['message_start', {type: 'message_start', message: {id: `msg_${n}`, type: 'message', role: 'assistant', model: opt.model, content: [], stop_reason: null, stop_sequence: null, usage}}]]
  if (wantsTool) {
    const c = toolCall(names)
    ev.push(['content_block_start', {type: 'content_block_start', index: 0, content_block: {type: 'tool_use', id: `toolu_${n}`, name: c.name, input: {}}}])
    ev.push(['content_block_delta', {type: 'content_block_delta', index: 0, delta: {type: 'input_json_delta', partial_json: JSON.stringify(c.input)}}])
  } else {
    ev.push(['content_block_start', {type: 'content_block_start', index: 0, content_block: {type: 'text', text: ''}}])
    ev.push(['content_block_delta', {type: 'content_block_delta', index: 0, delta: {type: 'text_delta', text: hasResult ? FINAL : 'ok'}}])
  }
  ev.push(['content_block_stop', {type: 'content_block_stop', index: 0}])
  ev.push(['message_delta', {type: 'message_delta', delta: {stop_reason: wantsTool ? 'tool_use' : 'end_turn', stop_sequence: null}, usage: {output_tokens: 10}}])
  ev.push(['message_stop', {type: 'message_stop'}])
  sse(res, ev)
}

function responses(req, res) {
  const names = (req.tools ?? []).map(t => t.name).filter(Boolean)
  const items = Array.isArray(req.input) ? req.input : []
  const hasResult = items.some(i => i.type === 'function_call_output' || i.type === 'custom_tool_call_output')
  const wantsTool = names.length > 0 && !hasResult
  const id = `resp_${n}`
  let item
  if (wantsTool) {
    const c = toolCall(names)
    item = c.custom !== undefined
      ? {type: 'custom_tool_call', id: `ctc_${n}`, call_id: `call_${n}`, name: c.name, input: c.custom, status: 'completed'}
      : {type: 'function_call', id: `fc_${n}`, call_id: `call_${n}`, name: c.name, arguments: JSON.stringify(c.input), status: 'completed'}
  } else {
    item = {type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{type: 'output_text', text: hasResult ? FINAL : 'ok', annotations: []}]}
  }
  const usage = {input_tokens: 100, input_tokens_details: {cached_tokens: 0}, output_tokens: 10, output_tokens_details: {reasoning_tokens: 0}, total_tokens: 110}
  const base = {id, object: 'response', created_at: Math.floor(Date.now() / 1000), model: opt.model, status: 'in_progress', output: []}
  const ev = [['response.created', {type: 'response.created', sequence_number: 0, response: base}]]
  ev.push(['response.output_item.added', {type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: {...item, status: 'in_progress'}}])
  if (item.type === 'message') ev.push(['response.output_text.delta', {type: 'response.output_text.delta', sequence_number: 2, item_id: item.id, output_index: 0, content_index: 0, delta: item.content[0].text}])
  ev.push(['response.output_item.done', {type: 'response.output_item.done', sequence_number: 3, output_index: 0, item}])
  ev.push(['response.completed', {type: 'response.completed', sequence_number: 4, response: {...base, status: 'completed', output: [item], usage}}])
  sse(res, ev)
}

function chat(req, res) {
  const names = (req.tools ?? []).map(t => t.function?.name).filter(Boolean)
  const hasResult = req.messages.some(m => m.role === 'tool')
  const wantsTool = names.length > 0 && !hasResult
  const chunk = (delta, finish) => ({id: `chatcmpl-${n}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: opt.model, choices: [{index: 0, delta, finish_reason: finish}]})
  const ev = []
  if (wantsTool) {
    const c = toolCall(names)
    ev.push([null, chunk({role: 'assistant', tool_calls: [{index: 0, id: `call_${n}`, type: 'function', function: {name: c.name, arguments: JSON.stringify(c.input)}}]}, null)])
    ev.push([null, chunk({}, 'tool_calls')])
  } else {
    ev.push([null, chunk({role: 'assistant', content: hasResult ? FINAL : 'ok'}, null)])
    ev.push([null, chunk({}, 'stop')])
  }
  ev.push([null, {...chunk({}, null), choices: [], usage: {prompt_tokens: 100, completion_tokens: 10, total_tokens: 110}}])
  ev.push([null, '[DONE]'])
  sse(res, ev)
}

const server = http.createServer((req, res) => {
  const chunks = []
  req.on('data', c => chunks.push(c))
  req.on('end', () => {
    const url = req.url.split('?')[0]
    if (req.method === 'GET') {
      if (url === '/v1/models') {
        res.writeHead(200, {'content-type': 'application/json'})
        res.end(JSON.stringify({object: 'list', data: [{id: opt.model, object: 'model', owned_by: 'splash', context_length: Number(opt.window), max_model_len: Number(opt.window)}]}))
      } else {
        res.writeHead(200, {'content-type': 'application/json'})
        res.end(JSON.stringify({status: 'ready'}))
      }
      return
    }
    const text = Buffer.concat(chunks).toString('utf8')
    let parsed
    try {
      parsed = JSON.parse(text)
    } catch {
      res.writeHead(400).end()
      return
    }
    n += 1
    const route = url.replace(/^\/v1\//, '').replace(/\//g, '_')
    writeFileSync(path.join(opt.out, `${String(n).padStart(3, '0')}-${route}.json`), JSON.stringify(parsed, null, 1))
    if (url === '/v1/messages/count_tokens') {
      res.writeHead(200, {'content-type': 'application/json'})
      res.end(JSON.stringify({input_tokens: 100}))
    } else if (url === '/v1/messages') anthropic(parsed, res)
    else if (url === '/v1/responses') responses(parsed, res)
    else if (url === '/v1/chat/completions') chat(parsed, res)
    else res.writeHead(404).end()
  })
})
server.listen(Number(opt.port), '127.0.0.1', () => console.log(`capture: listening on ${opt.port}, writing ${opt.out}`))
