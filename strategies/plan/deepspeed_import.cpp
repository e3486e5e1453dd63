#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "strategies/plan/deepspeed_auto.hpp"
#include "strategies/plan/plan_import.hpp"

namespace loom::strategies {
namespace {

std::string fmt_number(double v) {
  // Compared as doubles before any conversion: an out-of-range double to int is undefined.
  if (std::abs(v) < 0x1p53 && std::floor(v) == v)
    return std::to_string(static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

// A DeepSpeed bucket size in 16-bit elements (JSON numbers such as 5e8): whole, at least
// loom's smallest bucket (MIN_DP_BUCKET_BYTES) and at most 2^40.
std::int64_t bucket_elements(ObjectReader& z, std::string_view key) {
  const double elems = z.get_number(key);
  constexpr double min = static_cast<double>(MIN_DP_BUCKET_BYTES / 2);
  if (!(elems >= min && elems <= 0x1p40) || std::floor(elems) != elems) {
    z.fail(key, fmt_number(elems),
           fmt::format("a whole element count from {} (64 KiB of 16-bit values, loom's smallest "
                       "bucket, docs/limits.md) to 2^40",
                       min));
  }
  return static_cast<std::int64_t>(elems);
}

// Whether `key` of `r` holds "auto" (a Hugging Face Trainer placeholder, deepspeed_auto.cpp):
// such a key sets nothing here; loom's own value stands in for it.
bool is_auto(ObjectReader& r, std::string_view key) {
  if (!r.has(key)) return false;
  const auto& v = r.raw(key);
  return v.is_string() && v.get_ref<const std::string&>() == "auto";
}

// The fields a top-level DeepSpeed key sets directly (the table's deepspeed column).
void read_batch_keys(ObjectReader& r, PlanInput& f) {
  for (const char* key : {"mbs", "grad_accum", "gbs"}) {
    const std::string_view pointer = plan_field(key).deepspeed;
    const std::string ds_key(pointer.substr(1));
    if (r.has(ds_key) && !is_auto(r, ds_key)) {
      f.set(key, r.get_positive_int(ds_key), file_source(r.file(), r.pointer_of(ds_key), ds_key));
    }
  }
}

// zero_optimization.offload_optimizer and offload_param (deepspeed/runtime/zero/
// offload_config.py): "cpu" sets the plan's offload; "nvme" (ZeRO-Infinity's NVMe swap) is
// refused by name; pin_memory (one value for both) is the plan's offload_pin_memory. DeepSpeed
// reads offload_optimizer in its ZeRO optimizers only (stages 1-3) and offload_param under
// stage 3 only: below those stages the section sets nothing, as for the other stage keys.
void read_offload(ObjectReader& z, int stage, PlanInput& f) {
  std::optional<bool> pinned;
  for (const char* key : {"offload_optimizer", "offload_param"}) {
    if (!z.has(key)) continue;
    ObjectReader o = z.child(key);
    const bool param = std::string_view(key) == "offload_param";
    o.allow({"nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pipeline_read",
             "pipeline_write", "fast_init"});
    const std::string device = o.get_enum_or("device", {"none", "cpu", "nvme"}, "none");
    const std::string pointer = o.pointer_of("device");
    if (device == "nvme") {
      o.fail("device", "\"nvme\"",
             "\"cpu\" or \"none\" (ZeRO-Infinity's NVMe swapping is not modelled: loom has no "
             "NVMe device; \"cpu\" shows the host memory and PCIe time of the same offload)");
    }
    if (!param && o.has("ratio") && o.get_number("ratio") != 1.0) {
      o.fail("ratio", fmt_number(o.get_number("ratio")),
             "1.0 (a partial offload, ZeRO-Offload++ Twin-Flow, is not modelled)");
    }
    const bool pin = o.get_bool_or("pin_memory", false);
    o.finish();
    if (device != "cpu" || stage < (param ? 3 : 1)) continue;
    f.set(key, device, file_source(z.file(), pointer, deepspeed_key(pointer)));
    if (pinned && *pinned != pin) {
      o.fail("pin_memory", pin ? "true" : "false",
             fmt::format("{} (offload_optimizer's; loom models one pin_memory for both "
                         "offloads)",
                         *pinned ? "true" : "false"));
    }
    pinned = pin;
    const std::string pin_pointer = o.pointer_of("pin_memory");
    f.set("offload_pin_memory", pin,
          file_source(z.file(), pin_pointer, deepspeed_key(pin_pointer)));
  }
}

void read_zero(ObjectReader& r, PlanInput& f) {
  ObjectReader z = r.child("zero_optimization");
  z.allow({"contiguous_gradients", "reduce_scatter", "allgather_partitions",
           "round_robin_gradients", "stage3_max_live_parameters", "stage3_max_reuse_distance",
           "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
           "sub_group_size", "allgather_bucket_size"});
  auto source = [&](std::string_view key) {
    const std::string pointer = z.pointer_of(key);
    return file_source(z.file(), pointer, deepspeed_key(pointer));
  };
  const std::int64_t stage = z.get_count_or("stage", 0);
  if (stage > 3) z.fail("stage", std::to_string(stage), "0, 1, 2 or 3");
  // ZeRO++ hierarchical partitioning (hpZ: a secondary copy of the stage-3 shards within a
  // group of zero_hpz_partition_size GPUs, deepspeed/runtime/zero/config.py) is HSDP-like and
  // not modelled; 1, DeepSpeed's default, is plain ZeRO.
  if (z.has("zero_hpz_partition_size")) {
    const std::int64_t hpz = z.get_count_or("zero_hpz_partition_size", 1);
    if (hpz != 1) {
      z.fail("zero_hpz_partition_size", std::to_string(hpz),
             "1 (ZeRO++ hierarchical partitioning, HSDP-like, is not modelled)");
    }
  }
  f.set("zero", stage, source("stage"));
  // A DeepSpeed config's stage 3 is DeepSpeed's ZeRO-3, with its own buckets.
  if (stage == 3) f.set("fsdp_impl", std::string("deepspeed"), source("stage"));
  // DeepSpeed reads each key only at the stages that have what it tunes; loom takes it at
  // those stages only, so no loom field is set that the run would ignore.
  if (z.has("stage3_prefetch_bucket_size") && stage == 3 &&
      !is_auto(z, "stage3_prefetch_bucket_size")) {
    f.set("stage3_prefetch_bucket_size", bucket_elements(z, "stage3_prefetch_bucket_size"),
          source("stage3_prefetch_bucket_size"));
  }
  if (z.has("stage3_param_persistence_threshold") && stage == 3 &&
      !is_auto(z, "stage3_param_persistence_threshold")) {
    f.set("stage3_param_persistence_threshold",
          z.get_int_in_range("stage3_param_persistence_threshold", 0, std::int64_t{1} << 40),
          source("stage3_param_persistence_threshold"));
  }
  // overlap_comm: the gradient reduction (stages 0-2) and the parameter all-gather after the
  // step (stages 1-2); stage 3's per-unit collectives loom always overlaps.
  if (z.get_bool_or("overlap_comm", false) && stage < 3) {
    f.set("overlap_grad_reduce", true, source("overlap_comm"));
    if (stage >= 1) f.set("overlap_param_gather", true, source("overlap_comm"));
  }
  if (z.has("reduce_bucket_size") && !is_auto(z, "reduce_bucket_size")) {
    const std::int64_t elems = bucket_elements(z, "reduce_bucket_size");
    if (stage < 3) {
      // DeepSpeed buckets hold 16-bit gradients.
      f.set("dp_bucket_size", std::to_string(elems * 2) + "B", source("reduce_bucket_size"));
    } else {
      f.set("stage3_reduce_bucket_size", elems, source("reduce_bucket_size"));
    }
  }
  read_offload(z, static_cast<int>(stage), f);
  z.finish();
}

void read_precision_and_optimizer(ObjectReader& r, PlanInput& f) {
  for (const char* key : {"bf16", "fp16"}) {
    if (!r.has(key)) continue;
    ObjectReader o = r.child(key);
    o.allow({"loss_scale", "loss_scale_window", "initial_scale_power", "hysteresis",
             "min_loss_scale", "auto_cast", "consecutive_hysteresis", "immediate_grad_update"});
    if (!is_auto(o, "enabled") && o.get_bool_or("enabled", false)) {
      const std::string pointer = o.pointer_of("enabled");
      f.set("precision", std::string(key), file_source(o.file(), pointer, deepspeed_key(pointer)));
    }
    o.finish();
  }
  if (r.has("optimizer")) {
    ObjectReader o = r.child("optimizer");
    o.allow({"params"});
    const std::string type = to_lower(o.get_string("type"));
    const std::string pointer = o.pointer_of("type");
    const FieldSource source = file_source(o.file(), pointer, deepspeed_key(pointer));
    if (type == "adam" || type == "adamw" || type == "fusedadam" || type == "onebitadam" ||
        type == "lamb")
      f.set("optimizer", std::string("adam"), source);
    else if (type == "sgd")
      f.set("optimizer", std::string("sgd"), source);
    else
      o.fail("type", '"' + type + '"', "Adam, AdamW, FusedAdam, OneBitAdam, Lamb, SGD");
    o.finish();
  }
}

PlanInput read_config(const nlohmann::json& doc, const std::string& path) {
  ObjectReader r(doc, path, "");
  r.allow({"steps_per_print", "wall_clock_breakdown", "gradient_clipping", "scheduler",
           "prescale_gradients", "communication_data_type", "zero_allow_untested_optimizer",
           "zero_force_ds_cpu_optimizer", "dump_state", "tensorboard", "flops_profiler",
           "comms_logger", "seed"});
  PlanInput f;
  read_batch_keys(r, f);
  if (r.has("zero_optimization")) read_zero(r, f);
  read_precision_and_optimizer(r, f);
  if (r.has("activation_checkpointing")) {
    ObjectReader a = r.child("activation_checkpointing");
    a.allow({"partition_activations", "contiguous_memory_optimization", "cpu_checkpointing",
             "number_checkpoints", "synchronize_checkpoint_boundary", "profile"});
    if (a.get_bool_or("cpu_checkpointing", false))
      a.fail("cpu_checkpointing", "true",
             "false (DeepSpeed's activation checkpoints in host memory are not modelled; loom's "
             "activation offload is --cpu-offloading-num-layers)");
    f.set("recompute", std::string("full"),
          file_source(path, "/activation_checkpointing", "activation_checkpointing"));
    a.finish();
  }
  r.finish();
  return f;
}

}  // namespace

PlanInput import_deepspeed_json(const std::string& path) {
  return read_deepspeed_config(path).plan;
}

PlanInput parse_deepspeed_json(const std::string& text, const std::string& path) {
  return parse_deepspeed_config(text, path).plan;
}

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  return parse_deepspeed_config(read_text_file(path, "DeepSpeed config"), path);
}

DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& path) {
  const nlohmann::json doc = parse_json_text(text, path);
  DeepSpeedConfig config;
  config.file = path;
  config.autos = deepspeed_autos(doc, path);
  config.plan = read_config(doc, path);
  if (const auto stage = config.plan.integer("zero")) config.stage = static_cast<int>(*stage);
  return config;
}

}  // namespace loom::strategies
