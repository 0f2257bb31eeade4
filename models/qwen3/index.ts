// Same text side as qwen3_5 (tokenizer, template, parsers); only the checkpoint names differ (sanitize.ts).
export {load} from '../qwen3_5/index.js'
