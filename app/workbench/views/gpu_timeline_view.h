#pragma once
// The GPU timeline: one row per host thread's NVTX depth and CUDA runtime/driver calls, one row
// per GPU stream with its kernels, copies, memsets and whole CUDA graph launches (hatched bars;
// models/gpu_timeline_data.h builds the rows).
// Zoom: Ctrl+wheel, + / -, or a shift-free drag on the time axis; pan: drag, arrow keys, the
// scroll bars, Shift+wheel; Home (or 0) fits the session. Shift+drag selects a time range (the
// Kernel Statistics panel follows it); a double click clears it. Hovering a kernel or graph launch
// draws a line to the runtime call that launched it (same correlation id), and the other way round.
#include <QAbstractScrollArea>
#include <QColor>
#include <memory>
#include <vector>

#include "app/workbench/models/gpu_timeline_data.h"

namespace lazyscope::workbench {

class GpuTimelineView : public QAbstractScrollArea {
  Q_OBJECT
 public:
  static constexpr int kGutter = 190;
  static constexpr int kAxisHeight = 24;
  static constexpr int kRowHeight = 20;

  explicit GpuTimelineView(QWidget* parent = nullptr);

  void setRecording(const SessionRecording& recording);
  const GpuTimelineData& data() const { return *data_; }
  int rowCount() const { return int(data_->rows().size()); }

  // Nanoseconds per pixel; fitToWidth() shows the whole session.
  void setNsPerPixel(double ns_per_px);
  double nsPerPixel() const { return ns_per_px_; }
  void fitToWidth();
  // The time (recording clock, ns) at the left edge of the drawn area, and moving it.
  double viewStartNs() const { return view_start_ns_; }
  void scrollToNs(double t_ns);
  // Scrolls vertically so that row `row` is the first one shown.
  void scrollToRow(int row);
  // Level-of-detail drawing (per-pixel merging of narrow items); off draws every record (the
  // benchmark's baseline).
  void setLevelOfDetail(bool on);

  // The selected range (recording clock, ns); from == to: none.
  void setSelection(int64_t from_ns, int64_t to_ns);
  int64_t selectionFrom() const { return sel_from_; }
  int64_t selectionTo() const { return sel_to_; }
  bool hasSelection() const { return sel_to_ > sel_from_; }

  // Viewport geometry and hit tests (tests, tooltips).
  int rowTop(int row) const;  // viewport y of a row's top
  int rowAt(int y) const;     // -1 outside the rows
  double xOfNs(double t_ns) const;
  double nsOfX(double x) const;
  TimelineRef itemAt(const QPoint& viewport_pos) const;
  QString itemToolTip(const TimelineRef& ref) const;
  // Hover: the item under the mouse and the items it is linked to (drawn as lines).
  void setHovered(const TimelineRef& ref);
  const TimelineRef& hovered() const { return hovered_; }
  const std::vector<TimelineRef>& links() const { return links_; }
  // What the last paint drew (tests and the benchmark).
  size_t lastPaintedBars() const { return last_bars_; }
  size_t lastPaintedRows() const { return last_rows_; }

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 Q_SIGNALS:
  void selectionChanged(qint64 from_ns, qint64 to_ns);
  void viewChanged();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool viewportEvent(QEvent* event) override;
  void scrollContentsBy(int dx, int dy) override;

 private:
  int plotWidth() const;
  double minNsPerPixel() const;
  double maxNsPerPixel() const;
  void zoomAt(double factor, double x);
  void clampView();
  void updateScrollBars();
  QColor colorOf(uint32_t label) const;

  std::unique_ptr<GpuTimelineData> data_;
  std::vector<QColor> label_colors_;
  double ns_per_px_ = 1000.0;
  double view_start_ns_ = 0.0;
  bool fitted_ = true;
  bool lod_ = true;
  bool syncing_scrollbar_ = false;
  int64_t sel_from_ = 0, sel_to_ = 0;
  TimelineRef hovered_;
  std::vector<TimelineRef> links_;
  enum class Drag { None, Pan, Select } drag_ = Drag::None;
  QPoint drag_origin_;
  double drag_start_ns_ = 0.0;
  int drag_start_v_ = 0;
  size_t last_bars_ = 0, last_rows_ = 0;
};

}  // namespace lazyscope::workbench
