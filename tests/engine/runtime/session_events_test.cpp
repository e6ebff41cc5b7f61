// The Session reports what happens through the EventSink: encodes, hits, copies, tokens.
#include <gtest/gtest.h>

#include <map>

#include "engine/runtime/session.h"
#include "base/error.h"

namespace lazyscope {
namespace {

struct Recorder : EventSink {
  std::map<BlockAction, int> blocks;
  int segments_encoded = 0, segments_from_cache = 0, tokens = 0, finished = 0;
  RequestFinishedEvent last;
  void on_segment(const SegmentEvent& e) override { (e.from_cache ? segments_from_cache : segments_encoded)++; }
  void on_block(const BlockEvent& e) override { blocks[e.action]++; }
  void on_token(const TokenEvent&) override { ++tokens; }
  void on_request_finished(const RequestFinishedEvent& e) override {
    ++finished;
    last = e;
  }
};

Request ids_request() {
  Request r;
  r.prefix_ids = std::vector<int32_t>{1, 5, 6};
  r.document_ids = {std::vector<int32_t>(20, 40), std::vector<int32_t>(9, 41)};
  r.query_ids = std::vector<int32_t>{7, 8, 9};
  r.max_new_tokens = 4;
  return r;
}

TEST(SessionEvents, LazyHitsAndMaterializedCopiesAreReported) {
  Recorder rec;
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  o.kv_budget_bytes = 4ull << 20;
  Session session(o, &rec);
  Request r = ids_request();
  RunOptions lazy;
  lazy.policy = Policy::Lazy;
  session.submit(r, lazy);
  EXPECT_EQ(rec.segments_encoded, 3);  // prefix + 2 documents
  EXPECT_EQ(rec.tokens, 4);
  EXPECT_EQ(rec.blocks[BlockAction::Hit], 0);
  r.order = {1, 0};
  session.submit(r, lazy);
  EXPECT_EQ(rec.segments_from_cache, 3);
  EXPECT_GT(rec.blocks[BlockAction::Hit], 0);
  EXPECT_EQ(rec.blocks[BlockAction::Copied], 0);
  EXPECT_DOUBLE_EQ(rec.last.stats.document_hit_ratio(), 1.0);
  RunOptions mat;
  mat.policy = Policy::Materialized;
  RunResult m = session.submit(r, mat);
  EXPECT_GT(rec.blocks[BlockAction::Copied], 0);  // document 0 now sits 9 tokens later
  EXPECT_GT(m.stats.bytes_copied, 0);
  EXPECT_GT(rec.blocks[BlockAction::Released], 0);  // the copies and query blocks go back
  EXPECT_EQ(rec.finished, 3);
  EXPECT_EQ(session.cumulative(Policy::Lazy).documents, 4);
  PoolSnapshot snap = session.snapshot(Policy::Lazy);
  int owned = 0;
  for (const BlockState& b : snap.blocks) owned += b.segment >= 0;
  EXPECT_EQ(owned, 1 + 2 + 1);  // prefix, document 0 (2 blocks), document 1: nothing else stays
}

TEST(SessionEvents, CancelStopsGeneration) {
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  Session session(o);
  std::atomic<bool> cancel{false};
  RunOptions run;
  run.cancel = &cancel;
  run.max_new_tokens = 50;
  int seen = 0;
  RunResult r = session.submit(ids_request(), run, [&](const TokenEvent&) {
    if (++seen == 3) cancel = true;
  });
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.generated_ids.size(), 3u);
}

TEST(SessionEvents, TextRequestOnASyntheticModelIsRefused) {
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  Session session(o);
  Request r;
  r.query = "hello";
  EXPECT_THROW(session.submit(r, RunOptions{}), Error);
}

TEST(SessionEvents, ByteSizes) {
  EXPECT_EQ(parse_byte_size("64MiB"), 64ull << 20);
  EXPECT_EQ(parse_byte_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("500MB"), 500000000ull);
  EXPECT_EQ(parse_byte_size("4096"), 4096ull);
  EXPECT_THROW(parse_byte_size("lots"), Error);
  EXPECT_THROW(parse_byte_size("5 parsecs"), Error);
}

}  // namespace
}  // namespace lazyscope
