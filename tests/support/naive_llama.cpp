#include "support/naive_llama.h"

#include <numbers>

namespace lazyscope::testing {
namespace {

std::vector<double> linear(const float* w, int out, int in, const std::vector<double>& x) {
  std::vector<double> y(out, 0.0);
  for (int o = 0; o < out; ++o) {
    double s = 0.0;
    for (int i = 0; i < in; ++i) s += double(w[std::size_t(o) * in + i]) * x[i];
    y[o] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const float* w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = double(w[i]) * x[i] * inv;
  return y;
}

}  // namespace

NaiveLlama::NaiveLlama(const LoadedModel& model)
    : m_(model), inv_freq_(inv_freq(model.config.shape.rope, model.config.shape.head_dim)) {}

std::vector<double> NaiveLlama::inv_freq(const RopeParams& r, int D) {
  std::vector<double> f(D / 2);
  for (int i = 0; i < D / 2; ++i) f[i] = 1.0 / std::pow(double(r.theta), 2.0 * i / D);
  if (!r.llama3) return f;
  // Llama 3.1: keep high frequencies, divide low ones by `factor`, interpolate in between.
  const double low_wavelen = r.original_max_position / r.low_freq_factor;
  const double high_wavelen = r.original_max_position / r.high_freq_factor;
  for (double& v : f) {
    double wavelen = 2.0 * std::numbers::pi / v;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      v /= r.factor;
      continue;
    }
    double smooth = (r.original_max_position / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    v = (1.0 - smooth) * v / r.factor + smooth * v;
  }
  return f;
}

void NaiveLlama::rotate(std::vector<double>& x, int offset, double position) const {
  const int half = m_.config.shape.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    // fp32 angles, as the HF reference computes them.
    double angle = double(float(position) * float(inv_freq_[i]));
    double c = std::cos(angle), s = std::sin(angle);
    double a = x[offset + i], b = x[offset + i + half];
    x[offset + i] = a * c - b * s;
    x[offset + i + half] = b * c + a * s;
  }
}

void NaiveLlama::rotate_keys(NaiveKv& kv, int delta) const {
  const ModelShape& s = m_.config.shape;
  for (auto& layer : kv.k) {
    for (auto& key : layer) {
      for (int h = 0; h < s.num_kv_heads; ++h) rotate(key, h * s.head_dim, delta);
    }
  }
}

std::vector<double> NaiveLlama::forward(const std::vector<int32_t>& tokens, const std::vector<int>& positions,
                                        const NaiveKv& context, NaiveKv* produced) const {
  const ModelShape& s = m_.config.shape;
  const WeightsView w = m_.weights.view();
  const int H = s.hidden_size, D = s.head_dim, n = int(tokens.size());
  std::vector<std::vector<double>> x(n, std::vector<double>(H));
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < H; ++i) x[t][i] = w.embed[std::size_t(tokens[t]) * H + i];
  }
  produced->resize(s.num_layers);
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerWeightsView& lw = w.layers[l];
    std::vector<std::vector<double>> q(n), keys = context.k[l], values = context.v[l];
    for (int t = 0; t < n; ++t) {
      std::vector<double> h = rmsnorm(x[t], lw.attn_norm, s.rms_norm_eps);
      q[t] = linear(lw.wq, s.q_dim(), H, h);
      std::vector<double> k = linear(lw.wk, s.kv_dim(), H, h), v = linear(lw.wv, s.kv_dim(), H, h);
      for (int hd = 0; hd < s.num_heads; ++hd) rotate(q[t], hd * D, positions[t]);
      for (int hd = 0; hd < s.num_kv_heads; ++hd) rotate(k, hd * D, positions[t]);
      keys.push_back(k);
      values.push_back(v);
      produced->k[l].push_back(k);
      produced->v[l].push_back(v);
    }
    const int prior = int(context.k[l].size());
    for (int t = 0; t < n; ++t) {
      std::vector<double> attn(s.q_dim(), 0.0);
      for (int hd = 0; hd < s.num_heads; ++hd) {
        const int kvh = hd / (s.num_heads / s.num_kv_heads);
        const int visible = prior + t + 1;
        std::vector<double> scores(visible);
        double mx = -1e300;
        for (int j = 0; j < visible; ++j) {
          double dot = 0.0;
          for (int d = 0; d < D; ++d) dot += q[t][hd * D + d] * keys[j][kvh * D + d];
          scores[j] = dot / std::sqrt(double(D));
          mx = std::max(mx, scores[j]);
        }
        double sum = 0.0;
        for (double& sc : scores) sum += (sc = std::exp(sc - mx));
        for (int j = 0; j < visible; ++j) {
          for (int d = 0; d < D; ++d) attn[hd * D + d] += scores[j] / sum * values[j][kvh * D + d];
        }
      }
      std::vector<double> o = linear(lw.wo, H, s.q_dim(), attn);
      for (int i = 0; i < H; ++i) x[t][i] += o[i];
      std::vector<double> h = rmsnorm(x[t], lw.mlp_norm, s.rms_norm_eps);
      std::vector<double> g = linear(lw.w_gate, s.intermediate_size, H, h), u = linear(lw.w_up, s.intermediate_size, H, h);
      for (int i = 0; i < s.intermediate_size; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      std::vector<double> down = linear(lw.w_down, H, s.intermediate_size, g);
      for (int i = 0; i < H; ++i) x[t][i] += down[i];
    }
  }
  std::vector<double> h = rmsnorm(x.back(), w.final_norm, s.rms_norm_eps);
  return linear(w.lm_head, s.vocab_size, H, h);
}

}  // namespace lazyscope::testing
