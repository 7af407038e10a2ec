// Instantiates GroupedGemmKernel for every CTA shape of builtin_kernels.h, one transform and
// one source of activation rows (ActivationRows, kernel_launch.h).
#pragma once

#include <utility>

#include "kernels/builtin_kernels.h"
#include "kernels/dependent_launch.cuh"
#include "kernels/grouped_gemm_kernel.cuh"
#include "kernels/kernel_instantiations.h"

namespace mxdiff {

template <Transform kTransform, ActivationRows kRows, int kShape>
cudaError_t LaunchShape(const KernelLaunch& launch) {
  constexpr CtaShape shape = kCtaShapes[kShape];
  const long long ctas = (long long)launch.m_tiles * launch.n_tiles * launch.splits;
  return LaunchKernel(GroupedGemmKernel<shape.m, shape.n, shape.k, kTransform, kRows>, dim3(unsigned(ctas)),
                      dim3(kCtaThreads), 0, static_cast<cudaStream_t>(launch.stream), launch.dependent, launch);
}

template <Transform kTransform, ActivationRows kRows, int... kShapes>
cudaError_t LaunchAnyShape(const KernelLaunch& launch, std::integer_sequence<int, kShapes...>) {
  using Launcher = cudaError_t (*)(const KernelLaunch&);
  constexpr Launcher kLaunchers[] = {&LaunchShape<kTransform, kRows, kShapes>...};
  if (launch.shape_index < 0 || launch.shape_index >= int(sizeof...(kShapes))) return cudaErrorInvalidValue;
  return kLaunchers[launch.shape_index](launch);
}

template <Transform kTransform, ActivationRows kRows>
cudaError_t LaunchTransform(const KernelLaunch& launch) {
  return LaunchAnyShape<kTransform, kRows>(launch, std::make_integer_sequence<int, kCtaShapeCount>());
}

}  // namespace mxdiff
