#include "engine/serving/serving_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lazyscope {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const std::size_t i = std::size_t(std::ceil(q * double(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  return p;
}

}  // namespace lazyscope
