// DFlash 2's candidate selector (tools/reference/dflash2_reference.py, CandidateSelector): each drafted
// row t keeps the top-k tokens of its (transformed) logits U_t as candidates; the drafts are chosen left to right,
// the score of candidate b after the previous draft a (the anchor for the first row) being
//   score_t(b | a) = U_t(b) + Σ_r A[a][r] · P(h_t)[r] · B[b][r]
// with A, B the predecessor and successor codebooks [V, rank] and P the hidden projection of the row's normed hidden
// state. T = 0 takes the argmax (the first of equal scores); T > 0 draws from q_t = softmax(score_t / T) over the k
// candidates with the row's uniform, and q_t (zero outside the candidates) goes to the verify pass, whose rejection
// rule (sampler/speculative.cpp) keeps the output exactly the target's distribution. Temperature is the only
// sampling parameter the selector applies, as in the reference code: any q keeps the rejection rule exact.
//
// The projection and the codebook rows (embed: every candidate's successor and predecessor rows, and the anchor's)
// run through the backend; the walk, a few k·rank multiply-adds per row, runs on the host.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/hybrid_model.h"
#include "sampler/sampler.h"

namespace splash {

void draft2::top_k(const float* v, int V, int k, int32_t* ids, float* vals) {
  // the k best so far, kept sorted: best first, equal values by lower index
  int n = 0;
  for (int i = 0; i < V; ++i) {
    const float x = v[i];
    if (n == k && !(x > vals[k - 1])) continue;
    int at = n < k ? n++ : k - 1;
    while (at > 0 && x > vals[at - 1]) {
      vals[at] = vals[at - 1];
      ids[at] = ids[at - 1];
      --at;
    }
    vals[at] = x;
    ids[at] = i;
  }
}

void draft2::transform_logits(float* x, size_t n, float mul, float softcap) {
  if (softcap > 0.f) {
    for (size_t i = 0; i < n; ++i) x[i] = softcap * std::tanh(x[i] * mul / softcap);
  } else if (mul != 1.f) {
    for (size_t i = 0; i < n; ++i) x[i] *= mul;
  }
}

void HybridModel::draft_select(std::vector<DraftItem>& items, const std::vector<size_t>& roff, const float* sel, const float* lh) {
  const DraftConfig& d = dcfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int V = cfg_.V, k = d.sel_k, rank = d.sel_rank, ni = int(items.size());
  // the walked rows, packed: item i's at soff[i]..soff[i+1]
  std::vector<size_t> soff(size_t(ni) + 1, 0);
  for (int i = 0; i < ni; ++i) soff[i + 1] = soff[i] + items[i].sample->rows.size();
  const int R = int(soff.back()), Nk = R * k;
  std::vector<int32_t> cand(static_cast<size_t>(Nk));
  std::vector<float> unary(static_cast<size_t>(Nk));
  std::vector<int32_t> anchors(static_cast<size_t>(ni));
  float* hs = buf(kDSelH, size_t(R) * d.H);
  for (int i = 0; i < ni; ++i) {
    anchors[i] = items[i].anchor;
    const size_t n = soff[i + 1] - soff[i];
    be->copy2d(bc, hs + soff[i] * d.H, 0, sel + roff[i] * d.H, 0, n * d.H * 4, 1);
    for (size_t t = 0; t < n; ++t) {  // the transform is increasing: the top-k of the raw logits, then transformed
      const size_t r = soff[i] + t;
      draft2::top_k(lh + (roff[i] + t) * V, V, k, cand.data() + r * k, unary.data() + r * k);
      draft2::transform_logits(unary.data() + r * k, size_t(k), d.out_mul, d.softcap);
    }
  }
  // device: P(h) [R, rank], then successor rows of the candidates, predecessor rows of the candidates and anchors
  float* p = buf(kDSelP, size_t(R) * rank);
  be->matmul(bc, &dsel_proj_, hs, R, p, rank);
  float* cb = buf(kDSelCb, (size_t(2) * Nk + ni) * rank);
  be->embed(bc, &dsel_succ_, cand.data(), Nk, cb);
  be->embed(bc, &dsel_pred_, cand.data(), Nk, cb + size_t(Nk) * rank);
  be->embed(bc, &dsel_pred_, anchors.data(), ni, cb + size_t(2) * Nk * rank);
  std::vector<float>& hp = d2h_.hp;
  std::vector<float>& rows = d2h_.rows;
  hp.resize(size_t(R) * rank);
  rows.resize((size_t(2) * Nk + ni) * rank);
  be->copy_to_host(bc, hp.data(), p, hp.size() * 4);
  be->copy_to_host(bc, rows.data(), cb, rows.size() * 4);
  check_backend();
  const float* succ = rows.data();
  const float* pred = succ + size_t(Nk) * rank;
  std::vector<float> ap(static_cast<size_t>(rank));
  std::vector<double> score(static_cast<size_t>(k));
  std::vector<float> q(static_cast<size_t>(k));
  for (int i = 0; i < ni; ++i) {
    DraftItem& it = items[i];
    Sequence* s = it.seq;
    const double T = it.sample->params.temperature;
    const float* a = pred + (size_t(Nk) + i) * rank;  // the anchor's predecessor row
    const int n = int(soff[i + 1] - soff[i]);
    if (T > 0) s->draft_q.assign(size_t(n) * V, 0.f);
    it.sampled.clear();
    for (int t = 0; t < n; ++t) {
      const size_t row = soff[i] + size_t(t);
      for (int x = 0; x < rank; ++x) ap[x] = a[x] * hp[row * rank + x];
      int best = 0;
      for (int j = 0; j < k; ++j) {
        const float* b = succ + (row * k + j) * rank;
        double dot = 0;
        for (int x = 0; x < rank; ++x) dot += double(ap[x]) * b[x];
        score[j] = double(unary[row * k + j]) + dot;
        if (score[j] > score[best]) best = j;
      }
      int pick = best;
      if (T > 0) {
        double total = 0;
        for (int j = 0; j < k; ++j) total += std::exp((score[j] - score[best]) / T);
        for (int j = 0; j < k; ++j) q[j] = float(std::exp((score[j] - score[best]) / T) / total);
        pick = sampler::draw_probs(q.data(), k, it.sample->rows[size_t(t)].uniform);
        float* qr = s->draft_q.data() + size_t(t) * V;
        for (int j = 0; j < k; ++j) qr[cand[row * k + j]] = q[j];
      }
      sampler::Sampled o;
      o.token = cand[row * k + size_t(pick)];
      it.sampled.push_back(o);
      a = pred + (row * k + size_t(pick)) * rank;
    }
  }
}

}  // namespace splash
