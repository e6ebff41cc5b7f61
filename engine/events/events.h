#pragma once
// What the engine reports while it works. A plain sink interface: the GUI adapts it to queued
// Qt signals, the CLI prints, tests record. Callbacks arrive on the engine's worker thread.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_trace.h"

namespace lazyscope {

enum class SegmentKind { Prefix, Document, Query, Copy };
const char* to_string(SegmentKind kind);

struct SegmentEvent {
  std::string policy;        // whose KV pool: every policy has its own
  int64_t segment = 0;       // segment id, unique per session
  SegmentKind kind = SegmentKind::Document;
  std::string label;         // document title (copies too) / "prefix" / "query"
  int tokens = 0;
  int encode_position = 0;   // position of the first token as stored
  int shift = 0;             // for copies: rotation applied
  int64_t source_segment = -1;  // for copies: the segment whose KV was copied
  std::vector<int32_t> blocks;  // block ids within the policy's pool
  double encode_ms = 0.0;    // 0 when served from cache
  bool from_cache = false;
};

enum class BlockAction { Allocated, Hit, Copied, Evicted, Released };
const char* to_string(BlockAction action);

struct BlockEvent {
  std::string policy;        // whose KV pool
  BlockAction action = BlockAction::Allocated;
  int32_t block = 0;         // block id within that pool
  int64_t segment = 0;
  int refcount = 0;
  int shift = 0;
  int64_t source_segment = -1;  // Copied: the segment copied from
};

struct TokenEvent {
  std::string policy;
  int step = 0;  // 0 = first generated token
  int32_t id = 0;
  std::string text;
  double ms_since_submit = 0.0;
};

struct CacheStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from cache
  int64_t documents = 0;
  int64_t document_hits = 0;  // placements whose KV was in the pool before the request arrived
  // Placements of a document already placed earlier in the same request, whose KV was not in the
  // pool before the request: served by this request's own encode, so neither hit nor miss.
  int64_t document_repeats = 0;
  int64_t repeat_tokens = 0;
  int64_t bytes_stored = 0;   // KV bytes in use by cached segments
  int64_t bytes_copied = 0;   // KV bytes written by materialize/positional copies
  int64_t blocks_allocated = 0;
  int64_t blocks_evicted = 0;
  double token_hit_ratio() const {
    return prompt_tokens ? double(cached_tokens) / double(prompt_tokens) : 0.0;
  }
  // Hits among the placements that are not in-request repeats.
  double document_hit_ratio() const {
    const int64_t counted = documents - document_repeats;
    return counted > 0 ? double(document_hits) / double(counted) : 0.0;
  }
  CacheStats& operator+=(const CacheStats& o);
};

struct RequestFinishedEvent {
  std::string policy;
  std::string mode;
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double ttft_ms = 0.0;
  double decode_ms_per_token = 0.0;
  CacheStats stats;            // this request
  CacheStats cumulative;       // the session so far, this policy
  bool cancelled = false;
};

struct PoolEvent {
  std::string policy;        // whose KV pool
  int blocks_total = 0;
  int blocks_in_use = 0;     // referenced by a running request
  int blocks_cached = 0;     // held by unreferenced cached segments
  int64_t bytes_total = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_segment(const SegmentEvent&) {}
  virtual void on_block(const BlockEvent&) {}
  virtual void on_token(const TokenEvent&) {}
  virtual void on_request_finished(const RequestFinishedEvent&) {}
  virtual void on_pool(const PoolEvent&) {}
  // The host ranges of the request that is finishing and, with SessionOptions::trace_device on the
  // CUDA backend, its CUPTI records; arrives just before on_request_finished.
  virtual void on_device_activity(const DeviceActivity&) {}
};

}  // namespace lazyscope
