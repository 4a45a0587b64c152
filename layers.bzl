"""Who may depend on each layer: the layer table of docs/ARCHITECTURE.md as
Bazel visibility lists. Every package sets its default visibility from here;
tests/layering_check.sh proves the forbidden edges stay closed.

A layer is visible to itself, to the layers above it that the table lets
depend on it, and to the test-side folders (tools/, bench/, tests/, fuzz/).
daemon/ and clients/ appear in none of the lists of kernels/, memory/ or
model/: the supervisor never sees kernels, memory, the model or CUDA; it
talks to the worker through wire/ (WIRE_USERS), a layer both depend on.
clients/ sees no part of loader/ either: `sluicectl plan` goes through
planning/ (PLANNING_USERS), a room above memory/ and loader/ whose interface
names none of their types.
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
# the worker, the daemon, planning/, clients/ and the test side. Not loader/,
# kernels/, sched/ or wire/, which take no settings.
CONFIG_USERS = [
    "//clients:__subpackages__",
    "//config:__subpackages__",
    "//daemon:__subpackages__",
    "//memory:__subpackages__",
    "//model:__subpackages__",
    "//planning:__subpackages__",
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
    "//planning:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

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
    "//planning:__subpackages__",
    "//worker:__subpackages__",
] + _TEST_SIDE

# The offline plan of a model file (planning/): the worker's fit planner run
# on a GGUF header, for `sluicectl plan`. The one room below wire/ that
# clients/ sees besides proto/ and config/; its interface names no type of
# loader/ or memory/, and tests/layering_check.sh proves clients/ links nothing
# of kernels/, model/ or the CUDA runtime through it.
PLANNING_USERS = [
    "//clients:__subpackages__",
    "//planning:__subpackages__",
] + _TEST_SIDE

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
