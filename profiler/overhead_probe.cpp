#include "profiler/overhead_probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "base/error.h"
#include "kernels/overhead_probe.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const std::size_t lo = std::size_t(std::floor(at)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

std::string format(const char* fmt, double a, double b = 0.0, double c = 0.0) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, fmt, a, b, c);
  return buffer;
}

}  // namespace

void probe_shape_from(const std::string& entry, int* heads, int* kv_heads, int* head_dim) {
  if (entry.find('/') == std::string::npos) {
    const ModelShape shape = synthetic_shape(entry);  // throws, listing the known names
    *heads = shape.num_heads;
    *kv_heads = shape.num_kv_heads;
    *head_dim = shape.head_dim;
    return;
  }
  int h = 0, kv = 0, d = 0;
  char tail = 0;
  if (std::sscanf(entry.c_str(), "%d/%d/%d%c", &h, &kv, &d, &tail) != 3) {
    throw Error("--shapes: '" + entry + "' is neither a model shape name nor HEADS/KV_HEADS/HEAD_DIM (e.g. 32/8/128)");
  }
  *heads = h;
  *kv_heads = kv;
  *head_dim = d;
}

std::vector<OverheadProbeRow> run_overhead_probe(const OverheadProbeOptions& o,
                                                 const std::function<void(const OverheadProbeRow&)>& on_row) {
  if (o.repeats < 2 || o.repeats > 1000) throw Error("--repeats must be between 2 and 1000");
  if (o.shapes.empty() || o.contexts.empty() || o.batches.empty()) {
    throw Error("overhead probe: --shapes, --contexts and --batches each need at least one value");
  }
  // Written so that NaN fails too.
  if (!(o.timing_ms >= 0.0 && o.timing_ms <= 10'000.0)) throw Error("--timing-ms must be between 0 and 10000");
  if (o.cpu_threads < 0 || o.cpu_threads > 4096) throw Error("--threads must be between 0 and 4096");
  // The whole grid is built and checked before the first shape is timed.
  std::vector<std::pair<std::string, AttentionProbeShape>> grid;
  for (const std::string& name : o.shapes) {
    AttentionProbeShape shape;
    probe_shape_from(name, &shape.num_heads, &shape.num_kv_heads, &shape.head_dim);
    shape.block_size = o.block_size;
    shape.document_tokens = o.document_tokens;
    for (int batch : o.batches) {
      for (int context : o.contexts) {
        shape.batch = batch;
        shape.context = context;
        check_probe_shape(shape);
        grid.emplace_back(name, shape);
      }
    }
  }
  const int threads = o.cpu_threads > 0 ? o.cpu_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<OverheadProbeRow> rows;
  for (const auto& [name, shape] : grid) {
    std::unique_ptr<AttentionProbe> probe = make_attention_probe(o.backend, shape, threads);
    const double target_us = 1e3 * (o.timing_ms > 0.0 ? o.timing_ms : probe->backend() == "cuda" ? 2.0 : 20.0);
    probe->time_us(false, 1);  // first touch, lazy init
    probe->time_us(true, 1);
    const double one = std::max(1e-3, 0.5 * (probe->time_us(false, 2) + probe->time_us(true, 2)));
    const int calls = std::clamp(int(target_us / one), 1, 100'000);
    probe->time_us(false, calls);  // warm clocks and caches at the measured length
    probe->time_us(true, calls);
    std::vector<double> ratios, plain, lazy;
    for (int r = 0; r < o.repeats; ++r) {
      // ABBA on even repeats, BAAB on odd ones: drift cancels within a repeat and across pairs.
      const bool lazy_first = r % 2 == 1;
      const double a1 = probe->time_us(lazy_first, calls);
      const double b1 = probe->time_us(!lazy_first, calls);
      const double b2 = probe->time_us(!lazy_first, calls);
      const double a2 = probe->time_us(lazy_first, calls);
      const double p = lazy_first ? b1 + b2 : a1 + a2;
      const double l = lazy_first ? a1 + a2 : b1 + b2;
      plain.push_back(0.5 * p);
      lazy.push_back(0.5 * l);
      ratios.push_back(l / p - 1.0);
    }
    OverheadProbeRow row;
    row.backend = probe->backend();
    row.device = probe->device();
    row.kernel = probe->kernel();
    row.shape = name;
    row.num_heads = shape.num_heads;
    row.num_kv_heads = shape.num_kv_heads;
    row.head_dim = shape.head_dim;
    row.block_size = shape.block_size;
    row.batch = shape.batch;
    row.context = shape.context;
    row.document_tokens = shape.document_tokens;
    row.repeats = o.repeats;
    row.calls = calls;
    row.plain_us = quantile(plain, 0.5);
    row.lazy_us = quantile(lazy, 0.5);
    row.overhead = quantile(ratios, 0.5);
    row.overhead_p25 = quantile(ratios, 0.25);
    row.overhead_p75 = quantile(ratios, 0.75);
    row.overhead_min = *std::min_element(ratios.begin(), ratios.end());
    row.overhead_max = *std::max_element(ratios.begin(), ratios.end());
    if (on_row) on_row(row);
    rows.push_back(row);
  }
  return rows;
}

std::string overhead_table(const std::vector<OverheadProbeRow>& rows) {
  std::string out;
  if (rows.empty()) return out;
  out += "Kernel: " + rows.front().kernel + " on " + rows.front().device + "\n";
  out += "Lazy overhead = median over repeats of (lazy / plain − 1), each repeat timed ABBA; spread: "
         "interquartile range and min..max.\n\n";
  out += "| shape | heads/kv/dim | block | batch | context | doc tokens | plain µs | lazy µs | lazy overhead | IQR | min..max |\n";
  out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
  for (const OverheadProbeRow& r : rows) {
    out += "| " + r.shape + " | " + std::to_string(r.num_heads) + "/" + std::to_string(r.num_kv_heads) + "/" +
           std::to_string(r.head_dim) + " | " + std::to_string(r.block_size) + " | " + std::to_string(r.batch) + " | " +
           std::to_string(r.context) + " | " + std::to_string(r.document_tokens) + " | " +
           format("%.2f", r.plain_us) + " | " + format("%.2f", r.lazy_us) + " | " +
           format("%+.2f %%", 100.0 * r.overhead) + " | " +
           format("%+.2f .. %+.2f %%", 100.0 * r.overhead_p25, 100.0 * r.overhead_p75) + " | " +
           format("%+.2f .. %+.2f %%", 100.0 * r.overhead_min, 100.0 * r.overhead_max) + " |\n";
  }
  return out;
}

std::string overhead_plot(const std::vector<OverheadProbeRow>& rows) {
  // One line per row: an axis at 0 %, '#' out to the median, '[' and ']' at the quartiles.
  constexpr int kHalf = 25;
  double span = 0.01;
  for (const OverheadProbeRow& r : rows) {
    span = std::max({span, std::fabs(r.overhead_p25), std::fabs(r.overhead_p75), std::fabs(r.overhead)});
  }
  auto column = [&](double v) { return kHalf + int(std::lround(v / span * kHalf)); };
  std::string out = format("lazy overhead, axis ±%.2f %% (| = 0, # = median, [ ] = quartiles)\n", 100.0 * span);
  for (const OverheadProbeRow& r : rows) {
    std::string line(2 * kHalf + 1, ' ');
    line[kHalf] = '|';
    const int m = column(r.overhead);
    for (int c = std::min(m, kHalf); c <= std::max(m, kHalf); ++c) {
      if (c != kHalf) line[size_t(c)] = '#';
    }
    line[size_t(std::clamp(column(r.overhead_p25), 0, 2 * kHalf))] = '[';
    line[size_t(std::clamp(column(r.overhead_p75), 0, 2 * kHalf))] = ']';
    char label[96];
    std::snprintf(label, sizeof label, "%-14s b%-3d %7d ", r.shape.c_str(), r.batch, r.context);
    out += label + line + format(" %+.2f %%\n", 100.0 * r.overhead);
  }
  return out;
}

}  // namespace lazyscope
