#include "app/workbench/command_line.h"

#include <QFileInfo>

#include <QCommandLineParser>
#include <exception>

#include "engine/runtime/session.h"

namespace lazyscope::workbench {

bool parse_command_line(const QStringList& arguments, WorkbenchOptions* options, QString* error,
                        bool* exit_now) {
  *exit_now = false;
  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("LazyScope workbench: retrieve and reorder documents, run lazy vs "
                     "materialized KV reuse, watch the KV pool."));
  const QCommandLineOption help = parser.addHelpOption();
  const QCommandLineOption version = parser.addVersionOption();
  const QCommandLineOption model({"m", "model"}, "Model: HF checkpoint directory or .gguf file.",
                                 "DIR");
  const QCommandLineOption corpus({"c", "corpus"},
                                  "Corpus SQLite store (lazyscope-cli corpus import).", "DB");
  const QCommandLineOption backend("backend", "Compute backend: auto, cpu or cuda.",
                                   "auto|cpu|cuda", "auto");
  const QCommandLineOption budget("kv-budget", "KV pool size per policy (every policy has its own pool), e.g. 64MiB, 1GiB; auto: 256 blocks each.",
                                  "BYTES", "auto");
  const QCommandLineOption screenshot("screenshot", "Save the window to FILE (PNG) and quit.",
                                      "FILE");
  const QCommandLineOption demo(
      "demo", "Retrieve, run lazy + materialized, reverse the documents, run again.");
  const QCommandLineOption size("size", "Window size WxH (default 1600x1000 with --screenshot).",
                                "WxH");
  const QCommandLineOption trace_gpu(
      "trace-gpu", "CUDA backend: record every GPU kernel and copy (CUPTI) with the engine's NVTX "
                   "ranges; they appear on the Timeline's GPU lane and in exported reports.");
  const QCommandLineOption precision(
      "cpu-precision", "CPU backend: fast (weights in their file's format, SIMD kernels) or exact (the fp32 reference).",
      "fast|exact", "fast");
  const QCommandLineOption panel_shots(
      "panel-shots", "With --screenshot: also save the GPU timeline and the kernel statistics as "
                     "gpu_timeline.png and kernel_stats.png in DIR.", "DIR");
  const QCommandLineOption save_report(
      "save-report", "With --screenshot: also export the session report (SQLite) to FILE.", "FILE");
  const QCommandLineOption open_report(
      "open-report", "Open a saved session report at start (no model needed); with --screenshot, "
                     "the report's window is saved.", "FILE");
  for (const auto& o : {model, corpus, backend, budget, precision, trace_gpu, screenshot, demo, size, panel_shots,
                        save_report, open_report})
    parser.addOption(o);
  if (!parser.parse(arguments)) {
    *error = parser.errorText();
    return false;
  }
  if (parser.isSet(help) || parser.isSet(version)) {
    *exit_now = true;
    if (parser.isSet(help)) parser.showHelp(0);
    parser.showVersion();
  }
  options->model = parser.value(model);
  options->corpus = parser.value(corpus);
  options->model_given = parser.isSet(model);
  options->corpus_given = parser.isSet(corpus);
  options->backend_given = parser.isSet(backend);
  options->kv_budget_given = parser.isSet(budget);
  options->backend = parser.value(backend).toLower();
  if (options->backend != "auto" && options->backend != "cpu" && options->backend != "cuda") {
    *error = QStringLiteral("--backend must be auto, cpu or cuda, not '%1'").arg(options->backend);
    return false;
  }
  const QString precision_text = parser.value(precision).toLower();
  if (precision_text != "fast" && precision_text != "exact") {
    *error = QStringLiteral("--cpu-precision must be fast or exact, not '%1'").arg(precision_text);
    return false;
  }
  options->cpu_exact = precision_text == "exact";
  const QString budget_text = parser.value(budget);
  if (budget_text != "auto") {
    try {
      options->kv_budget_bytes = qint64(parse_byte_size(budget_text.toStdString()));
    } catch (const std::exception& e) {
      *error = QStringLiteral("--kv-budget: %1").arg(QString::fromUtf8(e.what()));
      return false;
    }
  }
  options->screenshot = parser.value(screenshot);
  options->panel_shots = parser.value(panel_shots);
  options->save_report = parser.value(save_report);
  options->open_report = parser.value(open_report);
  if ((!options->panel_shots.isEmpty() || !options->save_report.isEmpty()) && options->screenshot.isEmpty()) {
    *error = QStringLiteral("--panel-shots and --save-report need --screenshot (they are saved with it)");
    return false;
  }
  if (!options->panel_shots.isEmpty() && !QFileInfo(options->panel_shots).isDir()) {
    *error = QStringLiteral("--panel-shots: '%1' is not a directory").arg(options->panel_shots);
    return false;
  }
  options->demo = parser.isSet(demo);
  options->trace_gpu = parser.isSet(trace_gpu);
  if (parser.isSet(size)) {
    const QStringList parts = parser.value(size).split('x');
    bool ok_w = false, ok_h = false;
    if (parts.size() == 2)
      options->window_size = QSize(parts[0].toInt(&ok_w), parts[1].toInt(&ok_h));
    if (!ok_w || !ok_h || options->window_size.width() < 200 ||
        options->window_size.height() < 200) {
      *error = QStringLiteral("--size must look like 1600x1000");
      return false;
    }
  } else if (!options->screenshot.isEmpty()) {
    options->window_size = QSize(1600, 1000);
  }
  if (!options->screenshot.isEmpty()) options->restore_layout = false;  // reproducible pictures
  return true;
}

}  // namespace lazyscope::workbench
