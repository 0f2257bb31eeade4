// The backend table's op query (core-native/include/splash/backend.h splash_backend_supports_op), through
// backendInfo().ops: the CPU backend has every op the model graph needs and the optional token-choice and chunked
// GDN ops, and none of the decode-graph ops or the fused residual norm (device backends only).
import t from 'tap'
import {native} from '../../src/native/native.js'

const REQUIRED = [
  'buffer_alloc', 'buffer_free', 'synchronize', 'copy_to_device', 'copy_to_host', 'copy2d', 'memset_zero', 'matmul',
  'dequant_row', 'embed', 'rmsnorm', 'gated_rmsnorm', 'layer_norm', 'add', 'add_bias', 'swiglu', 'gelu', 'gated_add',
  'sigmoid_gate', 'rope', 'rope_seq', 'rope_table', 'attention', 'seg_attention', 'conv1d_silu', 'gdn_gates',
  'gdn_recurrent', 'moe',
]

t.test('the CPU backend reports its ops', async t => {
  const saved = process.env.SPLASH_BACKEND
  process.env.SPLASH_BACKEND = 'cpu'
  t.teardown(() => {
    if (saved === undefined) delete process.env.SPLASH_BACKEND
    else process.env.SPLASH_BACKEND = saved
  })
  const info = native.backendInfo()
  t.equal(info.backend, 'cpu')
  t.same(info.ops, [...REQUIRED.slice(0, -1), 'gdn_chunked', 'moe', 'argmax_rows', 'sample_rows'], 'in table order')
  for (const op of REQUIRED) t.ok(info.ops.includes(op), op)
  for (const op of ['graph_capture_begin', 'graph_capture_end', 'graph_launch', 'graph_free', 'graph_epoch', 'embed_dev', 'rope_seq_dev', 'rows_at', 'add_rmsnorm', 'get_proc_address'])
    t.notOk(info.ops.includes(op), `${op}: not on the CPU`)
})
