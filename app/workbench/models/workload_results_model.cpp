#include "app/workbench/models/workload_results_model.h"

#include <cmath>

namespace lazyscope::workbench {

QString budget_label(qint64 bytes) {
  if (bytes == 0) return QStringLiteral("unlimited");
  auto in = [&](qint64 unit, const char* name) {
    if (bytes % unit == 0) return QStringLiteral("%1%2").arg(bytes / unit).arg(QLatin1String(name));
    return QStringLiteral("%1%2").arg(double(bytes) / double(unit), 0, 'f', 2).arg(QLatin1String(name));
  };
  if (bytes >= (1ll << 30)) return in(1ll << 30, "GiB");
  if (bytes >= (1ll << 20)) return in(1ll << 20, "MiB");
  return in(1ll << 10, "KiB");
}

void WorkloadResultsModel::clear() {
  beginResetModel();
  results_.clear();
  rows_.clear();
  endResetModel();
}

void WorkloadResultsModel::add(const ServingResult& result) {
  beginResetModel();  // a lazy row changes the ratio columns of its budget's other rows
  results_.push_back(result);
  rows_.push_back({int(results_.size()) - 1, QString::fromStdString(result.policy), {}, result.kv_budget_bytes});
  endResetModel();
}

void WorkloadResultsModel::addFailure(const QString& policy, qint64 budget, const QString& message) {
  beginInsertRows({}, int(rows_.size()), int(rows_.size()));
  rows_.push_back({-1, policy, message, budget});
  endInsertRows();
}

const ServingResult* WorkloadResultsModel::resultAt(int row) const {
  if (row < 0 || row >= int(rows_.size()) || rows_[std::size_t(row)].result < 0) return nullptr;
  return &results_[std::size_t(rows_[std::size_t(row)].result)];
}

const ServingResult* WorkloadResultsModel::lazyAt(qint64 budget) const {
  for (const ServingResult& r : results_) {
    if (r.kv_budget_bytes == budget && r.policy == "lazy") return &r;
  }
  return nullptr;
}

int WorkloadResultsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}

int WorkloadResultsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant WorkloadResultsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(rows_.size())) return {};
  const Row& row = rows_[std::size_t(index.row())];
  const ServingResult* r = resultAt(index.row());
  if (role == Qt::TextAlignmentRole) {
    return index.column() <= Policy ? QVariant(Qt::AlignLeft | Qt::AlignVCenter) : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole && !r) return row.error;
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;  // unrounded numbers (tests, sorting)
  auto num = [&](double v, int decimals) { return raw ? QVariant(v) : QVariant(QString::number(v, 'f', decimals)); };
  if (index.column() == Budget) return budget_label(row.budget);
  if (index.column() == Policy)
    return r && r->cancelled && !raw ? tr("%1 (stopped at %2 requests)").arg(row.policy).arg(r->requests) : row.policy;
  if (!r) return index.column() == TokenHit ? QVariant(tr("cannot serve: %1").arg(row.error)) : QVariant();
  const ServingResult* lazy = lazyAt(row.budget);
  switch (index.column()) {
    case TokenHit: return num(100 * r->hit_ratio_tokens, 2);
    case DocumentHit: return num(100 * r->hit_ratio_documents, 2);
    case PrefixHit: return num(100 * r->prefix_hit_ratio, 1);
    case TtftP50: return num(r->ttft_ms.p50, 1);
    case TtftP99: return num(r->ttft_ms.p99, 1);
    case TpotP50: return num(r->tpot_ms.p50, 2);
    case OutputTokS: return num(r->output_tok_s, 1);
    case AllTokS: return num(r->throughput_tok_s, 0);
    case CopiedMiB: return num(double(r->bytes_copied) / 1048576.0, 1);
    case Evictions: return raw ? QVariant(qlonglong(r->evictions)) : QVariant(QString::number(r->evictions));
    case Preemptions: return raw ? QVariant(qlonglong(r->preemptions)) : QVariant(QString::number(r->preemptions));
    case PeakBlocks: return raw ? QVariant(r->peak_blocks) : QVariant(QString::number(r->peak_blocks));
    case LazyHitRatio:
      if (!lazy || r == lazy) return {};
      if (r->hit_ratio_tokens <= 0) return lazy->hit_ratio_tokens > 0 ? QVariant(QStringLiteral("∞")) : QVariant();
      return raw ? QVariant(lazy->hit_ratio_tokens / r->hit_ratio_tokens)
                 : QVariant(QStringLiteral("%1×").arg(lazy->hit_ratio_tokens / r->hit_ratio_tokens, 0, 'f', 2));
    case LazyTtftRatio:
      if (!lazy || r == lazy || lazy->ttft_ms.p50 <= 0) return {};
      return raw ? QVariant(r->ttft_ms.p50 / lazy->ttft_ms.p50)
                 : QVariant(QStringLiteral("%1×").arg(r->ttft_ms.p50 / lazy->ttft_ms.p50, 0, 'f', 2));
    default: return {};
  }
}

QVariant WorkloadResultsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  static const char* const names[] = {"budget",   "policy",     "tok-hit %", "doc-hit %", "pfx-hit %", "TTFT p50 ms",
                                      "TTFT p99 ms", "TPOT p50 ms", "out tok/s", "all tok/s", "copied MiB", "evicted",
                                      "preempt",  "peak blocks", "lazy hit ×", "TTFT ÷ lazy"};
  static const char* const tips[] = {
      "KV pool of each policy", "cache policy",
      "cached document tokens / (document + query tokens)", "document uses served from cache / document uses",
      "requests whose shared prefix was cached", "time to first token, median (arrival to first token)",
      "time to first token, 99th percentile", "time per output token, median",
      "generated tokens / makespan", "(prompt + generated tokens) / makespan", "KV bytes written by copies",
      "KV blocks evicted", "requests preempted and recomputed", "most blocks held by running requests at once",
      "lazy's token hit ratio / this policy's, at the same budget",
      "this policy's TTFT p50 / lazy's, at the same budget (> 1: lazy is faster)"};
  if (section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) return QString::fromUtf8(names[section]);
  if (role == Qt::ToolTipRole) return QString::fromUtf8(tips[section]);
  return {};
}

}  // namespace lazyscope::workbench
