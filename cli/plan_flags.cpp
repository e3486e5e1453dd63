#include "cli/plan_flags.hpp"

#include <fmt/format.h>

#include <iostream>

#include "cli/error_line.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "models/model_spec.hpp"
#include "strategies/plan/deepspeed_auto.hpp"
#include "strategies/plan/plan_emit.hpp"
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
  app.add_option("--torchtitan", f.torchtitan_file, "torchtitan job-config TOML file");
  app.add_flag("--print-config", f.print_config,
               "print the fully resolved plan (defaults included) and exit");
}

void add_emit_flag(CLI::App& app, PlanFlags& f) {
  app.add_option("--emit", f.emit,
                 "print the plan as megatron (pretrain_gpt.py arguments), torchtitan (job-config "
                 "TOML) or deepspeed (ds_config JSON + Megatron-DeepSpeed arguments) instead of "
                 "the report")
      ->check(CLI::IsMember({"megatron", "torchtitan", "deepspeed"}));
}

void print_emit(const PlanFlags& f, const models::ModelSpec& model,
                const models::TrainingPlan& plan) {
  std::cout << strategies::emit_plan(strategies::parse_emit_format(f.emit.value_or(""), "--emit"),
                                     model, plan);
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

namespace {

// Each error of a Megatron-LM line on its own line: all but the last printed here, the last
// thrown for cli/main.cpp to print (and exit 2).
[[noreturn]] void report_lines(const strategies::MegatronArgsError& e) {
  const auto& lines = e.lines();
  for (size_t i = 0; i + 1 < lines.size(); ++i) std::cerr << error_line("error", lines[i]);
  throw ValidationError(e.field(), lines.empty() ? std::string(e.what()) : lines.back());
}

strategies::MegatronLine read_line(const std::string& text) {
  try {
    return strategies::read_megatron_args(text);
  } catch (const strategies::MegatronArgsError& e) {
    report_lines(e);
  }
}

// `model` after printing what its import set aside (a HF gemma3 config's vision tower:
// ModelSpec::notes) as notes on stderr.
models::ModelSpec noted(models::ModelSpec model) {
  for (const std::string& note : model.notes) std::cerr << error_line("note", note);
  return model;
}

}  // namespace

models::ModelSpec load_plan_model(const std::string& model_arg, const PlanFlags& flags) {
  if (flags.torchtitan_file) {
    const auto config = strategies::import_torchtitan_toml(*flags.torchtitan_file);
    if (!config.ignored.empty()) {
      std::cerr << fmt::format("loom: note: --torchtitan: {} key{} set aside (not modelled): {}\n",
                               config.ignored.size(), config.ignored.size() == 1 ? "" : "s",
                               join(config.ignored, " "));
    }
  }
  if (!flags.megatron_args) {
    if (model_arg.empty())
      throw ValidationError("--model",
                            "--model is required (a preset, loom model JSON or HF "
                            "config.json; or the model shape in --megatron-args)");
    return noted(models::load_model(model_arg, "--model"));
  }
  const strategies::MegatronLine line = read_line(*flags.megatron_args);
  if (!line.ignored.empty()) {
    std::cerr << fmt::format(
        "loom: note: --megatron-args: {} flag{} set aside (logging, data, tokenizer, "
        "checkpointing, or not modelled; docs/plans.md): {}\n",
        line.ignored.size(), line.ignored.size() == 1 ? "" : "s", join(line.ignored, " "));
  }
  if (model_arg.empty()) return strategies::megatron_model(line);
  models::ModelSpec model = noted(models::load_model(model_arg, "--model"));
  const std::vector<std::string> mismatches = strategies::megatron_model_mismatches(line, model);
  if (!mismatches.empty()) report_lines(strategies::MegatronArgsError(mismatches));
  return model;
}

strategies::PlanInput merged_input(const PlanFlags& given, const models::ModelSpec* model) {
  // Precedence: --plan < --deepspeed < --megatron-args < explicit flags.
  strategies::PlanInput in;
  in.sources() = strategies::PlanSources::command_line();
  if (given.plan_file) in.merge(strategies::read_plan_json(*given.plan_file));
  if (given.deepspeed_file) {
    const auto config = strategies::read_deepspeed_config(*given.deepspeed_file);
    in.merge(config.plan);
    if (model) in.merge(strategies::deepspeed_model_autos(config, *model));
  }
  if (given.torchtitan_file)
    in.merge(strategies::import_torchtitan_toml(*given.torchtitan_file).plan);
  if (given.megatron_args) in.merge(read_line(*given.megatron_args).plan);
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
  const strategies::PlanInput in = merged_input(given, &model);
  ResolvedPlan out{strategies::resolve_plan(in, gpus, model), in.sources()};
  note_deepspeed_autos(given, in, &out.plan, &model);
  return out;
}

void note_deepspeed_autos(const PlanFlags& given, const strategies::PlanInput& merged,
                          const models::TrainingPlan* plan, const models::ModelSpec* model) {
  if (!given.deepspeed_file || *given.deepspeed_noted) return;
  *given.deepspeed_noted = true;
  const auto config = strategies::read_deepspeed_config(*given.deepspeed_file);
  for (const std::string& line : strategies::deepspeed_auto_notes(config, merged, plan, model))
    std::cerr << error_line("note", line);
}

}  // namespace loom::cli
