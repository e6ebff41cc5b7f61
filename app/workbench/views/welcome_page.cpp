#include "app/workbench/views/welcome_page.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QResizeEvent>
#include <QSizePolicy>
#include <QVBoxLayout>
#include <algorithm>

namespace lazyscope::workbench {

WelcomePage::WelcomePage(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("welcome_page"));
  explanation_ = new QLabel(this);
  explanation_->setWordWrap(true);
  explanation_->setTextFormat(Qt::RichText);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  summary_->setVisible(false);

  ask_ = new QPushButton(tr("1  Ask a sample question"), this);
  ask_->setObjectName(QStringLiteral("welcome_ask"));
  ask_->setToolTip(
      tr("Picks the first sample question, puts its four best BM25 passages into the prompt and "
         "runs it under lazy and materialized, each on its own empty KV pool (a cold run)."));
  reorder_ = new QPushButton(tr("2  Reorder and re-run"), this);
  reorder_->setObjectName(QStringLiteral("welcome_reorder"));
  reorder_->setToolTip(
      tr("Reverses the documents in the prompt and runs again. Every document is now cached in "
         "both pools but sits at a new position: lazy reuses its blocks as they are, "
         "materialized writes a re-rotated copy of each."));
  workload_ = new QPushButton(tr("3  Open a workload"), this);
  workload_->setObjectName(QStringLiteral("welcome_workload"));
  // Two text lines tall, in the font's own units: right at any scale factor and font size.
  for (QPushButton* button : {ask_, reorder_, workload_})
    button->setMinimumHeight(button->fontMetrics().height() * 2);
  connect(ask_, &QPushButton::clicked, this, &WelcomePage::askSampleQuestion);
  connect(reorder_, &QPushButton::clicked, this, &WelcomePage::reorderAndRerun);
  connect(workload_, &QPushButton::clicked, this, &WelcomePage::openWorkload);

  auto* text = new QVBoxLayout;
  text->setSpacing(2);
  text->addWidget(explanation_);
  text->addWidget(summary_);
  text->addStretch(1);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(10, 4, 10, 4);
  layout->addLayout(text, 1);
  for (QPushButton* button : {ask_, reorder_, workload_})
    layout->addWidget(button, 0, Qt::AlignTop);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  setWorkloadAvailable(false);
  refresh();
}

void WelcomePage::setStage(Stage stage) {
  stage_ = stage;
  refresh();
}

void WelcomePage::setBusy(bool busy) {
  busy_ = busy;
  refresh();
}

void WelcomePage::setSummary(const QString& html) {
  summary_->setText(html);
  summary_->setVisible(!html.isEmpty());
  updateGeometry();
  Q_EMIT contentChanged();
}

void WelcomePage::setWorkloadAvailable(bool available, const QString& tooltip) {
  workload_available_ = available;
  workload_->setToolTip(
      !tooltip.isEmpty()
          ? tooltip
          : tr("Replays many requests with popular and rare documents under every policy, to "
               "watch hit ratios over time. Available once the workbench has a Workload Lab."));
  refresh();
}

void WelcomePage::refresh() {
  ask_->setEnabled(!busy_);
  reorder_->setEnabled(!busy_ && stage_ != Stage::Fresh);
  workload_->setEnabled(!busy_ && workload_available_);
  switch (stage_) {
    case Stage::Fresh:
      explanation_->setText(
          tr("<b>Start here.</b> LazyScope answers a question from retrieved passages and shows "
             "how each cache policy keeps their KV: <b>lazy</b> stores every passage once and "
             "shifts the query inside attention; <b>materialized</b> (Block-Attention) writes a "
             "re-rotated copy wherever a passage moves. Press <i>Ask a sample question</i> for a "
             "first, cold run."));
      break;
    case Stage::Asked:
      explanation_->setText(
          tr("<b>Cold run done:</b> below, what each policy found in its own pool. Now press "
             "<i>Reorder and re-run</i>: the same passages in reverse order. Watch the <b>KV "
             "block map</b> (green rings: reused, magenta: copied) and <b>Cache stats</b>."));
      break;
    case Stage::Reordered:
      explanation_->setText(
          tr("<b>Reordered run done:</b> below, what each policy found and copied. Lazy reads "
             "a moved passage's blocks where they are; materialized must write a re-rotated copy "
             "of each. The <b>Equivalence</b> strip compares their logits step by step."));
      break;
    case Stage::Ran:
      explanation_->setText(
          tr("<b>Run done:</b> below, what each policy found in its own pool and copied in the "
             "last run (the documents in the order of <i>Documents in the prompt</i>). Reorder "
             "them, or press <i>Reorder and re-run</i>, to see lazy reuse what materialized must "
             "copy."));
      break;
  }
  updateGeometry();
  Q_EMIT contentChanged();
}

QSize WelcomePage::minimumSizeHint() const {
  // Dock layouts ignore height-for-width: the minimum is the wrapped text's height at this width.
  // Not before the page is shown: until then its width is a placeholder (about 100 px), the text
  // would wrap into a tall column, and the window would open taller than the screen to hold it.
  QSize size = QWidget::minimumSizeHint();
  if (isVisible() && layout() && layout()->hasHeightForWidth() && width() > 0)
    size.setHeight(std::max(size.height(), layout()->heightForWidth(width())));
  return size;
}

void WelcomePage::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (event->oldSize().width() != width()) updateGeometry();  // another width, another minimum
}

}  // namespace lazyscope::workbench
