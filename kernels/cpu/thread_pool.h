// Forwarding header: ThreadPool lives in base/thread_pool.h (issue 24). Only
// model/cuda still includes this path and names kernels::ThreadPool; once it
// includes base/thread_pool.h and says ThreadPool, delete this header and
// //kernels:cpu_thread_pool.
#ifndef SLUICE_KERNELS_CPU_THREAD_POOL_H_
#define SLUICE_KERNELS_CPU_THREAD_POOL_H_

#include "base/thread_pool.h"

namespace sluice::kernels {
using ::sluice::ThreadPool;
}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_THREAD_POOL_H_
