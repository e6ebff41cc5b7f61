#pragma once
// The lazy-overhead probe: plain vs lazy decode attention at a grid of shapes, timed in
// alternation (ABBA within every repeat, the order flipped on odd repeats), reported as the median
// of the per-repeat lazy/plain ratios with its spread. Used by `lazyscope-cli overhead` and the
// workbench; rows can go into a session report (table overhead_probe).
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace lazyscope {

struct OverheadProbeRow {
  std::string backend;  // "cpu" or "cuda": which kernels were measured
  std::string device;
  std::string kernel;
  std::string shape;    // catalogue name or "H/KV/D"
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  int batch = 0, context = 0, document_tokens = 0;
  int repeats = 0;
  int calls = 0;            // back-to-back calls per timing
  double plain_us = 0.0;    // median over repeats, per call
  double lazy_us = 0.0;
  double overhead = 0.0;    // median over repeats of lazy/plain − 1
  double overhead_p25 = 0.0, overhead_p75 = 0.0, overhead_min = 0.0, overhead_max = 0.0;
};

struct OverheadProbeOptions {
  // Catalogue names (kernels/synthetic_shapes.h) or "HEADS/KV_HEADS/HEAD_DIM".
  std::vector<std::string> shapes{"smollm2-135m"};
  std::vector<int> contexts{1024, 4096, 16384};
  std::vector<int> batches{1};
  int block_size = 16;
  int document_tokens = 512;  // lazy tables change shift every this many keys
  int repeats = 11;
  double timing_ms = 0.0;     // target length of one timing; 0: 2 ms on the GPU, 20 ms on the CPU
  BackendKind backend = BackendKind::Auto;
  int cpu_threads = 0;        // 0: all hardware threads
};

// Parses one --shapes entry into heads / kv heads / head dim; throws Error naming the entry.
void probe_shape_from(const std::string& entry, int* heads, int* kv_heads, int* head_dim);

// Runs the grid (shapes × batches × contexts); `on_row` sees each row as it is measured.
std::vector<OverheadProbeRow> run_overhead_probe(const OverheadProbeOptions& options,
                                                 const std::function<void(const OverheadProbeRow&)>& on_row = {});

// A markdown table of the rows, and a text plot of each row's overhead with its spread.
std::string overhead_table(const std::vector<OverheadProbeRow>& rows);
std::string overhead_plot(const std::vector<OverheadProbeRow>& rows);

}  // namespace lazyscope
