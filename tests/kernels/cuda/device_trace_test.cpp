// The CUPTI device tracer: kernel names read well, and a real forward step on the GPU shows up
// as kernel spans inside the host range that launched them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "gpu_test_util.h"
#include "kernels/cuda/cupti_tracer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_trace.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope::cuda {
namespace {

TEST(DeviceTraceNames, DemangledKernelNamesAreShort) {
  // void lazyscope::cuda::(anonymous namespace)::decode_kernel<128, 4, true>(lazyscope::cuda::DecodeParams)
  EXPECT_EQ(short_kernel_name("_ZN9lazyscope4cuda12_GLOBAL__N_113decode_kernelILi128ELi4ELb1EEEvNS0_12DecodeParamsE"),
            "decode_kernel<128, 4, true>");
  EXPECT_EQ(short_kernel_name("_Z6kernelPfi"), "kernel");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32"), "sm90_xmma_gemm_bf16bf16_bf16f32");
  EXPECT_EQ(short_kernel_name(nullptr), "kernel");
}

TEST(DeviceTrace, ForwardStepKernelsLandInsideTheirRange) {
  LAZYSCOPE_REQUIRE_GPU();
  std::string why;
  std::unique_ptr<DeviceTracer> tracer = make_device_tracer(&why);
  ASSERT_NE(tracer, nullptr) << why;
  std::string second_why;
  EXPECT_EQ(make_device_tracer(&second_why), nullptr);  // one at a time
  EXPECT_FALSE(second_why.empty());

  CudaBackend backend;
  backend.load_synthetic(synthetic_shape("tiny"), 3);
  backend.allocate_pool(8, 16);
  backend.synchronize();
  (void)tracer->drain();  // the weight fills and pool memsets, launched before the range
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5}, positions{0, 1, 2, 3, 4}, slots{0, 1, 2, 3, 4};
  const std::vector<BlockRef> table{BlockRef{0, 0, 5}};
  ForwardStep step{tokens, positions, slots, table, false, true};
  std::vector<float> logits;
  {
    DeviceRange range(tracer.get(), "prefill 5 tokens");
    backend.forward(step, &logits);
  }
  backend.synchronize();
  const std::vector<DeviceSpan> spans = tracer->drain();
  auto range = std::find_if(spans.begin(), spans.end(), [](const DeviceSpan& s) { return s.kind == "range"; });
  ASSERT_NE(range, spans.end());
  EXPECT_EQ(range->name, "prefill 5 tokens");
  int kernels = 0;
  bool attention = false, copy_back = false;
  for (const DeviceSpan& s : spans) {
    EXPECT_LE(s.start_ns, s.end_ns) << s.name;
    if (s.kind == "kernel") {
      ++kernels;
      EXPECT_GE(s.start_ns, range->start_ns) << s.name << " ran before it was launched";
      attention = attention || s.name.find("prefill_kernel") != std::string::npos;
    }
    copy_back = copy_back || (s.kind == "memcpy" && s.name.find("DtoH") != std::string::npos);
  }
  EXPECT_GE(kernels, 2 + 4 * synthetic_shape("tiny").num_layers);
  EXPECT_TRUE(attention);
  EXPECT_TRUE(copy_back);
  EXPECT_TRUE(tracer->drain().empty());  // drained once
  tracer.reset();
  EXPECT_NE(make_device_tracer(&why), nullptr) << why;  // free again
}

}  // namespace
}  // namespace lazyscope::cuda
