#include "cli/plan_flags.hpp"

#include "common/units.hpp"
#include "models/model_spec.hpp"
#include "strategies/plan/plan_fields.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"

namespace loom::cli {

using strategies::FieldType;
using strategies::PlanField;

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  for (const PlanField* field : strategies::plan_flag_fields()) {
    const std::string key(field->key), flags(field->flags), help = strategies::help_text(*field);
    switch (field->type) {
      case FieldType::SIZE:
      case FieldType::STAGE: {
        CLI::Option* opt = app.add_option(flags, f.integers[key], help);
        if (field->binary_suffix) {
          // "8k" -> "8192" before CLI11 reads the integer; a bad value throws ValidationError.
          const std::string flag(strategies::canonical_flag(*field));
          opt->transform(
              [flag](std::string text) { return std::to_string(parse_binary_count(text, flag)); },
              "", "");
        }
        break;
      }
      case FieldType::SWITCH: {
        // Each switch also has a --no- form (CLI11 negated flag: counts -1), so a default a
        // --framework profile turns on can be turned off.
        const std::string canonical(strategies::canonical_flag(*field));
        app.add_flag(flags + ",!--no-" + canonical.substr(2), f.switches[key], help);
        break;
      }
      case FieldType::TOGGLE:
        app.add_option(flags, f.texts[key], help)->check(CLI::IsMember({"on", "off"}));
        break;
      case FieldType::PERCENT:
        app.add_option(flags, f.numbers[key], help);
        break;
      case FieldType::CHOICE:
      case FieldType::BYTES:
      case FieldType::LAYER_LIST:
      case FieldType::NAME_LIST:
      case FieldType::TEXT:
        app.add_option(flags, f.texts[key], help);
        break;
      case FieldType::DERIVED:
        break;
    }
  }
  app.add_option("--plan", f.plan_file, "loom plan JSON file (docs/plans.md)");
  app.add_option("--megatron-args", f.megatron_args,
                 "Megatron-LM flags in one string, e.g. \"--tensor-model-parallel-size 8\"");
  app.add_option("--deepspeed", f.deepspeed_file, "DeepSpeed JSON config file");
  app.add_flag("--print-config", f.print_config,
               "print the fully resolved plan (defaults included) and exit");
}

void add_order_flag(CLI::App& app, std::string& order) {
  app.add_option("--order", order,
                 "rank layout: tp, cp, ep, dp, pp joined by '-', fastest-varying first "
                 "(`loom ranks` shows it)")
      ->capture_default_str();
}

strategies::PlanInput flags_input(const PlanFlags& f) {
  strategies::PlanInput in;
  // No source of their own: the command line's fallback names each by its canonical flag.
  auto set = [&](const std::string& key, strategies::PlanValue value) {
    in.set(key, std::move(value));
  };
  for (const auto& [key, v] : f.integers)
    if (v) set(key, *v);
  for (const auto& [key, v] : f.numbers)
    if (v) set(key, *v);
  for (const auto& [key, count] : f.switches)
    if (count != 0) set(key, count > 0);  // the last of --x / --no-x wins by count
  for (const auto& [key, v] : f.texts) {
    if (!v) continue;
    if (strategies::plan_field(key).type == FieldType::TOGGLE)
      set(key, *v == "on");
    else
      set(key, *v);
  }
  return in;
}

strategies::PlanInput merged_input(const PlanFlags& given) {
  // Precedence: --plan < --deepspeed < --megatron-args < explicit flags.
  strategies::PlanInput in;
  in.sources() = strategies::PlanSources::command_line();
  if (given.plan_file) in.merge(strategies::read_plan_json(*given.plan_file));
  if (given.deepspeed_file) in.merge(strategies::import_deepspeed_json(*given.deepspeed_file));
  if (given.megatron_args) in.merge(strategies::import_megatron_args(*given.megatron_args));
  in.merge(flags_input(given));
  return in;
}

ResolvedPlan resolve_plan(const PlanFlags& given, std::optional<std::int64_t> gpus,
                          std::optional<int> model_layers, std::optional<std::int64_t> model_seq,
                          bool transformer) {
  const strategies::PlanInput in = merged_input(given);
  return ResolvedPlan{strategies::resolve_plan(in, gpus, model_layers, model_seq, transformer),
                      in.sources()};
}

ResolvedPlan resolve_plan(const PlanFlags& given, std::optional<std::int64_t> gpus,
                          const models::ModelSpec& model) {
  const strategies::PlanInput in = merged_input(given);
  return ResolvedPlan{strategies::resolve_plan(in, gpus, model), in.sources()};
}

}  // namespace loom::cli
