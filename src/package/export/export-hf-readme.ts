// The README.md that `splash package export --hf` writes next to the checkpoint: what the folder holds and the
// commands that serve it on vLLM (`method: dflash`) and SGLang (`--speculative-algorithm DFLASH`), with tensor and
// pipeline parallelism. docs/hub-and-export.md names the upstream loader versions these layouts were matched to.
import type {Manifest} from '../manifest.js'

export function exportReadme(m: Manifest, where: string, draft: boolean): string {
  const d = m.draft?.config
  const tokens = d ? d.block_size - 1 : 0
  const vllmSpec = JSON.stringify({method: 'dflash', model: `${where}/draft`, num_speculative_tokens: tokens})
  const lines = [
    `# ${m.name} (exported from a Splash package)`,
    '',
    `A Transformers checkpoint of \`${m.name}\` (${m.family}, built by ${m.provenance.builder}); ${m.weights.quant === 'bf16' ? 'bf16 weights as in the package' : `the package's ${m.weights.quant} weights dequantised`}.`,
    draft ? `\`draft/\` holds its DFlash draft (${d!.num_hidden_layers} layers, block ${d!.block_size}, tapping target layers ${JSON.stringify(d!.target_layer_ids)}).` : 'The package had no DFlash draft, so only the target is here.',
    '',
    '## vLLM',
    '',
    '```',
    `vllm serve ${where} \\`,
    ...(draft ? [`  --speculative-config '${vllmSpec}' \\`] : []),
    '  --tensor-parallel-size 2 --pipeline-parallel-size 1',
    '```',
    '',
    '## SGLang',
    '',
    '```',
    `python -m sglang.launch_server --model-path ${where} \\`,
    ...(draft ? [`  --speculative-algorithm DFLASH --speculative-draft-model-path ${where}/draft --speculative-num-draft-tokens ${d!.block_size} \\`] : []),
    '  --tp-size 2 --pp-size 1',
    '```',
    '',
    'Set the tensor-parallel size to the GPUs of one host (it must divide the attention and KV head counts); use',
    'pipeline parallelism to span hosts. Both servers expose OpenAI-compatible `/v1/chat/completions` and',
    '`/v1/completions` and an Anthropic-compatible `/v1/messages`, so clients written against Splash keep working',
    'with only the base URL changed.',
    '',
  ]
  return lines.join('\n')
}
