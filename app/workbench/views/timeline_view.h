#pragma once
// Timeline of the recorded session: one bar per span on three host lanes (requests, segment
// encodes, prefill + decode steps) and, when the session was traced on the GPU (--trace-gpu), a
// fourth lane with every kernel, copy and whole CUDA graph launch as the device ran it. Time runs
// left to right; Ctrl+wheel zooms, the horizontal scroll bar pans, the vertical one (and the wheel)
// scrolls the lanes under the fixed time axis when the dock is short; hovering a bar shows its name
// and duration.
#include <QAbstractScrollArea>
#include <QString>
#include <vector>

#include "profiler/session_recorder.h"

namespace lazyscope::workbench {

class TimelineView : public QAbstractScrollArea {
  Q_OBJECT
 public:
  enum Lane { kRequestLane = 0, kEncodeLane = 1, kDecodeLane = 2, kGpuLane = 3, kLaneCount = 4 };

  explicit TimelineView(QWidget* parent = nullptr);

  // Replaces the spans shown; keeps the zoom unless the view was fitted to the width.
  void setRecording(const SessionRecording& recording);
  const std::vector<RecordedSpan>& spans() const { return spans_; }
  int spanCount() const { return int(spans_.size()); }
  // Pixels per millisecond; 0 means "fit the whole session into the width".
  void setZoom(double pixels_per_ms);
  double zoom() const { return pixels_per_ms_; }
  // Scrolls so that time `ms` (since the recorder started) is at the left edge.
  void scrollToTime(double ms);
  // The span under a viewport point, or -1 (tests and tooltips).
  int spanAt(const QPoint& viewport_pos) const;
  // Tooltip text of span `index`.
  QString spanToolTip(int index) const;
  // How many bars the last paint drew (culling check in tests).
  int lastPaintedBars() const { return last_painted_bars_; }
  static Lane laneOf(const RecordedSpan& span);
  // Lanes drawn: the GPU lane only when the recording has device spans.
  int laneCount() const { return has_gpu_ ? kLaneCount : kGpuLane; }

  QSize sizeHint() const override;
  // The lanes' height, axis and margins included; the vertical scroll bar covers what does not fit.
  int contentHeight() const;
  int laneTop(int lane) const;  // viewport y of a lane's top (scrolled)

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  bool viewportEvent(QEvent* event) override;

 private:
  double effectiveScale() const;  // pixels per ms actually used
  double timeToX(double ms) const;
  double xToTime(double x) const;
  void updateScrollBar();

  std::vector<RecordedSpan> spans_;
  double origin_ms_ = 0.0;  // the first span's start: the idle time before it is not drawn
  double end_ms_ = 0.0;
  double pixels_per_ms_ = 0.0;
  int last_painted_bars_ = 0;
  bool has_gpu_ = false;
};

}  // namespace lazyscope::workbench
