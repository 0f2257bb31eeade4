// A made-up byte-level BPE tokenizer.json of any vocabulary size, with the Qwen3.5 special tokens at their ids, and
// a minimal Qwen3.5-format chat template: what synthetic packages ship instead of the real (unavailable) files.
// Regular ids: 256 byte tokens (GPT-2 byte→unicode map), then merges made up deterministically (printable pairs,
// then pair + printable, …) up to `specialBase`; the specials follow in Qwen's order.

export const QWEN35_SPECIALS = [
  '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>',
  '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>',
  '<|image_pad|>', '<|video_pad|>', '<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>',
  '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>', '<tool_response>', '</tool_response>',
  '<think>', '</think>',
]
/** Tokens the template and parsers treat as text-level markers rather than control tokens (as in Qwen's files). */
const NOT_SPECIAL = new Set(['<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>', '<think>', '</think>'])

const SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/** GPT-2's reversible byte → printable unicode map. */
export function byteToUnicode(): string[] {
  const keep: number[] = []
  for (let b = 33; b <= 126; b++) keep.push(b)
  for (let b = 161; b <= 172; b++) keep.push(b)
  for (let b = 174; b <= 255; b++) keep.push(b)
  const map: string[] = new Array(256)
  let n = 0
  for (let b = 0; b < 256; b++) map[b] = keep.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + n++)
  return map
}

export interface TokenizerInfo {
  json: string
  specials: Record<string, number>
}

export function makeTokenizer(specialBase: number): TokenizerInfo {
  const bytes = byteToUnicode()
  const vocab: Record<string, number> = {}
  bytes.forEach((s, i) => (vocab[s] = i))
  let next = 256
  const merges: string[] = []
  // printable ASCII including space (Ġ): the pieces merges are made of
  const printable = [32, ...Array.from({length: 94}, (_, i) => 33 + i)].map(b => bytes[b])
  let level = printable
  outer: while (next < specialBase) {
    const grown: string[] = []
    for (const a of level) {
      for (const b of printable) {
        if (next >= specialBase) break outer
        const t = a + b
        if (t in vocab) continue
        vocab[t] = next++
        merges.push(`${a} ${b}`)
        grown.push(t)
      }
    }
    level = grown
  }
  const specials: Record<string, number> = {}
  const added = QWEN35_SPECIALS.map((content, i) => {
    specials[content] = specialBase + i
    return {id: specialBase + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: !NOT_SPECIAL.has(content)}
  })
  const byteLevel = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false}
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: {type: 'NFC'},
    pre_tokenizer: {type: 'Sequence', pretokenizers: [{type: 'Split', pattern: {Regex: SPLIT_REGEX}, behavior: 'Isolated', invert: false}, byteLevel]},
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false,
      byte_fallback: false, ignore_merges: false, vocab, merges,
    },
  }
  return {json: JSON.stringify(tokenizer), specials}
}

/** A minimal chat template in the Qwen3.5 format (models/qwen3_5/chat_template.jinja): roles, tools block, XML tool calls, grouped
 *  tool responses, thinking blocks after the last user turn, and the thinking / non-thinking generation prompt. */
export const SYNTH_CHAT_TEMPLATE = `{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- if tools -%}
{{- '<|im_start|>system\\n# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>' -}}
{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\\n</tools>\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n</tool_call>' -}}
{%- if messages[0].role == 'system' -%}{{- '\\n\\n' + messages[0].content -}}{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- elif messages[0].role == 'system' -%}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
{%- if not loop.first -%}{{- '<|im_start|>system\\n' + m.content + '<|im_end|>\\n' -}}{%- endif -%}
{%- elif m.role == 'user' -%}
{%- if m.content is string -%}{{- '<|im_start|>user\\n' + m.content + '<|im_end|>\\n' -}}
{%- else -%}{{- '<|im_start|>user\\n' -}}{%- for p in m.content -%}{%- if p.type == 'text' -%}{{- p.text -}}{%- elif p.type == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}{%- endif -%}{%- endfor -%}{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- elif m.role == 'assistant' -%}
{%- set content = m.content if m.content is string else '' -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else '' -%}
{%- if not reasoning and '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip() -%}
{%- set content = content.split('</think>')[-1].lstrip() -%}
{%- endif -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if loop.index0 > ns.last_user -%}{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' -}}{%- endif -%}
{{- content -}}
{%- if m.tool_calls -%}
{%- for tc in m.tool_calls -%}
{%- set f = tc.function if tc.function else tc -%}
{%- if loop.first -%}{%- if content -%}{{- '\\n\\n' -}}{%- endif -%}{%- else -%}{{- '\\n' -}}{%- endif -%}
{{- '<tool_call>\\n<function=' + f.name + '>\\n' -}}
{%- if f.arguments is mapping -%}
{%- for k, v in f.arguments.items() -%}
{{- '<parameter=' + k + '>\\n' + (v if v is string else (v | tojson)) + '\\n</parameter>\\n' -}}
{%- endfor -%}
{%- endif -%}
{{- '</function>\\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- elif m.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\\n<tool_response>\\n' -}}{%- if m.content is string -%}{{- m.content -}}{%- else -%}{%- for p in m.content -%}{%- if p.type == 'text' -%}{{- p.text -}}{%- elif p.type == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}{%- endif -%}{%- endfor -%}{%- endif -%}{{- '\\n</tool_response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}
{%- endif -%}
`
