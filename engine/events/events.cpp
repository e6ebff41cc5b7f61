#include "engine/events/events.h"

namespace lazyscope {

const char* to_string(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::Prefix: return "prefix";
    case SegmentKind::Document: return "document";
    case SegmentKind::Query: return "query";
    case SegmentKind::Copy: return "copy";
  }
  return "?";
}

const char* to_string(BlockAction action) {
  switch (action) {
    case BlockAction::Allocated: return "allocated";
    case BlockAction::Hit: return "hit";
    case BlockAction::Copied: return "copied";
    case BlockAction::Evicted: return "evicted";
    case BlockAction::Released: return "released";
  }
  return "?";
}

CacheStats& CacheStats::operator+=(const CacheStats& o) {
  prompt_tokens += o.prompt_tokens;
  cached_tokens += o.cached_tokens;
  documents += o.documents;
  document_hits += o.document_hits;
  document_repeats += o.document_repeats;
  repeat_tokens += o.repeat_tokens;
  bytes_stored = o.bytes_stored;  // a level, not a flow: keep the latest
  bytes_copied += o.bytes_copied;
  blocks_allocated += o.blocks_allocated;
  blocks_evicted += o.blocks_evicted;
  return *this;
}

}  // namespace lazyscope
