"""cuda_library: .cu files compiled by /usr/local/cuda/bin/nvcc.

Device code is built for sm_90a (H100/H200 with the arch-specific features)
plus PTX for compute_80 so the driver can JIT it on other parts. Headers listed
in `hdrs` must be plain C++ (no CUDA types): callers never see CUDA.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = " ".join([
    "-std=c++20",
    "-O3",
    "-Xcompiler=-fPIC",
    "-I.",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_80,code=compute_80",
])

# The runtime API headers for .cc files (runtime_api = True). Selected so that
# --config=nocuda never fetches @cuda_headers.
_RUNTIME_HEADERS = select({
    "//third_party/cuda:cuda_on": ["@cuda_headers//:headers"],
    "//conditions:default": [],
})

CUDA_ONLY = select({
    "//third_party/cuda:cuda_on": [],
    "//conditions:default": ["//third_party/cuda:never"],
})

def cuda_library(name, cu_srcs = [], srcs = [], hdrs = [], cu_hdrs = [], deps = [], visibility = None, testonly = False, runtime_api = False):
    """A library of .cu and .cc files.

    Args:
      name: target name.
      cu_srcs: .cu files, compiled by nvcc.
      srcs: .cc files compiled by the C++ compiler; they must not include CUDA headers.
      hdrs: public plain-C++ headers.
      cu_hdrs: private headers the .cu files include.
      deps: C++ dependencies.
      visibility: passed through.
      testonly: passed through.
      runtime_api: the .cc files may include <cuda_runtime_api.h> (the C API
        of the runtime: no kernels, no device code); their public headers stay
        plain C++.
    """
    objs = []
    for src in cu_srcs:
        obj = "_nvcc/" + name + "/" + src[:-len(".cu")] + ".o"
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = NVCC + " " + NVCC_FLAGS + " -c $(location " + src + ") -o $@",
            target_compatible_with = CUDA_ONLY,
            testonly = testonly,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = srcs + objs + cu_hdrs,
        hdrs = hdrs,
        deps = deps + ["//third_party/cuda:runtime"] + (_RUNTIME_HEADERS if runtime_api else []),
        target_compatible_with = CUDA_ONLY,
        visibility = visibility,
        testonly = testonly,
    )
