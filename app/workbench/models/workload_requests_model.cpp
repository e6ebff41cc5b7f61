#include "app/workbench/models/workload_requests_model.h"

#include <algorithm>

#include "app/workbench/models/workload_results_model.h"

namespace lazyscope::workbench {
namespace {

// What the policy does with one placed document (docs/workload_lab.md, "Request details").
QString policy_action(const std::string& policy, int shift) {
  if (policy == "none") return QStringLiteral("encoded for this request; nothing is kept for the next");
  if (policy == "prefix") {
    return QStringLiteral("reusable only inside a cached run of identical tokens from position 0 (full attention)");
  }
  if (policy == "positional") {
    return shift == 0 ? QStringLiteral("at its encoding position: its encode is the cached copy for (document, start)")
                      : QStringLiteral("a copy rotated to this start, cached per (document, start): shared only by "
                                       "requests that place it at the same start");
  }
  if (policy == "materialized") {
    return shift == 0 ? QStringLiteral("base KV read in place (δ = 0, no copy)")
                      : QStringLiteral("base KV shared; a copy re-rotated by δ made for this request and held until "
                                       "it ends");
  }
  if (policy == "lazy") return QStringLiteral("base KV blocks read in place by every request; the kernel rotates "
                                              "the query by δ (no copy)");
  return {};
}

QString esc(const QString& s) { return s.toHtmlEscaped(); }

}  // namespace

void WorkloadRequestsModel::setRun(const ServingResult* run) {
  beginResetModel();
  records_.clear();
  if (run) {
    records_ = run->records;
    std::sort(records_.begin(), records_.end(), [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  }
  endResetModel();
}

const RequestRecord* WorkloadRequestsModel::recordAt(int row) const {
  return row >= 0 && row < int(records_.size()) ? &records_[std::size_t(row)] : nullptr;
}

int WorkloadRequestsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(records_.size()); }

int WorkloadRequestsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant WorkloadRequestsModel::data(const QModelIndex& index, int role) const {
  const RequestRecord* r = recordAt(index.row());
  if (!r || (role != Qt::DisplayRole && role != Qt::TextAlignmentRole)) return {};
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  switch (index.column()) {
    case Request: return r->index;
    case Arrival: return QString::number(r->arrival_s, 'f', 3);
    case Ttft: return QString::number(r->ttft_ms(), 'f', 1);
    case Documents: return r->documents;
    case Hits: return r->document_hits;
    case CachedTokens: return r->cached_document_tokens;
    case CopiedKiB: return QString::number(double(r->bytes_copied) / 1024.0, 'f', 0);
    case Preemptions: return r->preemptions;
    default: return {};
  }
}

QVariant WorkloadRequestsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  switch (section) {
    case Request: return tr("request");
    case Arrival: return tr("arrival s");
    case Ttft: return tr("TTFT ms");
    case Documents: return tr("documents");
    case Hits: return tr("cached at admission");
    case CachedTokens: return tr("cached tokens");
    case CopiedKiB: return tr("copied KiB");
    case Preemptions: return tr("preempted");
    default: return {};
  }
}

QString request_details_html(const ServingResult& run, const RequestRecord& r, const WorkloadPrompts& prompts,
                             qint64 bytes_per_block) {
  QString h;
  h += QStringLiteral("<h3>Request %1 — %2 at %3</h3>")
           .arg(r.index)
           .arg(esc(QString::fromStdString(run.policy)), budget_label(run.kv_budget_bytes));
  h += QStringLiteral("<p>Arrived at %1 s, admitted at %2 s (waited %3 ms), first token at %4 s (TTFT %5 ms), "
                      "finished at %6 s; %7 output tokens%8.</p>")
           .arg(r.arrival_s, 0, 'f', 4)
           .arg(r.admitted_s, 0, 'f', 4)
           .arg(1e3 * (r.admitted_s - r.arrival_s), 0, 'f', 1)
           .arg(r.first_token_s, 0, 'f', 4)
           .arg(r.ttft_ms(), 0, 'f', 1)
           .arg(r.finish_s, 0, 'f', 4)
           .arg(r.output_tokens)
           .arg(r.preemptions ? QStringLiteral(", preempted %1×").arg(r.preemptions) : QString());
  const int query = r.prompt_tokens - r.prefix_tokens - r.document_tokens;
  h += QStringLiteral("<p>Prompt: %1 tokens = %2 prefix (%3) + %4 in %5 documents + %6 query.</p>")
           .arg(r.prompt_tokens)
           .arg(r.prefix_tokens)
           .arg(r.prefix_tokens == 0 ? QStringLiteral("none") : r.prefix_hit ? QStringLiteral("cached") : QStringLiteral("encoded"))
           .arg(r.document_tokens)
           .arg(r.documents)
           .arg(query);
  // The placements (the same prompt under every policy).
  auto first = std::lower_bound(prompts.placements.begin(), prompts.placements.end(), r.index,
                                [](const WorkloadPlacementRow& p, int request) { return p.request < request; });
  const int B = std::max(1, run.block_size);
  if (first != prompts.placements.end() && first->request == r.index) {
    h += QStringLiteral("<table border='1' cellspacing='0' cellpadding='3'><tr><th>#</th><th>document</th>"
                        "<th>tokens</th><th>blocks</th><th>start s</th><th>shift δ</th><th>%1 does</th></tr>")
             .arg(esc(QString::fromStdString(run.policy)));
    for (auto p = first; p != prompts.placements.end() && p->request == r.index; ++p) {
      QString name = QStringLiteral("doc %1").arg(p->document);
      if (p->document >= 0 && p->document < int(prompts.documents.size())) {
        const WorkloadDocumentRow& d = prompts.documents[std::size_t(p->document)];
        if (!d.source_id.empty()) {
          name += QStringLiteral(": %1 <small>(%2)</small>")
                      .arg(esc(QString::fromStdString(d.title)), esc(QString::fromStdString(d.source_id)));
        }
      }
      h += QStringLiteral("<tr><td>%1</td><td>%2</td><td align='right'>%3</td><td align='right'>%4</td>"
                          "<td align='right'>%5</td><td align='right'>%6</td><td>%7</td></tr>")
               .arg(p->slot)
               .arg(name)
               .arg(p->tokens)
               .arg((p->tokens + B - 1) / B)
               .arg(p->start)
               .arg(p->shift)
               .arg(policy_action(run.policy, p->shift));
    }
    h += QStringLiteral("</table>");
  } else {
    h += QStringLiteral("<p><i>This report holds no placements for the request (written before they were "
                        "recorded).</i></p>");
  }
  // What the pool gave it.
  const int counted = r.documents - r.repeats;
  h += QStringLiteral("<p><b>Shared:</b> %1 of %2 documents were in the pool when it was admitted (%3 tokens, "
                      "about %4 blocks, served from cache)")
           .arg(r.document_hits)
           .arg(counted)
           .arg(r.cached_document_tokens)
           .arg((r.cached_document_tokens + B - 1) / B);
  if (r.repeats) h += QStringLiteral("; %1 placements repeat a document of this request (neither hit nor miss)").arg(r.repeats);
  const int encoded = counted - r.document_hits;
  h += encoded == 1 ? QStringLiteral(". <b>Encoded for it:</b> 1 document.")
                    : QStringLiteral(". <b>Encoded for it:</b> %1 documents.").arg(encoded);
  if (r.bytes_copied > 0) {
    h += QStringLiteral(" <b>Copied:</b> %1 KiB of KV").arg(double(r.bytes_copied) / 1024.0, 0, 'f', 0);
    if (bytes_per_block > 0) {
      h += QStringLiteral(" (%1 blocks' worth)").arg(double(r.bytes_copied) / double(bytes_per_block), 0, 'f', 1);
    }
    h += QStringLiteral(", re-rotated copies that held pool blocks while it ran.");
  } else {
    h += QStringLiteral(" <b>Copied:</b> nothing.");
  }
  h += QStringLiteral("</p><p><small>The scheduler reports hits per request, not per document: which of the "
                      "documents above were the cached ones is not recorded.</small></p>");
  return h;
}

}  // namespace lazyscope::workbench
