#include "kernels/cpu/ops.h"

#include <cblas.h>

#include <cmath>
#include <cstring>

namespace lazyscope::cpu {

void embedding(const int32_t* ids, int n, const float* table, int hidden, float* out) {
  for (int i = 0; i < n; ++i) {
    std::memcpy(out + int64_t(i) * hidden, table + int64_t(ids[i]) * hidden, sizeof(float) * hidden);
  }
}

void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * cols;
    float* o = out + int64_t(r) * cols;
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += double(xr[c]) * double(xr[c]);
    float inv = 1.0f / std::sqrt(float(sum / cols) + eps);
    for (int c = 0; c < cols; ++c) o[c] = weight[c] * (xr[c] * inv);
  }
}

void matmul_wt(const float* a, const float* w, int m, int n, int k, float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, w, k, 0.0f, out, n);
}

void swiglu(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

int32_t argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void set_num_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace lazyscope::cpu
