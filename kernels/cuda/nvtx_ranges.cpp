// NVTX ranges of kernels/nvtx_ranges.h. Compiled into the kernels library in every build; the nvtx3
// header (CUDA toolkit) is only seen here, and only when configure found it.
#include "kernels/nvtx_ranges.h"

#ifdef LAZYSCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace lazyscope {

#ifdef LAZYSCOPE_HAVE_NVTX
namespace {

nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA(kNvtxDomain);
  return handle;
}

}  // namespace

void nvtx_push(const char* name, int64_t payload) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  if (payload != 0) {
    attributes.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    attributes.payload.llValue = payload;
  }
  nvtxDomainRangePushEx(domain(), &attributes);
}

void nvtx_pop() { nvtxDomainRangePop(domain()); }

bool nvtx_compiled() { return true; }
#else
void nvtx_push(const char*, int64_t) {}
void nvtx_pop() {}
bool nvtx_compiled() { return false; }
#endif

}  // namespace lazyscope
