#pragma once
// The NCCL collectives tensor parallelism needs, behind plain signatures (only collectives.cpp
// includes nccl.h). Built without NCCL, tensor_parallel_compiled() is false and every other
// function throws Error saying so.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

struct ncclComm;

namespace lazyscope::cuda {

bool tensor_parallel_compiled();
// One communicator per device of `devices` (rank i on devices[i]), made together.
std::vector<ncclComm*> make_communicators(const std::vector<int>& devices);
void destroy_communicator(ncclComm* comm);
// In place: data[i] = the sum over the ranks of data[i] (fp32).
void all_reduce_sum(float* data, std::size_t count, ncclComm* comm, cudaStream_t stream);
// gathered[rank * count + i] = every rank's shard[i] (fp32).
void all_gather(const float* shard, float* gathered, std::size_t count, ncclComm* comm,
                cudaStream_t stream);

}  // namespace lazyscope::cuda
