// NCCL all-reduce and all-gather for the tensor-parallel ranks, or errors when built without NCCL.
#include "kernels/cuda/collectives.h"

#include <cstdlib>
#include <string>

#include "base/error.h"

#ifdef LAZYSCOPE_HAVE_NCCL
#include <nccl.h>
#endif

namespace lazyscope::cuda {

#ifdef LAZYSCOPE_HAVE_NCCL
namespace {

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw Error(std::string("NCCL ") + what + ": " + ncclGetErrorString(result));
}

}  // namespace

bool tensor_parallel_compiled() { return true; }

std::vector<ncclComm*> make_communicators(const std::vector<int>& devices) {
  // Never NVLink multicast (NVLS): the machines this runs on must keep it off.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  check(ncclCommInitAll(comms.data(), int(devices.size()), devices.data()), "ncclCommInitAll");
  return {comms.begin(), comms.end()};
}

void destroy_communicator(ncclComm* comm) {
  if (comm != nullptr) ncclCommDestroy(comm);
}

void all_reduce_sum(float* data, std::size_t count, ncclComm* comm, cudaStream_t stream) {
  check(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream), "all-reduce");
}

void all_gather(const float* shard, float* gathered, std::size_t count, ncclComm* comm,
                cudaStream_t stream) {
  check(ncclAllGather(shard, gathered, count, ncclFloat32, comm, stream), "all-gather");
}

#else

namespace {

[[noreturn]] void compiled_out() {
  throw Error(
      "tensor parallelism is compiled out of this build (NCCL was not found when it was "
      "configured)");
}

}  // namespace

bool tensor_parallel_compiled() { return false; }
std::vector<ncclComm*> make_communicators(const std::vector<int>&) { compiled_out(); }
void destroy_communicator(ncclComm*) {}
void all_reduce_sum(float*, std::size_t, ncclComm*, cudaStream_t) { compiled_out(); }
void all_gather(const float*, float*, std::size_t, ncclComm*, cudaStream_t) { compiled_out(); }

#endif

}  // namespace lazyscope::cuda
