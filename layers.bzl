"""Who may depend on each layer: the layer table of docs/ARCHITECTURE.md as
Bazel visibility lists. Every package sets its default visibility from here;
tests/layering_check.sh proves the forbidden edges stay closed.

A layer is visible to itself, to the layers above it that the table lets
depend on it, and to the test-side folders (tools/, bench/, tests/). daemon/
and clients/ appear in none of the lists below kernels/: the supervisor never
sees kernels, memory, the model or CUDA.
"""

_TEST_SIDE = [
    "//bench:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

# The GGUF parser, mapping and tensor table (not loader:ggml_type, which
# kernels/ may also see).
LOADER_USERS = [
    "//daemon:__subpackages__",
    "//fuzz:__subpackages__",
    "//loader:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The ggml type table: the one part of loader/ kernels/ may know.
GGML_TYPE_USERS = LOADER_USERS + ["//kernels:__subpackages__"]

# CPU and CUDA kernels (kernels/ and kernels/cuda/) and the CUDA runtime.
KERNELS_USERS = [
    "//kernels:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# Residency: dense placement, expert slot cache, fit planning, host probes.
MEMORY_USERS = [
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# Architectures, tokenizer, sampler, engine.
MODEL_USERS = [
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The worker's libraries (not worker:channel, which daemon/ shares).
WORKER_USERS = [
    "//tests:__subpackages__",
    "//worker:__subpackages__",
]

# The message framing shared by the supervisor and the worker.
CHANNEL_USERS = WORKER_USERS + ["//daemon:__subpackages__"]

# Tools' libraries, for their own binaries and the end-to-end tests.
TOOLS_USERS = [
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

# The shipped binaries (sluiced, sluice-worker, sluicectl): built and run from
# the command line, depended on only as data by the end-to-end tests.
BINARY_USERS = ["//tests:__subpackages__"]
