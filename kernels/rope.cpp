#include "kernels/rope.h"

#include <cmath>
#include <numbers>

namespace lazyscope {

std::vector<float> rope_inv_freq(const RopeParams& p, int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // torch: arange(0, dim, 2).float() / dim, then base ** that, then 1 / result, all fp32.
    float exponent = float(2 * i) / float(head_dim);
    float powered = std::pow(p.theta, exponent);  // fp32 pow, as torch does
    inv[i] = 1.0f / powered;
  }
  if (!p.llama3) return inv;
  const float low_wavelen = float(p.original_max_position) / p.low_freq_factor;
  const float high_wavelen = float(p.original_max_position) / p.high_freq_factor;
  const float pi = std::numbers::pi_v<float>;
  for (int i = 0; i < half; ++i) {
    float wavelen = 2.0f * pi / inv[i];
    float scaled = wavelen > low_wavelen ? inv[i] / p.factor : inv[i];
    float smooth = (float(p.original_max_position) / wavelen - p.low_freq_factor) /
                   (p.high_freq_factor - p.low_freq_factor);
    float smoothed = (1.0f - smooth) * scaled / p.factor + smooth * scaled;
    bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    inv[i] = medium ? smoothed : scaled;
  }
  return inv;
}

void rope_rotate(float* x, int head_dim, const float* inv_freq, int64_t position) {
  const int half = head_dim / 2;
  const float pos = float(position);
  for (int i = 0; i < half; ++i) {
    float angle = pos * inv_freq[i];
    float c = float(std::cos(double(angle)));
    float s = float(std::sin(double(angle)));
    float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace lazyscope
