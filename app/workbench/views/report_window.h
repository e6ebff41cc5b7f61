#pragma once
// A saved session report opened for reading (File ▸ Open Session Report): its timeline and
// cache statistics in a window of its own, beside the live session.
#include <QWidget>

#include "profiler/session_recorder.h"

class QLabel;

namespace lazyscope::workbench {

class CacheStatsView;
class TimelineView;

class ReportWindow : public QWidget {
  Q_OBJECT
 public:
  ReportWindow(const SessionRecording& recording, const QString& path, QWidget* parent = nullptr);

  TimelineView* timeline() { return timeline_; }
  CacheStatsView* stats() { return stats_; }
  QString summary() const;

 private:
  QLabel* summary_ = nullptr;
  TimelineView* timeline_ = nullptr;
  CacheStatsView* stats_ = nullptr;
};

}  // namespace lazyscope::workbench
