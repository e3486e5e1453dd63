#pragma once
// loom's resource limits in one place (docs/limits.md lists them with their reasons). Each
// bounds what one input can make loom allocate or compute, so that no file or flag can make
// it run out of memory, loop for hours or overflow an integer: exceeding one is bad input
// (exit 2) with a message naming the limit and how to stay inside it. They are compile-time
// constants; raising one means editing this file and rebuilding. The model's own size
// bounds (MAX_MODEL_*) sit with the model spec in models/model_spec.hpp.
#include <cstdint>

namespace loom {

/// Largest configuration file loom reads (model, HF config, plan, cluster, GPU, DeepSpeed,
/// runs), in bytes: real ones are a few KB; parsing costs up to ~20x the file size in memory.
inline constexpr std::int64_t MAX_CONFIG_FILE_BYTES = std::int64_t{16} << 20;

/// Largest measurement file loom reads (nccl-tests logs, PyTorch profiler traces,
/// calibration profiles), in bytes, before and after gzip decompression.
inline constexpr std::int64_t MAX_MEASUREMENT_FILE_BYTES = std::int64_t{512} << 20;

/// Deepest nesting of arrays and objects in any JSON input; real inputs nest under 10.
inline constexpr int MAX_JSON_DEPTH = 128;

/// Most values (objects, arrays, strings, numbers, literals) in one JSON input. Parsed, each
/// costs 50 to 120 bytes whatever its text ("{}," is 3 bytes), so this bounds a parse near
/// 2 GB; a real profiler trace holds one value per ~20 bytes, so it admits ~300 MB traces.
inline constexpr std::int64_t MAX_JSON_VALUES = std::int64_t{1} << 24;

/// Most nodes in one cluster.
inline constexpr int MAX_CLUSTER_NODES = 65536;

/// Most GPUs in one cluster (8 GPUs x 65,536 nodes).
inline constexpr int MAX_CLUSTER_GPUS = 1 << 19;

/// Most vertices of a cluster graph: GPUs, switches, NICs, CPUs, leaves and spines (the
/// largest preset, dgx-h100 with 65,536 nodes, has 1.77M).
inline constexpr std::int64_t MAX_TOPOLOGY_VERTICES = std::int64_t{1} << 21;

/// Most links (duplex edges) of a cluster graph (dgx-h100 with 65,536 nodes has 2.7M).
inline constexpr std::int64_t MAX_TOPOLOGY_LINKS = std::int64_t{1} << 22;

/// Most micro-batches in one training step (gbs / (mbs x dp)); real plans use up to a few
/// thousand.
inline constexpr std::int64_t MAX_MICRO_BATCHES = std::int64_t{1} << 16;

/// Most tokens in one micro-batch (mbs x seq); real ones hold up to about a million.
inline constexpr std::int64_t MAX_MICRO_BATCH_TOKENS = std::int64_t{1} << 30;

/// Most tasks in one simulated task graph (compute kernels, collectives, transfers): about
/// 330 bytes each, so up to ~11 GB (gpt-1t on 16,384 GPUs with --full needs 8.8M). A step is
/// checked against it before it is built, by a lower bound on its tasks
/// (strategies/step/task_budget.hpp), and again task by task.
inline constexpr std::int64_t MAX_ENGINE_TASKS = std::int64_t{1} << 25;

/// Most ranks whose pairs an all-to-all enumerates: a group costed pair by pair (its nodes
/// not alike: sim/collective_direct.cpp folds its n(n-1) transfers into about n^2/8 distinct
/// flows, so time and memory grow as n^2: `simulate --ep 4096` so takes about 52 s and
/// 0.65 GB), or one node's share of a group costed by flow class (its classes are the pairs
/// of a node's ranks, sim/collective_classes.cpp; the group itself is then unbounded).
inline constexpr int MAX_ALL_TO_ALL_RANKS = 4096;

/// Smallest data-parallel gradient bucket, in bytes: below it a bucket is smaller than
/// any parameter tensor a framework buckets, and the bucket count grows without bound.
inline constexpr std::int64_t MIN_DP_BUCKET_BYTES = std::int64_t{64} << 10;

/// Most tokens `loom plan --tokens` trains on: 25x the largest published runs (~4e13);
/// GPU-hours and energy of any plan on them stay far inside the numbers loom prints.
inline constexpr double MAX_TRAINING_TOKENS = 1e15;

/// Longest piece of an input value that an error message echoes, in bytes.
inline constexpr int MAX_ECHO_BYTES = 80;

/// Longest name (of a model, cluster, host or vertex) an input file may give, in bytes:
/// names are printed in every table and header.
inline constexpr int MAX_NAME_BYTES = 256;

/// Longest error message, in bytes: a backstop behind MAX_ECHO_BYTES.
inline constexpr int MAX_MESSAGE_BYTES = 2048;

}  // namespace loom
