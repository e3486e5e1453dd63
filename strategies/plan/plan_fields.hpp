#pragma once
// The one table of plan fields. Each row says everything loom knows about one field of
// the training plan: its JSON key, type, allowed values, default, doc line, command-line
// spellings and, where a foreign format has it, its Megatron-LM flag and DeepSpeed key.
// The CLI flags (cli/plan_flags.cpp), the plan-JSON reader and writer (plan_json.cpp), the
// merge of sources (plan_input.cpp), the Megatron/DeepSpeed translators and
// docs/plans.md follow this table; add a field here first. No heavy headers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "models/training_plan.hpp"

namespace loom::strategies {

/// What a field holds, which fixes how every source reads it.
enum class FieldType {
  SIZE,        ///< a positive integer (parallel sizes, batch sizes, lengths)
  STAGE,       ///< a small non-negative integer with a range (the ZeRO stage)
  CHOICE,      ///< one name of an enum (recompute, schedule, precision, ...)
  SWITCH,      ///< an on-only switch: a flag on the command line, true in JSON
  TOGGLE,      ///< on or off: "on"/"off" on the command line, a boolean in JSON
  BYTES,       ///< a size with its unit ("160MB")
  PERCENT,     ///< a percentage in [0, 100)
  LAYER_LIST,  ///< layer counts per pipeline stage ("20,20" / [20, 20])
  NAME_LIST,   ///< a set of names ("mla_up_proj,mlp" / ["mla_up_proj", "mlp"]; "" / [] empty)
  TEXT,        ///< a value with its own grammar ("ssp:2"), checked where the field resolves
  DERIVED,     ///< written for the reader's benefit; read back only to check it agrees
};

/// A value as a source gave it: integers, numbers, switches, text (names, sizes with
/// units, comma lists) and, when writing, layer lists.
using PlanValue = std::variant<std::int64_t, double, bool, std::string, std::vector<int>>;

/// One row of the table.
struct PlanField {
  std::string_view key;       ///< JSON key and the field's name in library messages
  FieldType type;             ///< how it is read
  std::string_view flags;     ///< CLI spellings, comma-separated, the first is canonical
  std::string_view doc;       ///< one line for --help and docs/plans.md
  std::string_view fallback;  ///< the default, as docs/plans.md states it
  std::int64_t min = 1;       ///< SIZE/STAGE: smallest allowed value
  std::int64_t max = 0;       ///< SIZE/STAGE: largest allowed value; 0 means no bound
  const std::vector<std::string>* names =
      nullptr;                  ///< CHOICE, NAME_LIST: the valid names, in order
  std::string_view megatron;    ///< the Megatron-LM flag that sets it directly, if any
  std::string_view deepspeed;   ///< the DeepSpeed JSON pointer that sets it directly, if any
  std::string_view supersedes;  ///< a field a source's value for this one clears (gbs/grad_accum)
  bool binary_suffix = false;   ///< SIZE: the command line also takes 8k / 1M (x 1024 / x 2^20)
  int help_position = -1;       ///< order among the CLI flags; -1: not a flag
  /// The value of this field in a resolved plan, for the writer; null for input-only fields.
  PlanValue (*get)(const models::TrainingPlan&) = nullptr;
  /// Whether the field means anything for a plan (the writer leaves it out otherwise, e.g.
  /// parameter-server settings of a DDP plan, offload settings of a plan that offloads
  /// nothing); null: always.
  bool (*applies)(const models::TrainingPlan&) = nullptr;
};

/// Every plan field, in the order the plan JSON writer prints them (input-only fields last).
const std::vector<PlanField>& plan_fields();
/// Whether plan field `key` is a parameter-server setting (ps_servers, ps_placement, ...),
/// which means something under --dp-mode ps alone.
bool is_ps_field(std::string_view key);

/// The row for JSON key `key`; throws InternalError for an unknown key (a bug).
const PlanField& plan_field(std::string_view key);

/// The rows with a CLI flag, in --help order.
std::vector<const PlanField*> plan_flag_fields();

/// The canonical CLI spelling of `field` ("--tp"); empty when it has no flag.
std::string_view canonical_flag(const PlanField& field);

/// The help line of `field`: its doc, and for a CHOICE the valid names ("a|b|c").
std::string help_text(const PlanField& field);

/// `bytes` as the writer prints a size: a whole number of bytes when it is one ("160000000B").
std::string bytes_text(double bytes);

}  // namespace loom::strategies
