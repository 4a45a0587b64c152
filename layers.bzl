"""Who may depend on each layer: the layer table of docs/ARCHITECTURE.md as
Bazel visibility lists. Every package sets its default visibility from here;
tests/layering_check.sh proves the forbidden edges stay closed.

A layer is visible to itself, to the layers above it that the table lets
depend on it, and to the test-side folders (tools/, bench/, tests/, fuzz/).
daemon/ and clients/ appear in none of the lists below kernels/: the
supervisor never sees kernels, memory, the model or CUDA; it talks to the
worker through wire/ (WIRE_USERS), a layer both depend on. One narrow exception: clients/ sees
the fit planner and the header-reading part of loader/ (FIT_PLANNER_USERS,
LOADER_READER_USERS) for `sluicectl plan`.
"""

# Test-side folders: code that no shipped binary links. fuzz/ is one: its
# fuzz targets are tests that feed hostile input to whichever layer parses it
# (the GGUF parser, the frame decoder, the tokenizer), wherever it lives.
_TEST_SIDE = [
    "//bench:__subpackages__",
    "//fuzz:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

# Shared settings (config/): the expert configuration, byte sizes, renamed
# flags. Abseil only; every layer that takes settings may use it: memory/
# (the planner's request, the miss policy's enum), the model (EngineOptions),
# the worker, the daemon, clients/ and the test side. Not loader/, kernels/,
# sched/ or wire/, which take no settings.
CONFIG_USERS = [
    "//clients:__subpackages__",
    "//config:__subpackages__",
    "//daemon:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# config:expert_config_proto (the worker's Hello): the two ends of the wire.
CONFIG_PROTO_USERS = [
    "//config:__subpackages__",
    "//daemon:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The ggml type table (format/): format data both the reader and the
# decoders use, below loader/ and kernels/. Visible to them and to every layer
# that sees either (a tensor's type is part of loader/'s and kernels/' API).
FORMAT_USERS = [
    "//daemon:__subpackages__",
    "//format:__subpackages__",
    "//kernels:__subpackages__",
    "//loader:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The GGUF parser, mapping and tensor table.
LOADER_USERS = [
    "//daemon:__subpackages__",
    "//loader:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The parts of loader/ that read a model's header and tensor table
# (gguf_file, tensor_table, model_files): clients/ sees them too,
# because `sluicectl plan` plans a model from its GGUF header without a
# daemon (see FIT_PLANNER_USERS). They map files read-only and depend on
# Abseil only: no kernels, no model, no CUDA.
LOADER_READER_USERS = LOADER_USERS + ["//clients:__subpackages__"]

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

# The fit planner and host probe (memory:fit_planner, memory:host_probe):
# plain C++ over byte figures, with no device code. clients/ may use them so
# that `sluicectl plan MODEL` prints the plan the worker would make, without
# loading the model. Everything else in memory/ (placement, the CUDA
# platform, the slot cache) stays invisible to clients/.
FIT_PLANNER_USERS = MEMORY_USERS + ["//clients:__subpackages__"]

# Architectures, tokenizer, sampler, engine.
MODEL_USERS = [
    "//model:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The continuous-batching scheduler and its KV block and state-slot
# bookkeeping (sched/): plain C++ over token counts, no device code, no
# threads. The worker runs it; the test side simulates with it. Never the
# supervisor (its request queue is its own) and nothing below the worker:
# the model reads block tables as plain spans.
SCHED_USERS = [
    "//sched:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The supervisor<->worker protocol on the socket (wire/: framing, the writer
# thread). daemon/ and worker/ are peers over it and both depend on it. It
# depends on Abseil and protobuf only.
WIRE_USERS = [
    "//daemon:__subpackages__",
    "//wire:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The worker's libraries.
WORKER_USERS = [
    "//tests:__subpackages__",
    "//worker:__subpackages__",
]

# Tools' libraries, for their own binaries and the end-to-end tests.
TOOLS_USERS = [
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

# The shipped binaries (sluiced, sluice-worker, sluicectl): built and run from
# the command line, depended on only as data by the end-to-end tests.
BINARY_USERS = ["//tests:__subpackages__"]
