#pragma once
// The workbench's command line: --model, --corpus, --backend, --kv-budget, --trace-gpu, --demo,
// --screenshot.
#include <QSize>
#include <QString>
#include <QStringList>

namespace lazyscope::workbench {

// --kv-budget auto: this many blocks per policy pool, sized by the session with its backend's
// own KV element size (fp32 on the CPU, bf16 on the GPU).
constexpr int kAutoKvBlocksPerPolicy = 256;

struct WorkbenchOptions {
  QString model;   // empty: the default model
  QString corpus;  // empty: the bundled sample corpus
  QString backend = QStringLiteral("auto");
  qint64 kv_budget_bytes = 0;      // per policy; 0: kAutoKvBlocksPerPolicy blocks
  QString screenshot;              // save the window to this PNG, then quit
  QString panel_shots;             // with --screenshot: also the GPU timeline and kernel statistics PNGs here
  QString save_report;             // with --screenshot: also export the session report here
  QString open_report;             // open this session report at start (with --screenshot: its window)
  bool demo = false;               // retrieve, run lazy + materialized, reorder, run again
  bool trace_gpu = false;          // CUPTI kernel timeline in the Timeline dock (CUDA backend)
  bool cpu_exact = false;          // --cpu-precision exact: the fp32 reference on the CPU
  QSize window_size;               // fixed size (screenshots); empty: saved layout or default
  bool restore_layout = true;      // QSettings geometry and dock state
  bool load_default_model = true;  // tests turn this off to open models themselves
  // Which of the above the command line named: the others may come from the last session.
  bool model_given = false;
  bool corpus_given = false;
  bool backend_given = false;
  bool kv_budget_given = false;
};

// Parses arguments (argv[0] included). Returns false and fills `error` on bad input;
// --help/--version print and set `exit_now`.
bool parse_command_line(const QStringList& arguments, WorkbenchOptions* options, QString* error,
                        bool* exit_now);

}  // namespace lazyscope::workbench
