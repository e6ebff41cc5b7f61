#pragma once
// Runs the lazy-overhead probe (profiler/overhead_probe.h) on a thread of its own, so the window
// stays responsive: each measured row arrives as a queued signal, then the whole table.
#include <QObject>
#include <QThread>
#include <atomic>
#include <vector>

#include "profiler/overhead_probe.h"

namespace lazyscope::workbench {

class OverheadRunner : public QObject {
  Q_OBJECT
 public:
  explicit OverheadRunner(QObject* parent = nullptr);
  ~OverheadRunner() override;  // waits for a probe in flight (it cannot be interrupted mid-timing)
  // False when a probe is already running.
  bool start(const OverheadProbeOptions& options);
  bool running() const { return thread_ != nullptr; }
  // How many rows `options` asks for (shapes × batches × contexts).
  static int expectedRows(const OverheadProbeOptions& options);

 Q_SIGNALS:
  void rowMeasured(const lazyscope::OverheadProbeRow& row);
  void finished(const std::vector<lazyscope::OverheadProbeRow>& rows);
  void failed(const QString& message);

 private:
  QThread* thread_ = nullptr;
};

}  // namespace lazyscope::workbench

Q_DECLARE_METATYPE(lazyscope::OverheadProbeRow)
Q_DECLARE_METATYPE(std::vector<lazyscope::OverheadProbeRow>)
