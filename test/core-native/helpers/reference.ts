// A naive fp64 forward pass of the Qwen hybrid family, written straight from the
// transformers Qwen3.5 model's math (recurrent GDN, token by token), used to check the native
// core's logits. Weights are the dequantised values the engine reads (TinyPackage.weights).
import type {TinyPackage} from './tiny-package.js'

type Vec = Float64Array

export interface RefState {
  conv: Vec[] // per layer: last K−1 pre-conv inputs [(K−1)·C] (linear layers)
  ssm: Vec[] // per layer: [nv, dk, dv]
  keys: Vec[][] // per layer: cached post-norm, post-RoPE keys [nkv·hd] per position
  values: Vec[][]
  len: number
}

const silu = (x: number) => x / (1 + Math.exp(-x))
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))
const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)))

export class Reference {
  private readonly c
  constructor(private readonly pkg: TinyPackage) {
    this.c = pkg.config
  }

  private w(name: string): Float32Array {
    const t = this.pkg.weights.get(name)
    if (!t) throw new Error(`reference: no tensor ${name}`)
    return t
  }

  /** y = W x for W [rows, cols] (expert `e` of a stacked weight when given). */
  private linear(name: string, x: Vec, rows: number, e = 0): Vec {
    const W = this.w(name)
    const cols = x.length
    const y = new Float64Array(rows)
    const base = e * rows * cols
    for (let r = 0; r < rows; r++) {
      let s = 0
      const o = base + r * cols
      for (let k = 0; k < cols; k++) s += W[o + k] * x[k]
      y[r] = s
    }
    return y
  }

  private rmsnorm(x: Vec, w: Float32Array, off = 0, n = x.length): void {
    let ss = 0
    for (let i = 0; i < n; i++) ss += x[off + i] ** 2
    const inv = 1 / Math.sqrt(ss / n + this.c.rms_norm_eps)
    for (let i = 0; i < n; i++) x[off + i] = x[off + i] * inv * w[i]
  }

  newState(): RefState {
    const c = this.c
    const C = 2 * c.linear_num_key_heads * c.linear_key_head_dim + c.linear_num_value_heads * c.linear_value_head_dim
    const st: RefState = {conv: [], ssm: [], keys: [], values: [], len: 0}
    for (let i = 0; i < c.num_hidden_layers; i++) {
      const lin = c.layer_types[i] === 'linear_attention'
      st.conv.push(new Float64Array(lin ? (c.linear_conv_kernel_dim - 1) * C : 0))
      st.ssm.push(new Float64Array(lin ? c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim : 0))
      st.keys.push([])
      st.values.push([])
    }
    return st
  }

  /** Runs tokens through the model, returning the logits after each one. */
  forward(st: RefState, tokens: number[]): Vec[] {
    const out: Vec[] = []
    for (const t of tokens) out.push(this.token(st, t))
    return out
  }

  private token(st: RefState, tok: number): Vec {
    const c = this.c
    const H = c.hidden_size
    const emb = this.w('embed_tokens')
    const h = new Float64Array(H)
    for (let i = 0; i < H; i++) h[i] = emb[tok * H + i]
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const p = `layers.${l}.`
      const x = Float64Array.from(h)
      this.rmsnorm(x, this.w(`${p}input_layernorm`))
      const y = c.layer_types[l] === 'linear_attention' ? this.gdn(st, l, x) : this.attention(st, l, x)
      for (let i = 0; i < H; i++) h[i] += y[i]
      const x2 = Float64Array.from(h)
      this.rmsnorm(x2, this.w(`${p}post_attention_layernorm`))
      const m = c.num_experts > 0 ? this.moe(l, x2) : this.mlp(`${p}mlp.`, x2, c.intermediate_size)
      for (let i = 0; i < H; i++) h[i] += m[i]
    }
    st.len++
    this.rmsnorm(h, this.w('norm'))
    return this.linear(c.tie_word_embeddings ? 'embed_tokens' : 'lm_head', h, c.vocab_size)
  }

  private gdn(st: RefState, l: number, x: Vec): Vec {
    const c = this.c
    const p = `layers.${l}.linear_attn.`
    const nk = c.linear_num_key_heads, nv = c.linear_num_value_heads
    const dk = c.linear_key_head_dim, dv = c.linear_value_head_dim
    const Dk = nk * dk, Dv = nv * dv, C = 2 * Dk + Dv, K = c.linear_conv_kernel_dim
    const qkv = this.linear(`${p}in_proj_qkv`, x, C)
    const z = this.linear(`${p}in_proj_z`, x, Dv)
    const b = this.linear(`${p}in_proj_b`, x, nv)
    const a = this.linear(`${p}in_proj_a`, x, nv)
    // causal depthwise conv over [state (K−1 rows) | current], then SiLU; state keeps the last K−1 inputs
    const cw = this.w(`${p}conv1d`)
    const conv = st.conv[l]
    const y = new Float64Array(C)
    for (let ch = 0; ch < C; ch++) {
      let s = cw[ch * K + K - 1] * qkv[ch]
      for (let j = 0; j < K - 1; j++) s += cw[ch * K + j] * conv[j * C + ch]
      y[ch] = silu(s)
    }
    conv.copyWithin(0, C)
    conv.set(qkv, (K - 2) * C)
    const Alog = this.w(`${p}A_log`), dtb = this.w(`${p}dt_bias`), gn = this.w(`${p}norm`)
    const S = st.ssm[l]
    const o = new Float64Array(Dv)
    for (let hv = 0; hv < nv; hv++) {
      const kh = Math.floor(hv / (nv / nk))
      const beta = sigmoid(b[hv])
      const g = -Math.exp(Alog[hv]) * softplus(a[hv] + dtb[hv])
      const q = y.slice(kh * dk, kh * dk + dk)
      const k = y.slice(Dk + kh * dk, Dk + kh * dk + dk)
      const v = y.slice(2 * Dk + hv * dv, 2 * Dk + hv * dv + dv)
      const qn = Math.sqrt(q.reduce((s, e) => s + e * e, 0) + 1e-6)
      const kn = Math.sqrt(k.reduce((s, e) => s + e * e, 0) + 1e-6)
      for (let i = 0; i < dk; i++) {
        q[i] = q[i] / qn / Math.sqrt(dk)
        k[i] = k[i] / kn
      }
      const base = hv * dk * dv
      const decay = Math.exp(g)
      for (let i = 0; i < dk * dv; i++) S[base + i] *= decay
      for (let j = 0; j < dv; j++) {
        let u = 0
        for (let i = 0; i < dk; i++) u += S[base + i * dv + j] * k[i]
        const d = (v[j] - u) * beta
        for (let i = 0; i < dk; i++) S[base + i * dv + j] += k[i] * d
      }
      for (let j = 0; j < dv; j++) {
        let s = 0
        for (let i = 0; i < dk; i++) s += S[base + i * dv + j] * q[i]
        o[hv * dv + j] = s
      }
      // gated RMSNorm: norm, ·w, ·silu(z)
      let ss = 0
      for (let j = 0; j < dv; j++) ss += o[hv * dv + j] ** 2
      const inv = 1 / Math.sqrt(ss / dv + c.rms_norm_eps)
      for (let j = 0; j < dv; j++) o[hv * dv + j] = o[hv * dv + j] * inv * gn[j] * silu(z[hv * dv + j])
    }
    return this.linear(`${p}out_proj`, o, c.hidden_size)
  }

  private rope(x: Vec, off: number, pos: number): void {
    const c = this.c
    const rd = Math.floor(c.head_dim * c.partial_rotary_factor)
    const half = rd / 2
    for (let i = 0; i < half; i++) {
      // text tokens: T = H = W = pos, so the M-RoPE section choice does not matter
      const ang = pos * Math.pow(c.rope_theta, (-2 * i) / rd)
      const cs = Math.cos(ang), sn = Math.sin(ang)
      const a = x[off + i], b = x[off + i + half]
      x[off + i] = a * cs - b * sn
      x[off + i + half] = b * cs + a * sn
    }
  }

  private attention(st: RefState, l: number, x: Vec): Vec {
    const c = this.c
    const p = `layers.${l}.self_attn.`
    const nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim
    const gated = c.attn_output_gate
    const qg = this.linear(`${p}q_proj`, x, nh * hd * (gated ? 2 : 1))
    const k = this.linear(`${p}k_proj`, x, nkv * hd)
    const v = this.linear(`${p}v_proj`, x, nkv * hd)
    const q = new Float64Array(nh * hd)
    const gate = new Float64Array(nh * hd)
    for (let h = 0; h < nh; h++)
      for (let d = 0; d < hd; d++) {
        q[h * hd + d] = qg[h * hd * (gated ? 2 : 1) + d]
        if (gated) gate[h * hd + d] = qg[h * 2 * hd + hd + d]
      }
    const pos = st.len
    for (let h = 0; h < nh; h++) {
      this.rmsnorm(q, this.w(`${p}q_norm`), h * hd, hd)
      this.rope(q, h * hd, pos)
    }
    for (let h = 0; h < nkv; h++) {
      this.rmsnorm(k, this.w(`${p}k_norm`), h * hd, hd)
      this.rope(k, h * hd, pos)
    }
    st.keys[l].push(k)
    st.values[l].push(v)
    const o = new Float64Array(nh * hd)
    const n = st.keys[l].length
    for (let h = 0; h < nh; h++) {
      const kvh = Math.floor(h / (nh / nkv))
      const sc = new Float64Array(n)
      let mx = -Infinity
      for (let t = 0; t < n; t++) {
        let s = 0
        for (let d = 0; d < hd; d++) s += q[h * hd + d] * st.keys[l][t][kvh * hd + d]
        sc[t] = s / Math.sqrt(hd)
        mx = Math.max(mx, sc[t])
      }
      let den = 0
      for (let t = 0; t < n; t++) den += sc[t] = Math.exp(sc[t] - mx)
      for (let t = 0; t < n; t++)
        for (let d = 0; d < hd; d++) o[h * hd + d] += (sc[t] / den) * st.values[l][t][kvh * hd + d]
    }
    if (gated) for (let i = 0; i < o.length; i++) o[i] *= sigmoid(gate[i])
    return this.linear(`${p}o_proj`, o, c.hidden_size)
  }

  private mlp(p: string, x: Vec, I: number, e = 0, stacked = false): Vec {
    const g = this.linear(`${p}gate_proj`, x, I, e)
    const u = this.linear(`${p}up_proj`, x, I, e)
    for (let i = 0; i < I; i++) g[i] = silu(g[i]) * u[i]
    void stacked
    return this.linear(`${p}down_proj`, g, this.c.hidden_size, e)
  }

  private moe(l: number, x: Vec): Vec {
    const c = this.c
    const p = `layers.${l}.mlp.`
    const E = c.num_experts
    const logits = this.linear(`${p}router`, x, E)
    const mx = Math.max(...logits)
    const pr = logits.map((v) => Math.exp(v - mx))
    const sum = pr.reduce((a, b) => a + b, 0)
    for (let e = 0; e < E; e++) pr[e] /= sum
    const top = [...pr.keys()].sort((a, b) => pr[b] - pr[a] || a - b).slice(0, c.num_experts_per_tok)
    const renorm = this.pkg.family === 'qwen3_5_moe' || c.norm_topk_prob
    const tsum = top.reduce((s, e) => s + pr[e], 0)
    const out = new Float64Array(c.hidden_size)
    for (const e of top.sort((a, b) => a - b)) {
      const w = renorm ? pr[e] / tsum : pr[e]
      const y = this.mlp(`${p}experts.`, x, c.moe_intermediate_size, e)
      for (let i = 0; i < out.length; i++) out[i] += w * y[i]
    }
    if (c.shared_expert_intermediate_size > 0) {
      const s = this.mlp(`${p}shared_expert.`, x, c.shared_expert_intermediate_size)
      const g = sigmoid(this.linear(`${p}shared_expert_gate`, x, 1)[0])
      for (let i = 0; i < out.length; i++) out[i] += g * s[i]
    }
    return out
  }
}
