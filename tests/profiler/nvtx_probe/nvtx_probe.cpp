// A minimal NVTX injection library (the mechanism Nsight Systems uses): loaded by nvtx3 from
// NVTX_INJECTION64_PATH at a process's first NVTX call, it writes every domain creation, push and
// pop (with its int64 payload, when it has one) to the file named by LAZYSCOPE_NVTX_LOG. Tests use it
// to see what a tool sees.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

struct Domain {
  std::string name;
};

std::mutex g_mutex;
FILE* g_log = nullptr;

void log_line(const std::string& line) {
  std::lock_guard lock(g_mutex);
  if (g_log == nullptr) return;
  std::fprintf(g_log, "%s\n", line.c_str());
  std::fflush(g_log);
}

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain != nullptr ? reinterpret_cast<Domain*>(domain)->name : "(default)";
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  log_line(std::string("create\t") + (name != nullptr ? name : ""));
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name != nullptr ? name : ""});
}

int NVTX_API domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  const char* text = attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII ? attributes->message.ascii : "";
  std::string payload;
  if (attributes != nullptr && attributes->payloadType == NVTX_PAYLOAD_TYPE_INT64) {
    payload = "\t" + std::to_string(attributes->payload.llValue);
  }
  log_line("push\t" + domain_name(domain) + "\t" + text + payload);
  return 0;
}

int NVTX_API domain_pop(nvtxDomainHandle_t domain) {
  log_line("pop\t" + domain_name(domain));
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const char* path = std::getenv("LAZYSCOPE_NVTX_LOG");
  if (path == nullptr) return 0;
  g_log = std::fopen(path, "w");
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (g_log == nullptr || callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || size < NVTX_CBID_CORE2_DomainCreateA) {
    return 0;
  }
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&domain_create);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&domain_push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&domain_pop);
  log_line("attached");
  return 1;
}
