#include "app/workbench/views/block_map_view.h"

#include <QBuffer>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QImage>
#include <QLabel>
#include <QPaintEvent>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>
#include <utility>

#include "app/workbench/models/cache_stats_model.h"

namespace lazyscope::workbench {
namespace {

QColor toward_white(const QColor& c, double t) {
  return QColor(int(c.red() + (255 - c.red()) * t), int(c.green() + (255 - c.green()) * t),
                int(c.blue() + (255 - c.blue()) * t));
}

// A legend square as the grid draws a block: the fill and an outline that stands out from the
// window in either palette (the free colour is close to a light window and to a dark one).
// Drawn at twice its size and shown at `px`, so it stays sharp at a scale factor of 2.
QString swatch(const QColor& color, const QString& text, const QColor& outline, int px) {
  QImage image(2 * px, 2 * px, QImage::Format_ARGB32);
  image.fill(color);
  {
    QPainter p(&image);
    p.setPen(QPen(outline, 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(1, 1, 2 * px - 2, 2 * px - 2));
  }
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  image.save(&buffer, "PNG");
  return QStringLiteral("<img src='data:image/png;base64,%1' width='%2' height='%2' "
                        "style='vertical-align:middle'>&nbsp;%3")
      .arg(QString::fromLatin1(png.toBase64()))
      .arg(px)
      .arg(text.toHtmlEscaped());
}

}  // namespace

BlockGrid::BlockGrid(BlockMapModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

int BlockGrid::columns() const { return std::max(1, (width() - gap_) / pitch()); }

QSize BlockGrid::sizeHint() const {
  const int cols = std::max(1, (width() - gap_) / pitch());
  const int rows = (model_->blockCount() + cols - 1) / cols;
  return {width(), rows * pitch() + gap_};
}

void BlockGrid::fitTo(const QSize& viewport) {
  const int blocks = std::max(1, model_->blockCount());
  // Largest cell (6..22 px) for which every block fits the viewport; else 6 px and scroll.
  int cell = 22;
  for (; cell > 6; --cell) {
    const int p = cell + gap_;
    const int cols = std::max(1, (viewport.width() - gap_) / p);
    const int rows = (blocks + cols - 1) / cols;
    if (rows * p + gap_ <= viewport.height()) break;
  }
  cell_ = cell;
  gap_ = cell >= 10 ? 2 : 1;
  const int cols = std::max(1, (viewport.width() - gap_) / pitch());
  const int rows = (model_->blockCount() + cols - 1) / cols;
  resize(viewport.width(), std::max(viewport.height(), rows * pitch() + gap_));
  update();
}

QRect BlockGrid::cellRect(int block) const {
  const int cols = columns();
  return QRect(gap_ + (block % cols) * pitch(), gap_ + (block / cols) * pitch(), cell_, cell_);
}

int BlockGrid::blockAt(const QPoint& pos) const {
  if (pos.x() < gap_ || pos.y() < gap_) return -1;
  const int col = (pos.x() - gap_) / pitch();
  const int row = (pos.y() - gap_) / pitch();
  if (col >= columns()) return -1;
  const int block = row * columns() + col;
  return block < model_->blockCount() && cellRect(block).contains(pos) ? block : -1;
}

void BlockGrid::paintEvent(QPaintEvent* event) {
  QPainter p(this);
  p.fillRect(event->rect(), palette().color(QPalette::Base));
  const int cols = columns();
  const int blocks = model_->blockCount();
  // Only the rows intersecting the exposed rectangle: big pools stay cheap to repaint.
  const int first_row = std::max(0, (event->rect().top() - gap_) / pitch());
  const int last_row = (event->rect().bottom() - gap_) / pitch();
  const qint64 now = model_->nowMs();
  painted_cells_ = 0;
  const QBrush hatch(QColor(255, 255, 255, 170), Qt::BDiagPattern);
  for (int row = first_row; row <= last_row; ++row) {
    for (int col = 0; col < cols; ++col) {
      const int block = row * cols + col;
      if (block >= blocks) break;
      const QRect cell = cellRect(block);
      ++painted_cells_;
      const BlockCell& c = model_->cell(block);
      p.fillRect(cell, model_->cellColor(block));
      if (c.segment >= 0 && model_->isCopy(block)) p.fillRect(cell, hatch);
      if (c.segment < 0 && c.ghost_copy) {
        // Freed after the request: the space a materialized copy took for this run.
        p.fillRect(cell,
                   QBrush(BlockMapModel::flashColorFor(BlockAction::Copied), Qt::BDiagPattern));
        p.setPen(BlockMapModel::flashColorFor(BlockAction::Copied));
        p.drawRect(cell.adjusted(0, 0, -1, -1));
      } else if (c.segment < 0) {
        p.setPen(palette().color(QPalette::Mid));
        p.drawRect(cell.adjusted(0, 0, -1, -1));
      }
      const QColor flash = model_->flashColor(block, now);
      if (flash.isValid()) {
        // A thick ring in the event's colour, fading out.
        p.setPen(QPen(flash, cell_ >= 12 ? 2 : 1));
        p.setBrush(Qt::NoBrush);
        p.drawRect(cell.adjusted(1, 1, -1, -1));
      }
    }
  }
}

bool BlockGrid::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int block = blockAt(help->pos());
    if (block >= 0)
      QToolTip::showText(help->globalPos(), model_->tooltip(block), this, cellRect(block));
    else
      QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

BudgetBar::BudgetBar(BlockMapModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMinimumHeight(22);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void BudgetBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QRect bar = rect().adjusted(0, 1, -1, -2);
  p.fillRect(bar, BlockMapModel::freeColor());
  const int total = std::max(1, model_->blockCount());
  const int in_use = model_->inUseBlocks();
  const int used = model_->usedBlocks();
  const int w_use = int(std::lround(double(bar.width()) * in_use / total));
  const int w_cached = int(std::lround(double(bar.width()) * (used - in_use) / total));
  // Held dark, cached pale; on a dark window both darker, so the window-coloured text reads.
  const bool dark = palette().color(QPalette::Window).lightness() < palette().color(QPalette::WindowText).lightness();
  p.fillRect(QRect(bar.left(), bar.top(), w_use, bar.height()), dark ? QColor(40, 80, 135) : QColor(52, 101, 164));
  p.fillRect(QRect(bar.left() + w_use, bar.top(), w_cached, bar.height()),
             dark ? QColor(60, 88, 125) : QColor(150, 180, 220));
  p.setPen(QColor(120, 120, 120));
  p.drawRect(bar);
  const qint64 bpb = model_->bytesPerBlock();
  const QString text = tr("%1 / %2 blocks (%3 %) · %4 held · %5 cached · budget %6")
                           .arg(used)
                           .arg(model_->blockCount())
                           .arg(100.0 * used / total, 0, 'f', 1)
                           .arg(in_use)
                           .arg(used - in_use)
                           .arg(format_bytes(bpb * model_->blockCount()));
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(bar.adjusted(6, 0, -6, 0), Qt::AlignVCenter | Qt::AlignLeft, text);
}

BlockMapView::BlockMapView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 4, 6, 4);
  tally_ = new QLabel(this);
  tally_->setTextFormat(Qt::RichText);
  tally_->setWordWrap(true);
  QFont tally_font = tally_->font();
  tally_font.setPointSizeF(tally_font.pointSizeF() * 1.1);
  tally_->setFont(tally_font);
  layout->addWidget(tally_);
  auto* pool_row = new QHBoxLayout;
  pool_row->addWidget(new QLabel(tr("Pool of:"), this));
  policy_ = new QComboBox(this);
  for (const char* name : {"lazy", "materialized", "positional", "prefix", "none"})
    policy_->addItem(QString::fromUtf8(name));
  policy_->setToolTip(tr("Every policy runs on its own KV pool of the full budget, so no policy is "
                         "served from blocks another one encoded. Pick the pool to show."));
  pool_row->addWidget(policy_);
  pool_row->addWidget(new QLabel(tr("<small>(one pool per policy)</small>"), this));
  pool_row->addStretch();
  layout->addLayout(pool_row);
  budget_ = new BudgetBar(&model_, this);
  layout->addWidget(budget_);
  connect(policy_, &QComboBox::currentTextChanged, this, [this](const QString& policy) {
    model_.setPolicy(policy);
    Q_EMIT policyChanged(policy);
  });
  scroll_ = new QScrollArea(this);
  scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll_->setWidgetResizable(false);
  grid_ = new BlockGrid(&model_, scroll_);
  scroll_->setWidget(grid_);
  layout->addWidget(scroll_, 1);
  legend_ = new QLabel(this);
  legend_->setTextFormat(Qt::RichText);
  legend_->setWordWrap(true);
  layout->addWidget(legend_);

  flash_timer_ = new QTimer(this);
  flash_timer_->setInterval(40);
  connect(flash_timer_, &QTimer::timeout, this, [this] {
    grid_->update();
    if (!model_.anyFlashing(model_.nowMs())) flash_timer_->stop();
  });
  connect(&model_, &BlockMapModel::changed, this, &BlockMapView::refresh);
  refresh();
}

void BlockMapView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  grid_->fitTo(scroll_->viewport()->size());
}

QString BlockMapView::tallyText() const { return tally_->text(); }

void BlockMapView::showPolicy(const QString& policy) { policy_->setCurrentText(policy); }

void BlockMapView::refresh() {
  grid_->fitTo(scroll_->viewport()->size());
  grid_->update();
  budget_->update();
  if (!flash_timer_->isActive() && model_.anyFlashing(model_.nowMs())) flash_timer_->start();

  // The tally's colours, lighter on a dark window.
  const bool dark_window = palette().color(QPalette::Window).lightness() < palette().color(QPalette::WindowText).lightness();
  auto tone = [dark_window](const QColor& c) { return (dark_window ? toward_white(c, 0.35) : c).name(); };
  const QString new_color = tone(QColor(0xc7, 0x78, 0x00)), reused_color = tone(QColor(0x00, 0x8f, 0x3a)),
                copied_color = tone(QColor(0xb0, 0x00, 0x8a));
  QStringList lines;
  for (const RunTally& t : model_.tallies()) {
    lines << QStringLiteral(
                 "<b>%1</b>: <span style='color:%6'>%2 new</span> · "
                 "<span style='color:%7'>%3 reused</span> · "
                 "<span style='color:%8'>%4 copied</span> · %5 evicted")
                 .arg(t.key.toHtmlEscaped())
                 .arg(t.allocated)
                 .arg(t.hit)
                 .arg(t.copied)
                 .arg(t.evicted)
                 .arg(new_color, reused_color, copied_color);
  }
  tally_->setText(lines.isEmpty()
                      ? tr("Blocks touched by the last run appear here (new / reused / copied).")
                      : tr("<b>Last run</b> (KV blocks):<br>") +
                            lines.join(QStringLiteral("<br>")));

  // Outline: the window text colour, half-way to the window, legible on light and dark.
  const QColor text = palette().color(QPalette::WindowText), window = palette().color(QPalette::Window);
  const QColor outline((text.red() + window.red()) / 2, (text.green() + window.green()) / 2,
                       (text.blue() + window.blue()) / 2);
  const int px = std::max(8, legend_->fontMetrics().height() * 3 / 4);
  QStringList items;
  for (const auto& [label, color] : model_.legend()) items << swatch(color, label, outline, px);
  QStringList keys;
  keys << swatch(BlockMapModel::freeColor(), tr("free"), outline, px);
  keys << tr("pale = cached, unreferenced · dark = shared · hatched = materialized copy "
             "(magenta outline: copy freed after its request) · ring: ");
  // The square in the ring's colour; its word a little lighter on a dark window (dark red on
  // dark grey is hard to read).
  const bool dark = window.lightness() < text.lightness();
  QStringList rings;
  for (const auto& [action, word] : {std::pair{BlockAction::Hit, tr("reused")}, std::pair{BlockAction::Allocated, tr("new")},
                                     std::pair{BlockAction::Copied, tr("copied")}, std::pair{BlockAction::Evicted, tr("evicted")}}) {
    const QColor ring = BlockMapModel::flashColorFor(action);
    rings << QStringLiteral("<span style='color:%1'>■</span> <span style='color:%2'>%3</span>")
                 .arg(ring.name(), (dark ? toward_white(ring, 0.4) : ring.darker(115)).name(), word.toHtmlEscaped());
  }
  keys << rings.join(QLatin1Char(' '));
  legend_->setText(items.join(QStringLiteral(" &nbsp; ")) + QStringLiteral("<br><small>") +
                   keys.join(QStringLiteral(" &nbsp; ")) + QStringLiteral("</small>"));
}

}  // namespace lazyscope::workbench
