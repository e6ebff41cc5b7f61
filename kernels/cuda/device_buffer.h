#pragma once
// Owning device (cudaMalloc) and pinned host (cudaMallocHost) allocations, grown on demand;
// C++17-clean.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/check.h"

namespace lazyscope::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) { resize(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  // Reallocates (contents lost) only when more bytes are needed.
  void reserve(std::size_t bytes) {
    if (bytes > bytes_) resize(bytes);
  }
  void resize(std::size_t bytes) {
    if (data_ != nullptr) LAZYSCOPE_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    bytes_ = 0;
    if (bytes > 0) LAZYSCOPE_CUDA_CHECK(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory: async copies from/to it do not stage through a driver buffer, and
// graph memcpy nodes may target it.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  // Reallocates (contents lost) only when more bytes are needed; true when the address changed.
  bool reserve(std::size_t bytes) {
    if (bytes <= bytes_) return false;
    if (data_ != nullptr) LAZYSCOPE_CUDA_CHECK(cudaFreeHost(data_));
    data_ = nullptr;
    bytes_ = 0;
    LAZYSCOPE_CUDA_CHECK(cudaMallocHost(&data_, bytes));
    bytes_ = bytes;
    return true;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace lazyscope::cuda
