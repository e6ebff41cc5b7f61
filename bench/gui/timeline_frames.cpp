// Frame times of the workbench's GPU timeline with one million kernel records (and as many CUDA
// launch calls, NVTX decode-step ranges, and CUDA graph launches recorded as a whole between the
// kernel-detail steps, as the default trace records decode): rendered offscreen at full zoom-out and
// at 1 µs per pixel, with level-of-detail drawing (per-pixel merging of narrow records, only visible
// records walked) against the same view drawing every record in the visible range (the baseline,
// same run). Target: <= 16 ms per frame with LOD.
// Usage: bench_timeline_frames [--kernels N] [--graph-steps N] [--frames N]
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/workbench/views/gpu_timeline_view.h"

namespace {

using lazyscope::SessionRecording;
using lazyscope::workbench::GpuTimelineView;

// A decode-like trace: per step 30 kernels (GEMV 8 µs, attention 3 µs, small 1 µs) with 0.5 µs gaps
// on one stream, each launched by a cudaLaunchKernel 2 µs earlier on the host thread, and one NVTX
// range per step around its launches (host time: the step's range ends with its last launch). After
// each such step, `graph_steps` steps replay the step's CUDA graph: one graph record of the step's
// GPU time (the 30 kernels' 120 µs) on the same stream, its cudaGraphLaunch and its NVTX range.
SessionRecording synthetic(int kernels, int graph_steps) {
  SessionRecording r;
  r.kernels.reserve(size_t(kernels));
  r.api_calls.reserve(size_t(kernels) + size_t(kernels / 30 + 1) * size_t(graph_steps));
  r.graphs.reserve(size_t(kernels / 30 + 1) * size_t(graph_steps));
  uint32_t correlation = 0;
  const char* names[3] = {"gemv_bf16", "decode_kernel<64, 3, true>", "rmsnorm_kernel"};
  const int64_t durations[3] = {8000, 3000, 1000};
  int64_t t = 1'000'000;
  int step = 0;
  for (int i = 0; i < kernels; ++i) {
    if (i % 30 == 0) {
      lazyscope::RecordedRange range;
      range.range.name = "decode step " + std::to_string(++step);
      range.range.start_ns = t - 3000;
      range.range.thread_id = 4242;
      r.ranges.push_back(range);
    }
    lazyscope::KernelRecord k;
    const int kind = i % 3;
    k.display_name = names[kind];
    k.start_ns = t;
    k.end_ns = t + durations[kind];
    k.stream_id = 7;
    k.correlation_id = ++correlation;
    k.grid[0] = 96;
    k.block[0] = 256;
    k.registers_per_thread = 40;
    r.kernels.push_back(std::move(k));
    lazyscope::ApiRecord a;
    a.name = "cudaLaunchKernel_v7000";
    a.start_ns = t - 2000;
    a.end_ns = t - 1500;
    a.thread_id = 4242;
    a.correlation_id = correlation;
    if (i % 30 == 29 || i + 1 == kernels) r.ranges.back().range.end_ns = a.end_ns;
    r.api_calls.push_back(std::move(a));
    t += durations[kind] + 500;
    if (i % 30 != 29) continue;
    for (int g = 0; g < graph_steps; ++g) {
      lazyscope::RecordedRange range;
      range.range.name = "decode step " + std::to_string(++step);
      range.range.start_ns = t - 3000;
      range.range.end_ns = t - 1000;
      range.range.thread_id = 4242;
      r.ranges.push_back(range);
      lazyscope::ApiRecord launch;
      launch.name = "cudaGraphLaunch_v10000";
      launch.start_ns = t - 2500;
      launch.end_ns = t - 1500;
      launch.thread_id = 4242;
      launch.correlation_id = ++correlation;
      r.api_calls.push_back(std::move(launch));
      lazyscope::GraphRecord graph;
      graph.start_ns = t;
      graph.end_ns = t + 120'000;
      graph.stream_id = 7;
      graph.correlation_id = correlation;
      graph.graph_id = 3;
      r.graphs.push_back(graph);
      t += 120'000 + 500;
    }
  }
  return r;
}

struct Timing {
  double median_ms = 0.0, max_ms = 0.0;
  size_t bars = 0;
};

Timing time_frames(GpuTimelineView& view, QImage& image, int frames) {
  std::vector<double> ms;
  for (int f = 0; f < frames; ++f) {
    QElapsedTimer timer;
    timer.start();
    view.viewport()->render(&image);
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back(), view.lastPaintedBars()};
}

}  // namespace

int main(int argc, char** argv) {
  int kernels = 1'000'000, frames = 30, graph_steps = 3;
  for (int i = 1; i < argc; i += 2) {
    const std::string opt = argv[i];
    const int v = i + 1 < argc ? std::atoi(argv[i + 1]) : -1;
    if (opt == "--kernels" && v > 0 && v <= 20'000'000) kernels = v;
    else if (opt == "--frames" && v > 0 && v <= 1000) frames = v;
    else if (opt == "--graph-steps" && v >= 0 && v <= 100 && std::string(argv[i + 1]).find_first_not_of("0123456789") == std::string::npos)
      graph_steps = v;
    else {
      std::fprintf(stderr,
                   "bench_timeline_frames: bad option %s %s (--kernels 1..20000000, --graph-steps 0..100, "
                   "--frames 1..1000)\n",
                   argv[i], i + 1 < argc ? argv[i + 1] : "(missing value)");
      return 2;
    }
  }
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const SessionRecording recording = synthetic(kernels, graph_steps);
  const size_t records =
      recording.kernels.size() + recording.graphs.size() + recording.api_calls.size() + recording.ranges.size();

  GpuTimelineView view;
  view.resize(1600, 400);
  view.show();
  QApplication::processEvents();
  QElapsedTimer build;
  build.start();
  view.setRecording(recording);
  const double build_ms = double(build.nsecsElapsed()) / 1e6;
  QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);

  std::printf("# GPU timeline frame times: %d kernels + %zu CUDA graph launches (%d graph-level steps after "
              "each 30-kernel step) + %zu launch calls + %zu NVTX ranges (%zu records), "
              "%d rows, view %dx%d px, %d frames each (median / max)\n",
              kernels, recording.graphs.size(), graph_steps, recording.api_calls.size(), recording.ranges.size(),
              records, view.rowCount(), view.viewport()->width(), view.viewport()->height(), frames);
  std::printf("# building the rows (sort, running max, correlation index): %.0f ms\n\n", build_ms);
  std::printf("| view | LOD frame ms (median / max) | bars | every record ms (median / max) | bars | every record ÷ LOD |\n");
  std::printf("|---|---|---|---|---|---|\n");
  const double span = double(view.data().endNs() - view.data().beginNs());
  struct Case {
    const char* name;
    double ns_per_px;  // 0: fit
    double at;         // fraction of the session at the left edge
  } cases[] = {{"full zoom-out", 0.0, 0.0},
               {"1 µs/pixel, start", 1000.0, 0.0},
               {"1 µs/pixel, middle", 1000.0, 0.5},
               {"1 µs/pixel, end", 1000.0, 1.0},
               {"100 µs/pixel, middle", 100000.0, 0.5}};
  bool within = true;
  for (const Case& c : cases) {
    if (c.ns_per_px == 0.0) view.fitToWidth();
    else {
      view.setNsPerPixel(c.ns_per_px);
      view.scrollToNs(double(view.data().beginNs()) + c.at * span);
    }
    view.setLevelOfDetail(true);
    time_frames(view, image, 3);  // warm-up
    const Timing lod = time_frames(view, image, frames);
    view.setLevelOfDetail(false);
    const Timing all = time_frames(view, image, std::max(3, frames / 6));
    view.setLevelOfDetail(true);
    within = within && lod.median_ms <= 16.0;
    std::printf("| %s (%s/px) | %.2f / %.2f | %zu | %.2f / %.2f | %zu | %.1f× |\n", c.name,
                lazyscope::workbench::format_duration_ns(view.nsPerPixel()).c_str(), lod.median_ms, lod.max_ms,
                lod.bars, all.median_ms, all.max_ms, all.bars, all.median_ms / std::max(1e-9, lod.median_ms));
  }
  std::printf("\nLOD median frame time %s the 16 ms target in every view.\n", within ? "meets" : "MISSES");
  return 0;
}
