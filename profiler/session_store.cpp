// The session report: plain SQLite. LazyScope's own tables (requests, segments, block events,
// tokens, spans, device_trace, overhead_probe) beside the tables of Nsight Systems' SQLite export
// (StringIds, CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS, TARGET_INFO_*, META_DATA_EXPORT, ENUM_*), with
// their names, column names, types and units, so SQL written for nsys exports runs on our reports.
// docs/report-schema.md documents every table and the mapping.
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "kernels/nvtx_ranges.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

constexpr int kSchemaVersion = 3;
// The Nsight Systems export schema whose table and column names we follow (nsys 2026.4).
constexpr const char* kNsysExportSchemaVersion = "3.28.1";
// Nsight Systems' codes (ENUM_NSYS_EVENT_TYPE, ENUM_NSYS_EVENT_CLASS).
constexpr int kNvtxPushPopRange = 59;
constexpr int kNvtxDomainCreate = 75;
constexpr int kEventClassCudaRuntime = 0;
constexpr int kEventClassCudaDriver = 1;
constexpr int kNvtxDomainId = 1;

class Db {
 public:
  Db(const std::filesystem::path& path, int flags) : path_(path.string()) {
    if (sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw Error(path_ + ": cannot open the session file: " + msg);
    }
  }
  ~Db() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw Error(path_ + ": " + msg);
    }
  }
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      throw Error(path_ + ": " + sqlite3_errmsg(db_));
    }
    return st;
  }
  void step_done(sqlite3_stmt* st) {
    if (sqlite3_step(st) != SQLITE_DONE) throw Error(path_ + ": " + sqlite3_errmsg(db_));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
  // Steps a query to its end, calling `row` for each row; a read error (a damaged or truncated
  // file) throws instead of ending the table early.
  template <typename F>
  void each_row(const std::string& sql, F row) {
    sqlite3_stmt* st = prepare(sql);
    int rc = SQLITE_ROW;
    try {
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) row(st);
    } catch (...) {
      sqlite3_finalize(st);
      throw;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw Error(path_ + ": the session file is damaged or truncated (" + sqlite3_errmsg(db_) + ")");
  }
  // The tables' names are read once per connection: a reader asks for twenty of them, and each
  // query of its own cost a statement's compile and a scan of the schema table.
  bool has_table(const std::string& name) {
    if (!tables_read_) {
      each_row("SELECT name FROM sqlite_master WHERE type = 'table'", [&](sqlite3_stmt* st) {
        if (const unsigned char* t = sqlite3_column_text(st, 0)) tables_.insert(reinterpret_cast<const char*>(t));
      });
      tables_read_ = true;
    }
    return tables_.count(name) != 0;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::set<std::string> tables_;
  bool tables_read_ = false;
};

struct Stmt {
  explicit Stmt(sqlite3_stmt* s) : st(s) {}
  ~Stmt() { sqlite3_finalize(st); }
  Stmt& i(int col, int64_t v) {
    sqlite3_bind_int64(st, col, v);
    return *this;
  }
  Stmt& d(int col, double v) {
    sqlite3_bind_double(st, col, v);
    return *this;
  }
  Stmt& s(int col, const std::string& v) {
    sqlite3_bind_text(st, col, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // A graph node id of 0 means "not in a graph": NULL, as Nsight Systems writes it.
  Stmt& nonzero(int col, uint64_t v) {
    if (v != 0) sqlite3_bind_int64(st, col, int64_t(v));
    return *this;
  }
  sqlite3_stmt* st;
};

const char* kOwnSchema = R"(
CREATE TABLE metadata(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE requests(id INTEGER PRIMARY KEY, policy TEXT, mode TEXT, start_ms REAL, prompt_tokens INTEGER,
  generated_tokens INTEGER, ttft_ms REAL, decode_ms_per_token REAL, cached_tokens INTEGER, documents INTEGER,
  document_hits INTEGER, bytes_stored INTEGER, bytes_copied INTEGER, blocks_allocated INTEGER,
  blocks_evicted INTEGER, cancelled INTEGER);
CREATE TABLE segments(request INTEGER, t_ms REAL, segment INTEGER, kind TEXT, label TEXT, tokens INTEGER,
  encode_position INTEGER, shift INTEGER, from_cache INTEGER, encode_ms REAL);
CREATE TABLE block_events(request INTEGER, t_ms REAL, action TEXT, block INTEGER, segment INTEGER,
  refcount INTEGER, shift INTEGER);
CREATE TABLE tokens(request INTEGER, policy TEXT, step INTEGER, token_id INTEGER, text TEXT, ms REAL);
CREATE TABLE spans(request INTEGER, name TEXT, category TEXT, start_ms REAL, duration_ms REAL);
CREATE TABLE device_trace(request INTEGER, device_traced INTEGER, kernels INTEGER, memcpys INTEGER,
  memsets INTEGER, api_calls INTEGER, ranges INTEGER, dropped_records INTEGER, graphs INTEGER,
  kernel_detail_steps INTEGER, graph_level_steps INTEGER, flush_ms REAL);
CREATE TABLE overhead_probe(backend TEXT, device TEXT, kernel TEXT, shape TEXT, num_heads INTEGER,
  num_kv_heads INTEGER, head_dim INTEGER, block_size INTEGER, batch INTEGER, context INTEGER,
  document_tokens INTEGER, repeats INTEGER, calls INTEGER, plain_us REAL, lazy_us REAL, overhead REAL,
  overhead_p25 REAL, overhead_p75 REAL, overhead_min REAL, overhead_max REAL);
)";

// Nsight Systems' tables, columns in its order and with its types (export schema 3.28.1).
const char* kNsysSchema = R"(
CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE(id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_CLASS(id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER(id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE TARGET_INFO_GPU(vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
  isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
  smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT,
  ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER,
  maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER,
  maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, maxWarpsPerSm INTEGER,
  maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER, maxBlockDimY INTEGER,
  maxBlockDimZ INTEGER, maxGridDimX INTEGER, maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER,
  computeMinor INTEGER, smMajor INTEGER, smMinor INTEGER, numaNodeId INTEGER);
CREATE TABLE TARGET_INFO_CUDA_DEVICE(gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL, uuid TEXT,
  numMultiprocessors INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
  gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER,
  dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
  callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
  callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, graphId INTEGER, graphExecId INTEGER);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(59, 'NvtxPushPopRange', 'NVTX PushPop Range');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(75, 'NvtxDomainCreate', 'NVTX Domain Create');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES(0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', 'CUDA runtime');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES(1, 'TRACE_PROCESS_EVENT_CUDA_DRIVER', 'CUDA driver');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(9, 'CUDA_MEMCPY_KIND_HTOH', 'Host-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(10, 'CUDA_MEMCPY_KIND_PTOP', 'Peer-to-Peer');
)";

// Nsight Systems' serialized GlobalId for a process and a thread (hardware and VM ids 0: this host).
int64_t global_pid(uint32_t pid) { return int64_t(pid & 0xFFFFFF) << 24; }
int64_t global_tid(uint32_t pid, uint32_t tid) { return global_pid(pid) | int64_t(tid & 0xFFFFFF); }

SegmentKind segment_kind_from(const std::string& s) {
  for (SegmentKind k : {SegmentKind::Prefix, SegmentKind::Document, SegmentKind::Query, SegmentKind::Copy}) {
    if (s == to_string(k)) return k;
  }
  return SegmentKind::Document;
}

BlockAction block_action_from(const std::string& s) {
  for (BlockAction a : {BlockAction::Allocated, BlockAction::Hit, BlockAction::Copied, BlockAction::Evicted,
                        BlockAction::Released}) {
    if (s == to_string(a)) return a;
  }
  return BlockAction::Allocated;
}

std::string text_column(sqlite3_stmt* st, int col) {
  const unsigned char* t = sqlite3_column_text(st, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}

class StringTable {
 public:
  int64_t id(const std::string& value) {
    auto [it, added] = ids_.emplace(value, int64_t(ids_.size()) + 1);
    return it->second;
  }
  const std::map<std::string, int64_t>& all() const { return ids_; }

 private:
  std::map<std::string, int64_t> ids_;
};

void write_own_tables(Db& db, const SessionRecording& r) {
  {
    Stmt st(db.prepare("INSERT INTO metadata VALUES(?,?)"));
    std::map<std::string, std::string> meta = r.metadata;
    meta["format"] = "lazyscope-session";
    meta["process_id"] = std::to_string(r.process_id);
    for (const auto& [k, v] : meta) {
      st.s(1, k).s(2, v);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO requests VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    for (const RecordedRequest& q : r.requests) {
      const RequestFinishedEvent& e = q.event;
      st.i(1, q.id).s(2, e.policy).s(3, e.mode).d(4, q.start_ms).i(5, e.prompt_tokens).i(6, e.generated_tokens)
          .d(7, e.ttft_ms).d(8, e.decode_ms_per_token).i(9, e.stats.cached_tokens).i(10, e.stats.documents)
          .i(11, e.stats.document_hits).i(12, e.stats.bytes_stored).i(13, e.stats.bytes_copied)
          .i(14, e.stats.blocks_allocated).i(15, e.stats.blocks_evicted).i(16, e.cancelled);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO segments VALUES(?,?,?,?,?,?,?,?,?,?)"));
    for (const RecordedSegment& s : r.segments) {
      const SegmentEvent& e = s.event;
      st.i(1, s.request).d(2, s.t_ms).i(3, e.segment).s(4, to_string(e.kind)).s(5, e.label).i(6, e.tokens)
          .i(7, e.encode_position).i(8, e.shift).i(9, e.from_cache).d(10, e.encode_ms);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO block_events VALUES(?,?,?,?,?,?,?)"));
    for (const RecordedBlockEvent& b : r.blocks) {
      st.i(1, b.request).d(2, b.t_ms).s(3, to_string(b.event.action)).i(4, b.event.block).i(5, b.event.segment)
          .i(6, b.event.refcount).i(7, b.event.shift);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO tokens VALUES(?,?,?,?,?,?)"));
    for (const RecordedToken& t : r.tokens) {
      st.i(1, t.request).s(2, t.event.policy).i(3, t.event.step).i(4, t.event.id).s(5, t.event.text)
          .d(6, t.event.ms_since_submit);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO spans VALUES(?,?,?,?,?)"));
    for (const RecordedSpan& s : r.spans) {
      st.i(1, s.request).s(2, s.name).s(3, s.category).d(4, s.start_ms).d(5, s.duration_ms);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO device_trace VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"));
    for (const RecordedTraceSummary& t : r.traces) {
      st.i(1, t.request).i(2, t.device_traced).i(3, t.kernels).i(4, t.memcpys).i(5, t.memsets).i(6, t.api_calls)
          .i(7, t.ranges).i(8, int64_t(t.dropped_records)).i(9, t.graphs).i(10, t.kernel_detail_steps)
          .i(11, t.graph_level_steps).d(12, t.flush_ms);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO overhead_probe VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    for (const OverheadProbeRow& o : r.overhead) {
      st.s(1, o.backend).s(2, o.device).s(3, o.kernel).s(4, o.shape).i(5, o.num_heads).i(6, o.num_kv_heads)
          .i(7, o.head_dim).i(8, o.block_size).i(9, o.batch).i(10, o.context).i(11, o.document_tokens)
          .i(12, o.repeats).i(13, o.calls).d(14, o.plain_us).d(15, o.lazy_us).d(16, o.overhead)
          .d(17, o.overhead_p25).d(18, o.overhead_p75).d(19, o.overhead_min).d(20, o.overhead_max);
      db.step_done(st.st);
    }
  }
}

// Which steps of the report have per-kernel records (META_DATA_EXPORT LAZYSCOPE_KERNEL_DETAIL).
std::string kernel_detail_text(const SessionRecording& r) {
  bool traced = false, sampled = false;
  for (const RecordedTraceSummary& t : r.traces) {
    traced = traced || t.device_traced;
    sampled = sampled || (t.device_traced && t.kernel_detail_steps >= 0);
  }
  if (!traced) return "none (no device trace)";
  if (!sampled) return "every kernel of every step";
  return "encodes, copies, prefill and the first decode steps of each request (device_trace.kernel_detail_steps) "
         "have a CUPTI_ACTIVITY_KIND_KERNEL row per kernel; the later decode steps "
         "(device_trace.graph_level_steps) have one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per CUDA graph launch";
}

void write_nsys_tables(Db& db, const SessionRecording& r) {
  StringTable strings;
  uint64_t dropped = 0;
  bool device_traced = false;
  for (const RecordedTraceSummary& t : r.traces) {
    dropped += t.dropped_records;
    device_traced = device_traced || t.device_traced;
  }
  {
    Stmt st(db.prepare("INSERT INTO META_DATA_EXPORT VALUES(?,?)"));
    const std::pair<const char*, std::string> rows[] = {
        {"EXPORT_SCHEMA_VERSION", kNsysExportSchemaVersion},
        {"LAZYSCOPE_SESSION_SCHEMA", std::to_string(kSchemaVersion)},
        {"LAZYSCOPE_TIME_ORIGIN", "ns since the session recording started (the origin of the *_ms columns)"},
        {"LAZYSCOPE_DEVICE_TRACE", device_traced ? "CUPTI activity records" : "host ranges only (no device trace)"},
        {"LAZYSCOPE_CUPTI_DROPPED_RECORDS", std::to_string(dropped)},
        {"LAZYSCOPE_NVTX_DOMAIN", kNvtxDomain},
        {"LAZYSCOPE_NVTX_PAYLOAD", "int64Value: the request number (requests.id)"},
        {"LAZYSCOPE_KERNEL_DETAIL", kernel_detail_text(r)},
    };
    for (const auto& [name, value] : rows) {
      st.s(1, name).s(2, value);
      db.step_done(st.st);
    }
  }
  {
    Stmt gpu(db.prepare(
        "INSERT INTO TARGET_INFO_GPU(vmId, id, name, busLocation, isDiscrete, l2CacheSize, totalMemory, clockRate, "
        "smCount, uuid, cuDevice, maxRegistersPerBlock, maxShmemPerBlock, maxShmemPerBlockOptin, maxShmemPerSm, "
        "maxRegistersPerSm, threadsPerWarp, maxThreadsPerBlock, computeMajor, computeMinor) "
        "VALUES(0,?,?,?,1,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    Stmt cuda(db.prepare("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES(?,?,?,?,?)"));
    for (const GpuInfo& g : r.gpus) {
      gpu.i(1, g.id).s(2, g.name).s(3, g.bus_location).i(4, g.l2_cache_size).i(5, g.total_memory)
          .i(6, g.clock_rate_hz).i(7, g.sm_count).s(8, g.uuid).i(9, g.id).i(10, g.max_registers_per_block)
          .i(11, g.max_shmem_per_block).i(12, g.max_shmem_per_block_optin).i(13, g.max_shmem_per_sm)
          .i(14, g.max_registers_per_sm).i(15, g.threads_per_warp).i(16, g.max_threads_per_block)
          .i(17, g.compute_major).i(18, g.compute_minor);
      db.step_done(gpu.st);
      cuda.i(1, g.id).i(2, g.id).i(3, r.process_id).s(4, g.uuid).i(5, g.sm_count);
      db.step_done(cuda.st);
    }
  }
  const int64_t pid = global_pid(r.process_id);
  {
    Stmt st(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, contextId, streamId, "
                       "correlationId, globalPid, demangledName, shortName, mangledName, launchType, cacheConfig, "
                       "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
                       "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, sharedMemoryExecuted, "
                       "graphNodeId, sharedMemoryLimitConfig) "
                       "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    for (const KernelRecord& k : r.kernels) {
      const KernelNames names = k.demangled_name.empty() ? kernel_names(k.mangled_name)
                                                         : KernelNames{k.demangled_name, k.display_name, k.short_name};
      st.i(1, k.start_ns).i(2, k.end_ns).i(3, k.device_id).i(4, k.context_id).i(5, k.stream_id)
          .i(6, k.correlation_id).i(7, pid).i(8, strings.id(names.demangled)).i(9, strings.id(names.base))
          .i(10, strings.id(k.mangled_name.empty() ? names.demangled : k.mangled_name)).i(11, k.launch_type)
          .i(12, k.cache_config).i(13, k.registers_per_thread).i(14, k.grid[0]).i(15, k.grid[1]).i(16, k.grid[2])
          .i(17, k.block[0]).i(18, k.block[1]).i(19, k.block[2]).i(20, k.static_shared_memory)
          .i(21, k.dynamic_shared_memory).i(22, k.local_memory_per_thread).i(23, k.local_memory_total)
          .i(24, k.grid_id).i(25, k.shared_memory_executed).nonzero(26, k.graph_node_id)
          .i(27, k.shared_memory_limit_config);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY(start, end, deviceId, contextId, streamId, "
                       "correlationId, globalPid, bytes, copyKind, srcKind, dstKind, graphNodeId) "
                       "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"));
    for (const MemcpyRecord& m : r.memcpys) {
      st.i(1, m.start_ns).i(2, m.end_ns).i(3, m.device_id).i(4, m.context_id).i(5, m.stream_id)
          .i(6, m.correlation_id).i(7, pid).i(8, int64_t(m.bytes)).i(9, m.copy_kind).i(10, m.src_kind)
          .i(11, m.dst_kind).nonzero(12, m.graph_node_id);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET(start, end, deviceId, contextId, streamId, "
                       "correlationId, globalPid, value, bytes, graphNodeId, memKind) VALUES(?,?,?,?,?,?,?,?,?,?,?)"));
    for (const MemsetRecord& m : r.memsets) {
      st.i(1, m.start_ns).i(2, m.end_ns).i(3, m.device_id).i(4, m.context_id).i(5, m.stream_id)
          .i(6, m.correlation_id).i(7, pid).i(8, m.value).i(9, int64_t(m.bytes)).nonzero(10, m.graph_node_id)
          .i(11, m.memory_kind);
      db.step_done(st.st);
    }
  }
  {
    // As Nsight Systems does: runtime calls in CUPTI_ACTIVITY_KIND_RUNTIME, driver calls in
    // CUPTI_ACTIVITY_KIND_DRIVER, with the same columns.
    Stmt runtime(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME(start, end, eventClass, globalTid, correlationId, "
                            "nameId, returnValue) VALUES(?,?,?,?,?,?,?)"));
    Stmt driver(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER(start, end, eventClass, globalTid, correlationId, "
                           "nameId, returnValue) VALUES(?,?,?,?,?,?,?)"));
    for (const ApiRecord& a : r.api_calls) {
      Stmt& st = a.driver ? driver : runtime;
      st.i(1, a.start_ns).i(2, a.end_ns).i(3, a.driver ? kEventClassCudaDriver : kEventClassCudaRuntime)
          .i(4, global_tid(r.process_id, a.thread_id)).i(5, a.correlation_id).i(6, strings.id(a.name))
          .i(7, a.return_value);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE(start, end, deviceId, contextId, streamId, "
                       "correlationId, globalPid, graphId) VALUES(?,?,?,?,?,?,?,?)"));
    for (const GraphRecord& g : r.graphs) {
      st.i(1, g.start_ns).i(2, g.end_ns).i(3, g.device_id).i(4, g.context_id).i(5, g.stream_id)
          .i(6, g.correlation_id).i(7, pid).i(8, g.graph_id);
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO NVTX_EVENTS(start, end, eventType, text, globalTid, domainId, int64Value) "
                       "VALUES(?,?,?,?,?,?,?)"));
    if (!r.ranges.empty()) {
      // The domain's creation, as Nsight Systems records it: its name in `text`, its id in domainId.
      const HostRange& first = r.ranges.front().range;
      st.i(1, first.start_ns).i(3, kNvtxDomainCreate).s(4, kNvtxDomain).i(5, global_tid(r.process_id, first.thread_id))
          .i(6, kNvtxDomainId);
      db.step_done(st.st);
    }
    for (const RecordedRange& rr : r.ranges) {
      const HostRange& h = rr.range;
      st.i(1, h.start_ns).i(2, h.end_ns).i(3, kNvtxPushPopRange).s(4, h.name).i(5, global_tid(r.process_id, h.thread_id))
          .i(6, kNvtxDomainId).nonzero(7, uint64_t(h.request_id));
      db.step_done(st.st);
    }
  }
  {
    Stmt st(db.prepare("INSERT INTO StringIds VALUES(?,?)"));
    for (const auto& [value, id] : strings.all()) {
      st.i(1, id).s(2, value);
      db.step_done(st.st);
    }
  }
}

}  // namespace

void save_session_sqlite(const SessionRecording& r, const std::filesystem::path& path) {
  AtomicFile file(path, "session report");  // temporary sibling, fsync, rename, folder fsync
  {
    Db db(file.temp_path(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=OFF; BEGIN;");
    db.exec(kOwnSchema);
    db.exec(kNsysSchema);
    db.exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
    write_own_tables(db, r);
    write_nsys_tables(db, r);
    db.exec("COMMIT;");
  }
  file.commit();
}

SessionRecording load_session_sqlite(const std::filesystem::path& path) {
  const std::string name = path.string();
  if (!std::filesystem::exists(path)) throw Error(name + ": no such session file");
  if (std::filesystem::is_directory(path)) throw Error(name + ": is a directory, not a session file");
  Db db(path, SQLITE_OPEN_READONLY);
  SessionRecording r;
  std::string check;
  try {
    db.each_row("PRAGMA quick_check", [&](sqlite3_stmt* st) {
      if (check.empty()) check = text_column(st, 0);
    });
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find("not a database") != std::string::npos) throw Error(name + ": not a LazyScope session file (not SQLite)");
    throw Error(name + ": the session file is damaged or truncated (" + what.substr(std::min(what.size(), name.size() + 2)) + ")");
  }
  if (check != "ok") throw Error(name + ": the session file is damaged or truncated (SQLite: " + check + ")");
  if (!db.has_table("metadata")) throw Error(name + ": not a LazyScope session file (no metadata table)");
  db.each_row("SELECT key, value FROM metadata",
              [&](sqlite3_stmt* st) { r.metadata[text_column(st, 0)] = text_column(st, 1); });
  if (r.metadata["format"] != "lazyscope-session") throw Error(name + ": not a LazyScope session file");
  int version = 0;
  db.each_row("PRAGMA user_version", [&](sqlite3_stmt* st) { version = sqlite3_column_int(st, 0); });
  if (version > kSchemaVersion) {
    throw Error(name + ": written by a newer LazyScope (schema " + std::to_string(version) + ", this one reads up to " +
                std::to_string(kSchemaVersion) + ")");
  }
  std::vector<std::string> tables = {"requests", "segments", "block_events", "tokens", "spans"};
  if (version >= 2) {
    for (const char* t : {"device_trace", "overhead_probe", "StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU",
                          "TARGET_INFO_CUDA_DEVICE", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}) {
      tables.push_back(t);
    }
  }
  if (version >= 3) {
    for (const char* t : {"CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"}) tables.push_back(t);
  }
  for (const std::string& t : tables) {
    if (!db.has_table(t)) throw Error(name + ": not a complete session file (table " + t + " is missing)");
  }
  if (auto it = r.metadata.find("process_id"); it != r.metadata.end()) {
    r.process_id = uint32_t(std::strtoul(it->second.c_str(), nullptr, 10));
    r.metadata.erase(it);
  }
  db.each_row("SELECT * FROM requests ORDER BY id", [&](sqlite3_stmt* st) {
    RecordedRequest q;
    q.id = sqlite3_column_int(st, 0);
    q.event.policy = text_column(st, 1);
    q.event.mode = text_column(st, 2);
    q.start_ms = sqlite3_column_double(st, 3);
    q.event.prompt_tokens = sqlite3_column_int(st, 4);
    q.event.generated_tokens = sqlite3_column_int(st, 5);
    q.event.ttft_ms = sqlite3_column_double(st, 6);
    q.event.decode_ms_per_token = sqlite3_column_double(st, 7);
    q.event.stats.prompt_tokens = q.event.prompt_tokens;
    q.event.stats.cached_tokens = sqlite3_column_int64(st, 8);
    q.event.stats.documents = sqlite3_column_int64(st, 9);
    q.event.stats.document_hits = sqlite3_column_int64(st, 10);
    q.event.stats.bytes_stored = sqlite3_column_int64(st, 11);
    q.event.stats.bytes_copied = sqlite3_column_int64(st, 12);
    q.event.stats.blocks_allocated = sqlite3_column_int64(st, 13);
    q.event.stats.blocks_evicted = sqlite3_column_int64(st, 14);
    q.event.cancelled = sqlite3_column_int(st, 15) != 0;
    r.requests.push_back(q);
  });
  db.each_row("SELECT * FROM segments", [&](sqlite3_stmt* st) {
    RecordedSegment s;
    s.request = sqlite3_column_int(st, 0);
    s.t_ms = sqlite3_column_double(st, 1);
    s.event.segment = sqlite3_column_int64(st, 2);
    s.event.kind = segment_kind_from(text_column(st, 3));
    s.event.label = text_column(st, 4);
    s.event.tokens = sqlite3_column_int(st, 5);
    s.event.encode_position = sqlite3_column_int(st, 6);
    s.event.shift = sqlite3_column_int(st, 7);
    s.event.from_cache = sqlite3_column_int(st, 8) != 0;
    s.event.encode_ms = sqlite3_column_double(st, 9);
    r.segments.push_back(s);
  });
  db.each_row("SELECT * FROM block_events", [&](sqlite3_stmt* st) {
    RecordedBlockEvent b;
    b.request = sqlite3_column_int(st, 0);
    b.t_ms = sqlite3_column_double(st, 1);
    b.event.action = block_action_from(text_column(st, 2));
    b.event.block = sqlite3_column_int(st, 3);
    b.event.segment = sqlite3_column_int64(st, 4);
    b.event.refcount = sqlite3_column_int(st, 5);
    b.event.shift = sqlite3_column_int(st, 6);
    r.blocks.push_back(b);
  });
  db.each_row("SELECT * FROM tokens", [&](sqlite3_stmt* st) {
    RecordedToken t;
    t.request = sqlite3_column_int(st, 0);
    t.event.policy = text_column(st, 1);
    t.event.step = sqlite3_column_int(st, 2);
    t.event.id = sqlite3_column_int(st, 3);
    t.event.text = text_column(st, 4);
    t.event.ms_since_submit = sqlite3_column_double(st, 5);
    r.tokens.push_back(t);
  });
  db.each_row("SELECT * FROM spans", [&](sqlite3_stmt* st) {
    r.spans.push_back({sqlite3_column_int(st, 0), text_column(st, 1), text_column(st, 2), sqlite3_column_double(st, 3),
                       sqlite3_column_double(st, 4)});
  });
  if (version < 2) return r;
  db.each_row(version >= 3 ? "SELECT * FROM device_trace"
                            : "SELECT *, 0, -1, 0, 0.0 FROM device_trace",
              [&](sqlite3_stmt* st) {
    RecordedTraceSummary t;
    t.request = sqlite3_column_int(st, 0);
    t.device_traced = sqlite3_column_int(st, 1) != 0;
    t.kernels = sqlite3_column_int64(st, 2);
    t.memcpys = sqlite3_column_int64(st, 3);
    t.memsets = sqlite3_column_int64(st, 4);
    t.api_calls = sqlite3_column_int64(st, 5);
    t.ranges = sqlite3_column_int64(st, 6);
    t.dropped_records = uint64_t(sqlite3_column_int64(st, 7));
    t.graphs = sqlite3_column_int64(st, 8);
    t.kernel_detail_steps = sqlite3_column_int(st, 9);
    t.graph_level_steps = sqlite3_column_int(st, 10);
    t.flush_ms = sqlite3_column_double(st, 11);
    r.traces.push_back(t);
  });
  db.each_row("SELECT * FROM overhead_probe", [&](sqlite3_stmt* st) {
    OverheadProbeRow o;
    o.backend = text_column(st, 0);
    o.device = text_column(st, 1);
    o.kernel = text_column(st, 2);
    o.shape = text_column(st, 3);
    o.num_heads = sqlite3_column_int(st, 4);
    o.num_kv_heads = sqlite3_column_int(st, 5);
    o.head_dim = sqlite3_column_int(st, 6);
    o.block_size = sqlite3_column_int(st, 7);
    o.batch = sqlite3_column_int(st, 8);
    o.context = sqlite3_column_int(st, 9);
    o.document_tokens = sqlite3_column_int(st, 10);
    o.repeats = sqlite3_column_int(st, 11);
    o.calls = sqlite3_column_int(st, 12);
    o.plain_us = sqlite3_column_double(st, 13);
    o.lazy_us = sqlite3_column_double(st, 14);
    o.overhead = sqlite3_column_double(st, 15);
    o.overhead_p25 = sqlite3_column_double(st, 16);
    o.overhead_p75 = sqlite3_column_double(st, 17);
    o.overhead_min = sqlite3_column_double(st, 18);
    o.overhead_max = sqlite3_column_double(st, 19);
    r.overhead.push_back(o);
  });
  db.each_row("SELECT id, name, busLocation, l2CacheSize, totalMemory, clockRate, smCount, uuid, maxRegistersPerBlock, "
              "maxShmemPerBlock, maxShmemPerBlockOptin, maxShmemPerSm, maxRegistersPerSm, threadsPerWarp, "
              "maxThreadsPerBlock, computeMajor, computeMinor FROM TARGET_INFO_GPU ORDER BY id",
              [&](sqlite3_stmt* st) {
                GpuInfo g;
                g.id = sqlite3_column_int(st, 0);
                g.name = text_column(st, 1);
                g.bus_location = text_column(st, 2);
                g.l2_cache_size = sqlite3_column_int64(st, 3);
                g.total_memory = sqlite3_column_int64(st, 4);
                g.clock_rate_hz = sqlite3_column_int64(st, 5);
                g.sm_count = sqlite3_column_int(st, 6);
                g.uuid = text_column(st, 7);
                g.max_registers_per_block = sqlite3_column_int(st, 8);
                g.max_shmem_per_block = sqlite3_column_int64(st, 9);
                g.max_shmem_per_block_optin = sqlite3_column_int64(st, 10);
                g.max_shmem_per_sm = sqlite3_column_int64(st, 11);
                g.max_registers_per_sm = sqlite3_column_int(st, 12);
                g.threads_per_warp = sqlite3_column_int(st, 13);
                g.max_threads_per_block = sqlite3_column_int(st, 14);
                g.compute_major = sqlite3_column_int(st, 15);
                g.compute_minor = sqlite3_column_int(st, 16);
                r.gpus.push_back(g);
              });
  db.each_row("SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, d.value, s.value, m.value, "
              "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, k.staticSharedMemory, "
              "k.dynamicSharedMemory, k.localMemoryPerThread, k.localMemoryTotal, k.gridId, k.sharedMemoryExecuted, "
              "k.launchType, k.cacheConfig, k.sharedMemoryLimitConfig, k.graphNodeId "
              "FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds d ON d.id = k.demangledName "
              "LEFT JOIN StringIds s ON s.id = k.shortName LEFT JOIN StringIds m ON m.id = k.mangledName "
              "ORDER BY k.start",
              [&](sqlite3_stmt* st) {
                KernelRecord k;
                k.start_ns = sqlite3_column_int64(st, 0);
                k.end_ns = sqlite3_column_int64(st, 1);
                k.device_id = uint32_t(sqlite3_column_int64(st, 2));
                k.context_id = uint32_t(sqlite3_column_int64(st, 3));
                k.stream_id = uint32_t(sqlite3_column_int64(st, 4));
                k.correlation_id = uint32_t(sqlite3_column_int64(st, 5));
                k.demangled_name = text_column(st, 6);
                k.short_name = text_column(st, 7);
                k.mangled_name = text_column(st, 8);
                k.display_name = kernel_names(k.demangled_name).display;
                for (int i = 0; i < 3; ++i) k.grid[i] = sqlite3_column_int(st, 9 + i);
                for (int i = 0; i < 3; ++i) k.block[i] = sqlite3_column_int(st, 12 + i);
                k.registers_per_thread = sqlite3_column_int(st, 15);
                k.static_shared_memory = sqlite3_column_int(st, 16);
                k.dynamic_shared_memory = sqlite3_column_int(st, 17);
                k.local_memory_per_thread = sqlite3_column_int64(st, 18);
                k.local_memory_total = sqlite3_column_int64(st, 19);
                k.grid_id = sqlite3_column_int64(st, 20);
                k.shared_memory_executed = sqlite3_column_int64(st, 21);
                k.launch_type = sqlite3_column_int(st, 22);
                k.cache_config = sqlite3_column_int(st, 23);
                k.shared_memory_limit_config = sqlite3_column_int(st, 24);
                k.graph_node_id = uint64_t(sqlite3_column_int64(st, 25));
                r.kernels.push_back(std::move(k));
              });
  db.each_row("SELECT start, end, deviceId, contextId, streamId, correlationId, bytes, copyKind, srcKind, dstKind, "
              "graphNodeId FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start",
              [&](sqlite3_stmt* st) {
                r.memcpys.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                     uint32_t(sqlite3_column_int64(st, 2)), uint32_t(sqlite3_column_int64(st, 3)),
                                     uint32_t(sqlite3_column_int64(st, 4)), uint32_t(sqlite3_column_int64(st, 5)),
                                     uint64_t(sqlite3_column_int64(st, 6)), sqlite3_column_int(st, 7),
                                     sqlite3_column_int(st, 8), sqlite3_column_int(st, 9),
                                     uint64_t(sqlite3_column_int64(st, 10))});
              });
  db.each_row("SELECT start, end, deviceId, contextId, streamId, correlationId, bytes, value, memKind, graphNodeId "
              "FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY start",
              [&](sqlite3_stmt* st) {
                r.memsets.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                     uint32_t(sqlite3_column_int64(st, 2)), uint32_t(sqlite3_column_int64(st, 3)),
                                     uint32_t(sqlite3_column_int64(st, 4)), uint32_t(sqlite3_column_int64(st, 5)),
                                     uint64_t(sqlite3_column_int64(st, 6)), uint32_t(sqlite3_column_int64(st, 7)),
                                     sqlite3_column_int(st, 8), uint64_t(sqlite3_column_int64(st, 9))});
              });
  const auto api_rows = [&](const std::string& table) {
    db.each_row("SELECT a.start, a.end, a.eventClass, a.globalTid, a.correlationId, s.value, a.returnValue "
                "FROM " + table + " a LEFT JOIN StringIds s ON s.id = a.nameId ORDER BY a.start",
                [&](sqlite3_stmt* st) {
                  r.api_calls.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                         sqlite3_column_int(st, 2) == kEventClassCudaDriver,
                                         uint32_t(sqlite3_column_int64(st, 3) & 0xFFFFFF),
                                         uint32_t(sqlite3_column_int64(st, 4)), text_column(st, 5),
                                         sqlite3_column_int64(st, 6)});
                });
  };
  api_rows("CUPTI_ACTIVITY_KIND_RUNTIME");  // schema 2 kept the driver's launches here too (eventClass 1)
  if (version >= 3) {
    api_rows("CUPTI_ACTIVITY_KIND_DRIVER");
    std::stable_sort(r.api_calls.begin(), r.api_calls.end(),
                     [](const ApiRecord& a, const ApiRecord& b) { return a.start_ns < b.start_ns; });
    db.each_row("SELECT start, end, deviceId, contextId, streamId, correlationId, graphId "
                "FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start",
                [&](sqlite3_stmt* st) {
                  r.graphs.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                      uint32_t(sqlite3_column_int64(st, 2)), uint32_t(sqlite3_column_int64(st, 3)),
                                      uint32_t(sqlite3_column_int64(st, 4)), uint32_t(sqlite3_column_int64(st, 5)),
                                      uint32_t(sqlite3_column_int64(st, 6))});
                });
  }
  // Ranges come back with their request number from the NVTX payload (int64Value; schema 2 had none).
  db.each_row("SELECT start, end, text, globalTid, int64Value FROM NVTX_EVENTS WHERE eventType = " +
                  std::to_string(kNvtxPushPopRange) + " ORDER BY start",
              [&](sqlite3_stmt* st) {
                HostRange h;
                h.start_ns = sqlite3_column_int64(st, 0);
                h.end_ns = sqlite3_column_int64(st, 1);
                h.name = text_column(st, 2);
                h.thread_id = uint32_t(sqlite3_column_int64(st, 3) & 0xFFFFFF);
                h.request_id = sqlite3_column_int64(st, 4);
                r.ranges.push_back({int(h.request_id), std::move(h)});
              });
  return r;
}

std::string chrome_trace_json(const SessionRecording& r) {
  nlohmann::json events = nlohmann::json::array();
  const std::map<std::string, int> tracks = {{"request", 1}, {"encode", 2}, {"prefill", 3}, {"decode", 3}};
  for (const auto& [name, tid] : tracks) {
    events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"name", "thread_name"},
                      {"args", {{"name", tid == 1 ? "requests" : tid == 2 ? "segment encodes" : "prefill / decode"}}}});
  }
  // Device spans (generate --trace-gpu): a second process "GPU" with kernels and copies on their own
  // tracks; the host ranges that enclose them stay with the engine's host tracks.
  const std::map<std::string, std::pair<int, int>> device_tracks = {
      {"kernel", {2, 1}}, {"graph", {2, 1}}, {"memcpy", {2, 2}}, {"memset", {2, 2}}, {"range", {1, 6}}};
  bool any_device = false, any_range = false;
  for (const RecordedSpan& s : r.spans) {
    int pid = 1, tid = 4;
    if (auto it = tracks.find(s.category); it != tracks.end()) {
      tid = it->second;
    } else if (auto dt = device_tracks.find(s.category); dt != device_tracks.end()) {
      std::tie(pid, tid) = dt->second;
      any_device = any_device || pid == 2;
      any_range = any_range || s.category == "range";
    }
    events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", s.name}, {"cat", s.category},
                      {"ts", s.start_ms * 1000.0}, {"dur", s.duration_ms * 1000.0}, {"args", {{"request", s.request}}}});
  }
  if (any_range || any_device) {
    events.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "engine (host)"}}}});
    events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 6}, {"name", "thread_name"}, {"args", {{"name", "NVTX ranges"}}}});
  }
  if (any_device) {
    events.push_back({{"ph", "M"}, {"pid", 2}, {"name", "process_name"}, {"args", {{"name", "GPU"}}}});
    events.push_back({{"ph", "M"}, {"pid", 2}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "kernels"}}}});
    events.push_back({{"ph", "M"}, {"pid", 2}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", "copies"}}}});
  }
  for (const RecordedBlockEvent& b : r.blocks) {
    if (b.event.action == BlockAction::Allocated || b.event.action == BlockAction::Released) continue;
    events.push_back({{"ph", "i"}, {"pid", 1}, {"tid", 5}, {"s", "t"}, {"name", to_string(b.event.action)},
                      {"ts", b.t_ms * 1000.0}, {"args", {{"block", b.event.block}, {"shift", b.event.shift}}}});
  }
  nlohmann::json root = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"metadata", r.metadata}};
  return root.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lazyscope
