// What compute-sanitizer sees on this machine, each case a few launches (run by
// scripts/device/sanitize_all.sh; not part of the product):
//   gemm-read M N K [zero]   a cuBLAS bf16 GEMM (the backend's call: out[M,N] = x[M,K] @ w[N,K]^T)
//                            whose every output element a plain kernel then reads; "zero" memsets
//                            the output first. Under initcheck: reports without "zero" and none
//                            with it mean initcheck does not see the GEMM's stores.
//   launches pdl|plain stream|graph
//                            two shared-memory kernels in turn, launched with or without
//                            programmatic dependent launch, on a stream or from a captured graph
//                            (what racecheck must handle in the decode step).
// Build: nvcc -arch=sm_90 -O2 -lineinfo -o sanitizer_probe scripts/device/sanitizer_probe.cu -lcublas
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                         \
  do {                                                                                      \
    cudaError_t status_ = (call);                                                           \
    if (status_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

// Sums each 16-byte piece of `data` (8 bf16) into sums[piece].
__global__ void read_pieces_kernel(const uint4* data, long long pieces, float* sums) {
  const long long i = blockIdx.x * 256ll + threadIdx.x;
  if (i >= pieces) return;
  const uint4 raw = data[i];
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  float total = 0.0f;
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(pairs[j]);
    total += f.x + f.y;
  }
  sums[i] = total;
}

int gemm_read(int m, int n, int k, bool zero) {
  if (m < 1 || n < 8 || k < 8 || n % 8 != 0 || k % 8 != 0) {
    std::fprintf(stderr, "gemm-read: M >= 1, N and K multiples of 8\n");
    return 2;
  }
  std::vector<__nv_bfloat16> x(std::size_t(m) * k), w(std::size_t(n) * k);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = __float2bfloat16(float(int(i % 7) - 3) / 8.0f);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = __float2bfloat16(float(int(i % 5) - 2) / 16.0f);
  __nv_bfloat16 *dx = nullptr, *dw = nullptr, *dout = nullptr;
  float* sums = nullptr;
  const long long pieces = (long long)m * n / 8;
  CHECK(cudaMalloc(&dx, x.size() * 2));
  CHECK(cudaMalloc(&dw, w.size() * 2));
  CHECK(cudaMalloc(&dout, std::size_t(m) * n * 2));
  CHECK(cudaMalloc(&sums, pieces * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  if (zero) CHECK(cudaMemset(dout, 0, std::size_t(m) * n * 2));
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, dw, CUDA_R_16BF, k, dx,
                                             CUDA_R_16BF, k, &beta, dout, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasGemmEx: status %d\n", int(status));
    return 1;
  }
  read_pieces_kernel<<<unsigned((pieces + 255) / 256), 256>>>(reinterpret_cast<const uint4*>(dout), pieces, sums);
  CHECK(cudaGetLastError());
  std::vector<float> host(pieces);
  CHECK(cudaMemcpy(host.data(), sums, pieces * sizeof(float), cudaMemcpyDeviceToHost));
  double total = 0.0;
  for (float v : host) total += v;
  std::printf("gemm-read %d x %d x %d%s: %lld pieces read, checksum %.4f\n", m, n, k, zero ? " (output zeroed first)" : "",
              pieces, total);
  cublasDestroy(handle);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dout);
  cudaFree(sums);
  return 0;
}

// Stages its input through shared memory (barrier-ordered, so racecheck must find nothing) and
// doubles it; waits for the kernel before it when launched programmatically.
__global__ void stage_double_kernel(const float* in, float* out, int n) {
  __shared__ float stage[256];
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
  const int i = blockIdx.x * 256 + threadIdx.x, mirrored = blockIdx.x * 256 + 255 - threadIdx.x;
  stage[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (mirrored < n) out[mirrored] = 2.0f * stage[255 - threadIdx.x];
}

void launch_stage(const float* in, float* out, int n, bool pdl, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&config, stage_double_kernel, in, out, n));
}

int launches(bool pdl, bool graph) {
  constexpr int n = 256 * 64, kSteps = 8;
  std::vector<float> host(n, 1.0f);
  float *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto enqueue = [&] {
    for (int s = 0; s < kSteps; ++s) launch_stage(s % 2 == 0 ? a : b, s % 2 == 0 ? b : a, n, pdl, stream);
  };
  int rounds = 1;
  if (graph) {
    cudaGraph_t captured = nullptr;
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CHECK(cudaStreamEndCapture(stream, &captured));
    CHECK(cudaGraphInstantiate(&exec, captured, 0));
    rounds = 2;
    for (int r = 0; r < rounds; ++r) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(captured);
  } else {
    enqueue();
    CHECK(cudaStreamSynchronize(stream));
  }
  CHECK(cudaMemcpy(host.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  // Each round doubles kSteps times.
  const float expect = float(1u << (kSteps * rounds));
  int wrong = 0;
  for (float v : host) wrong += v != expect;
  std::printf("launches %s %s: %d steps x %d rounds, %d of %d values wrong\n", pdl ? "pdl" : "plain",
              graph ? "graph" : "stream", kSteps, rounds, wrong, n);
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 5 && std::strcmp(argv[1], "gemm-read") == 0) {
    return gemm_read(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                     argc >= 6 && std::strcmp(argv[5], "zero") == 0);
  }
  if (argc == 4 && std::strcmp(argv[1], "launches") == 0) {
    return launches(std::strcmp(argv[2], "pdl") == 0, std::strcmp(argv[3], "graph") == 0);
  }
  std::fprintf(stderr, "usage: %s gemm-read M N K [zero] | launches pdl|plain stream|graph\n", argv[0]);
  return 2;
}
