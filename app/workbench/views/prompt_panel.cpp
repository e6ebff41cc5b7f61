#include "app/workbench/views/prompt_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QVBoxLayout>

namespace lazyscope::workbench {
namespace {

QString column_title(const QString& key) {
  if (key == "lazy") return QStringLiteral("lazy — one shared copy, query rotated");
  if (key == "materialized") return QStringLiteral("materialized — re-rotated copies");
  if (key == "full") return QStringLiteral("full — plain causal attention");
  if (key == "none") return QStringLiteral("none — block attention, no reuse");
  if (key == "prefix") return QStringLiteral("prefix — prefix caching");
  if (key == "positional") return QStringLiteral("positional — cached per position");
  return key;
}

}  // namespace

PromptPanel::PromptPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);

  auto* form = new QFormLayout;
  system_ = new QPlainTextEdit(this);
  system_->setPlainText(tr("Answer the question using the documents. Be brief."));
  system_->setFixedHeight(48);
  query_ = new QLineEdit(this);
  query_->setPlaceholderText(tr("The question placed after the documents"));
  run_ = new QPushButton(tr("▶ Run"), this);
  run_->setDefault(true);
  run_->setMinimumWidth(80);
  stop_ = new QPushButton(tr("■ Stop"), this);
  stop_->setEnabled(false);
  auto* query_row = new QHBoxLayout;
  query_row->addWidget(query_, 1);
  query_row->addWidget(run_);
  query_row->addWidget(stop_);
  form->addRow(tr("System:"), system_);
  form->addRow(tr("Query:"), query_row);
  chat_ = new QComboBox(this);
  for (ChatMode mode : {ChatMode::Auto, ChatMode::On, ChatMode::Off})
    chat_->addItem(QString::fromUtf8(to_string(mode)), int(mode));
  chat_->setToolTip(
      tr("auto: wrap the prompt in the model's chat template when it has one (as lazyscope-cli "
         "generate does); on: always (a plain Document/Question wording without one); off: the "
         "system text, documents and query as typed"));
  auto* chat_row = new QHBoxLayout;
  chat_row->addWidget(chat_);
  auto* chat_note = new QLabel(tr("<small>the engine prepares the prompt the same way for the "
                                  "CLI and every policy column</small>"),
                               this);
  chat_note->setWordWrap(true);  // never what makes the window wider than the screen
  chat_row->addWidget(chat_note, 1);
  chat_row->addStretch();
  form->addRow(tr("Chat template:"), chat_row);
  layout->addLayout(form);

  auto* controls = new QHBoxLayout;
  controls->setSpacing(8);
  controls->addWidget(new QLabel(tr("Max tokens:"), this));
  max_tokens_ = new QSpinBox(this);
  max_tokens_->setRange(1, 4096);
  max_tokens_->setValue(32);
  controls->addWidget(max_tokens_);
  controls->addSpacing(10);
  controls->addWidget(new QLabel(tr("Policies:"), this));
  for (const auto& choice : policy_choices()) {
    auto* box = new QCheckBox(choice.key, this);
    box->setChecked(choice.key == "lazy" || choice.key == "materialized");
    box->setToolTip(column_title(choice.key));
    controls->addWidget(box);
    policy_boxes_.emplace_back(choice.key, box);
  }
  controls->addStretch();
  layout->addLayout(controls);
  connect(run_, &QPushButton::clicked, this, &PromptPanel::runRequested);
  connect(stop_, &QPushButton::clicked, this, &PromptPanel::stopRequested);
  connect(query_, &QLineEdit::returnPressed, this, [this] {
    if (!busy_) Q_EMIT runRequested();
  });

  columns_host_ = new QWidget(this);
  columns_layout_ = new QHBoxLayout(columns_host_);
  columns_layout_->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(columns_host_, 1);

  connect(&runs_, &RunModel::columnsReset, this, &PromptPanel::rebuildColumns);
  connect(&runs_, &RunModel::dataChanged, this,
          [this](const QModelIndex& from, const QModelIndex& to) {
            for (int row = from.row(); row <= to.row(); ++row) refreshColumn(row);
          });
  runs_.startPlan(0, checkedPolicies());
}

void PromptPanel::rebuildColumns() {
  for (auto& column : columns_) {
    delete column.title->parentWidget();
  }
  columns_.clear();
  for (int i = 0; i < runs_.columns(); ++i) {
    auto* box = new QWidget(columns_host_);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    ColumnWidgets w;
    w.title = new QLabel(
        QStringLiteral("<b>%1</b>").arg(column_title(runs_.column(i).key).toHtmlEscaped()), box);
    w.text = new QPlainTextEdit(box);
    w.text->setReadOnly(true);
    w.text->setObjectName(QStringLiteral("output_") + runs_.column(i).key);
    QFont mono = w.text->font();
    mono.setPointSizeF(mono.pointSizeF() * 1.05);
    w.text->setFont(mono);
    w.status = new QLabel(box);
    w.status->setWordWrap(true);  // two columns of figures must not widen the window
    v->addWidget(w.title);
    v->addWidget(w.text, 1);
    v->addWidget(w.status);
    columns_layout_->addWidget(box, 1);
    columns_.push_back(w);
    refreshColumn(i);
  }
}

void PromptPanel::refreshColumn(int row) {
  if (row < 0 || size_t(row) >= columns_.size()) return;
  ColumnWidgets& w = columns_[size_t(row)];
  const QString text = runs_.column(row).text;
  if (w.text->toPlainText() != text) {
    w.text->setPlainText(text);
    w.text->verticalScrollBar()->setValue(w.text->verticalScrollBar()->maximum());
  }
  w.status->setText(runs_.status(row));
}

QPlainTextEdit* PromptPanel::output(const QString& key) const {
  const int i = runs_.columnOf(key);
  return i >= 0 && size_t(i) < columns_.size() ? columns_[size_t(i)].text : nullptr;
}

QString PromptPanel::systemText() const { return system_->toPlainText(); }
void PromptPanel::setSystemText(const QString& text) { system_->setPlainText(text); }
QString PromptPanel::query() const { return query_->text(); }
void PromptPanel::setQuery(const QString& text) { query_->setText(text); }
int PromptPanel::maxTokens() const { return max_tokens_->value(); }
void PromptPanel::setMaxTokens(int tokens) { max_tokens_->setValue(tokens); }

ChatMode PromptPanel::chatMode() const { return ChatMode(chat_->currentData().toInt()); }

void PromptPanel::setChatMode(ChatMode mode) { chat_->setCurrentIndex(chat_->findData(int(mode))); }

QStringList PromptPanel::checkedPolicies() const {
  QStringList keys;
  for (const auto& [key, box] : policy_boxes_)
    if (box->isChecked()) keys << key;
  return keys;
}

void PromptPanel::setPolicyChecked(const QString& key, bool checked) {
  for (const auto& [k, box] : policy_boxes_)
    if (k == key) box->setChecked(checked);
}

void PromptPanel::setBusy(bool busy) {
  busy_ = busy;
  run_->setEnabled(!busy);
  stop_->setEnabled(busy);
}

}  // namespace lazyscope::workbench
