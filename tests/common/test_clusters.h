// Small cluster descriptions with round figures, for tests that time ops by hand: one CPU core and one GPU.
#pragma once

namespace reprise::test {

inline const char* kCpuCluster = R"Y(name: test-cpu
device:
  kind: cpu
  peak_flops:
    vector:
      fp32: 100e9
  memory_bandwidth: 20e9
  op_overhead: 1e-6
topology:
  devices_per_node: 1
  nodes: 1
  levels:
    - name: shm
      span: 1
      bandwidth: 5e9
      latency: 1e-6
)Y";

inline const char* kGpuCluster = R"Y(name: test-gpu
device:
  kind: gpu
  peak_flops:
    matrix:
      fp32: 100e12
  memory_bandwidth: 1e12
  op_overhead: 1e-6
  launch_overhead: 1e-6
topology:
  devices_per_node: 1
  nodes: 1
  levels:
    - name: nvlink
      span: 1
      bandwidth: 100e9
      latency: 1e-6
)Y";

}  // namespace reprise::test
