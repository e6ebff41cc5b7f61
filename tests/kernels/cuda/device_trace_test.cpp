// The CUPTI device tracer: kernel names read well; a real forward step on the GPU shows up as kernel
// records (launch configuration, registers, a launch API record by correlation id) inside the host
// range that launched them; graph-replayed decode kernels carry their graph launch's correlation id;
// with graph-level records on (the default), the first DeviceTraceOptions::kernel_steps decode steps
// run their kernels one by one with a record each and every later graph launch is one graph record.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

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
  DeviceTraceOptions every_kernel;
  every_kernel.kernel_steps = -1;  // graph replays recorded node by node
  std::unique_ptr<DeviceTracer> tracer = make_device_tracer(every_kernel, &why);
  ASSERT_NE(tracer, nullptr) << why;
  std::string second_why;
  EXPECT_EQ(make_device_tracer(&second_why), nullptr);  // one at a time
  EXPECT_FALSE(second_why.empty());

  CudaBackend backend;
  backend.load_synthetic(synthetic_shape("tiny"), 3);
  backend.allocate_pool(8, 16);
  backend.synchronize();
  const DeviceActivity setup = tracer->drain();  // the weight fills and pool memsets, launched before the range
  ASSERT_EQ(setup.gpus.size(), 1u);
  EXPECT_GT(setup.gpus[0].sm_count, 0);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5}, positions{0, 1, 2, 3, 4}, slots{0, 1, 2, 3, 4};
  const std::vector<BlockRef> table{BlockRef{0, 0, 5}};
  ForwardStep step{tokens, positions, slots, table, false, true};
  std::vector<float> logits;
  {
    DeviceRange range(tracer.get(), "prefill 5 tokens");
    backend.forward(step, &logits);
  }
  backend.synchronize();
  const DeviceActivity a = tracer->drain();
  EXPECT_TRUE(a.device_traced);
  EXPECT_EQ(a.dropped_records, 0u);
  ASSERT_EQ(a.ranges.size(), 1u);
  EXPECT_EQ(a.ranges[0].name, "prefill 5 tokens");
  std::set<uint32_t> api_correlations;
  for (const ApiRecord& c : a.api_calls) api_correlations.insert(c.correlation_id);
  bool attention = false;
  for (const KernelRecord& k : a.kernels) {
    EXPECT_LE(k.start_ns, k.end_ns) << k.mangled_name;
    EXPECT_GE(k.start_ns, a.ranges[0].start_ns) << k.mangled_name << " ran before it was launched";
    EXPECT_GT(k.block[0], 0) << k.mangled_name;
    EXPECT_GT(k.grid[0], 0) << k.mangled_name;
    EXPECT_GT(k.registers_per_thread, 0) << k.mangled_name;
    EXPECT_TRUE(api_correlations.count(k.correlation_id)) << k.mangled_name << " has no launch record";
    attention = attention || short_kernel_name(k.mangled_name.c_str()).find("prefill_kernel") != std::string::npos;
  }
  EXPECT_GE(int(a.kernels.size()), 2 + 4 * synthetic_shape("tiny").num_layers);
  EXPECT_TRUE(attention);
  EXPECT_TRUE(std::any_of(a.memcpys.begin(), a.memcpys.end(), [](const MemcpyRecord& m) { return m.copy_kind == 2; }));
  EXPECT_TRUE(tracer->drain().empty());  // drained once

  // Decode steps replay a CUDA graph: its kernels carry the graph launch's correlation id and a node id.
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> one{6}, pos{5 + i}, slot{5 + i};
    const std::vector<BlockRef> t{BlockRef{0, 0, 6 + i}};
    ForwardStep decode{one, pos, slot, t, false, true};
    backend.forward(decode, &logits);
  }
  backend.synchronize();
  const DeviceActivity d = tracer->drain();
  std::set<uint32_t> graph_launches;
  for (const ApiRecord& c : d.api_calls) {
    if (c.name.rfind("cudaGraphLaunch", 0) == 0) graph_launches.insert(c.correlation_id);
  }
  int graph_kernels = 0;
  for (const KernelRecord& k : d.kernels) {
    if (k.graph_node_id == 0) continue;
    ++graph_kernels;
    EXPECT_TRUE(graph_launches.count(k.correlation_id)) << k.mangled_name;
  }
  EXPECT_FALSE(graph_launches.empty());
  EXPECT_GT(graph_kernels, 0);
  tracer.reset();
  EXPECT_NE(make_device_tracer(&why), nullptr) << why;  // free again
}

TEST(DeviceTrace, DecodeStepsPastTheKernelStepsAreOneGraphRecordPerLaunch) {
  LAZYSCOPE_REQUIRE_GPU();
  DeviceTraceOptions options;
  options.kernel_steps = 1;
  std::string why;
  std::unique_ptr<DeviceTracer> tracer = make_device_tracer(options, &why);
  ASSERT_NE(tracer, nullptr) << why;
  CudaBackend backend;
  backend.load_synthetic(synthetic_shape("tiny"), 3);
  backend.allocate_pool(8, 16);
  std::vector<float> logits;
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5}, positions{0, 1, 2, 3, 4}, slots{0, 1, 2, 3, 4};
  const std::vector<BlockRef> table{BlockRef{0, 0, 5}};
  backend.forward(ForwardStep{tokens, positions, slots, table, false, true}, &logits);
  backend.synchronize();
  const DeviceActivity prefill = tracer->drain();
  EXPECT_FALSE(prefill.kernels.empty());  // launched outside graphs: kernel records
  EXPECT_TRUE(prefill.graphs.empty());
  // One request's decode steps, as the session runs them.
  for (int step = 1; step <= 4; ++step) {
    if (tracer->decode_step(step)) backend.next_decode_without_graph();
    const std::vector<int32_t> one{6}, pos{4 + step}, slot{4 + step};
    const std::vector<BlockRef> t{BlockRef{0, 0, 5 + step}};
    backend.forward(ForwardStep{one, pos, slot, t, false, true}, &logits);
  }
  backend.synchronize();
  const DeviceActivity a = tracer->drain();
  EXPECT_EQ(a.kernel_detail_steps, 1);
  EXPECT_EQ(a.graph_level_steps, 3);
  std::set<uint32_t> graph_launches, kernel_launches;
  for (const ApiRecord& c : a.api_calls) {
    if (c.name.rfind("cudaGraphLaunch", 0) == 0) graph_launches.insert(c.correlation_id);
  }
  EXPECT_EQ(graph_launches.size(), 3u);  // steps 2-4 (step 2 captured the graph)
  for (const KernelRecord& k : a.kernels) {
    EXPECT_EQ(k.graph_node_id, 0u) << k.mangled_name << ": a graph node's kernel record";
    EXPECT_FALSE(graph_launches.count(k.correlation_id));
    kernel_launches.insert(k.correlation_id);
  }
  EXPECT_GE(int(a.kernels.size()), 2 + 4 * synthetic_shape("tiny").num_layers);  // step 1, one by one
  ASSERT_EQ(a.graphs.size(), 3u);
  for (const GraphRecord& g : a.graphs) {
    EXPECT_TRUE(graph_launches.count(g.correlation_id)) << g.correlation_id;
    EXPECT_LT(g.start_ns, g.end_ns);
  }
  EXPECT_EQ(a.dropped_records, 0u);
}

}  // namespace
}  // namespace lazyscope::cuda
