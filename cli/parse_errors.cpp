#include "cli/parse_errors.hpp"

#include <fmt/format.h>

#include <optional>
#include <regex>
#include <vector>

#include "common/strings.hpp"

namespace loom::cli {

namespace {

// The subcommand being parsed when the error was raised: the deepest parsed one.
const CLI::App* deepest(const CLI::App& root) {
  const CLI::App* app = &root;
  for (bool descended = true; descended;) {
    descended = false;
    for (const CLI::App* sub : app->get_subcommands({})) {
      if (sub->parsed()) {
        app = sub;
        descended = true;
        break;
      }
    }
  }
  return app;
}

std::string command_name(const CLI::App* app) {
  std::string name;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent())
    name = a->get_parent() == nullptr ? "loom" + name : " " + a->get_name() + name;
  return name;
}

// The option CLI11 names `name` ("--nodes", or a positional's name "profile"), if any.
const CLI::Option* find_option(const CLI::App* app, const std::string& name) {
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_name() == name) return opt;
    for (const auto& l : opt->get_lnames())
      if ("--" + l == name) return opt;
    if (!opt->get_positional() && opt->get_name(false, true) == name) return opt;
  }
  return nullptr;
}

// What a flag takes, in words, from CLI11's type name ("INT", "FLOAT", "TEXT:FILE").
std::string takes(const CLI::Option* opt) {
  if (opt == nullptr) return "a value";
  const std::string type = opt->get_type_name();
  if (type.find("INT") != std::string::npos) return "a whole number";
  if (type.find("FLOAT") != std::string::npos) return "a number";
  if (type.find("FILE") != std::string::npos) return "a file path";
  return "a value";
}

// " (its description)" when the option has one.
std::string described(const CLI::Option* opt) {
  if (opt == nullptr || opt->get_description().empty()) return "";
  return " (" + opt->get_description() + ")";
}

std::vector<std::string> flag_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app->get_options())
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  return names;
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string s = did_you_mean(word, candidates);
  return s.empty() ? "" : fmt::format(" (did you mean '{}'?)", s);
}

std::optional<std::string> extras(const CLI::App& root, const CLI::App* app,
                                  const std::string& command) {
  const std::vector<std::string> left = root.remaining(true);
  for (const auto& extra : left) {
    if (extra.size() < 2 || extra[0] != '-') continue;
    const std::string flag = extra.substr(0, extra.find('='));
    const auto names = flag_names(app);
    return fmt::format("unknown flag '{}' for `{}`{}; see `{} --help` for the flags it takes", flag,
                       command, suggest(flag, names), command);
  }
  if (left.empty()) return std::nullopt;
  std::vector<std::string> subs;
  for (const CLI::App* sub : app->get_subcommands({})) subs.push_back(sub->get_name());
  if (!subs.empty()) {
    return fmt::format("unexpected argument '{}' for `{}`{}; its subcommands: {}", left.front(),
                       command, suggest(left.front(), subs), join(subs, ", "));
  }
  return fmt::format(
      "unexpected argument '{}' for `{}`: values go after their flag (`--flag VALUE`); see `{} "
      "--help`",
      left.front(), command, command);
}

// "--nodes: 1 required INT missing", "--cluster: At Most 1 required but received 2",
// "--path: At least 2 required but received 1", "Expected exactly 2 arguments to --path, got 1".
std::optional<std::string> mismatch(const std::string& m, const CLI::App* app,
                                    const std::string& command) {
  std::smatch g;
  if (std::regex_match(m, g, std::regex("(.+): \\d+ required (.*) missing"))) {
    const CLI::Option* opt = find_option(app, g[1]);
    return fmt::format("{} needs {} after it{}; write `{} VALUE`, or see `{} --help`", g[1].str(),
                       takes(opt), described(opt), g[1].str(), command);
  }
  if (std::regex_match(m, g, std::regex("(.+): At Most (\\d+) required but received (\\d+)"))) {
    if (g[2] == "1") {
      return fmt::format("{} was given {} times; give it once", g[1].str(), g[3].str());
    }
    return fmt::format("{} takes at most {} values, got {}; give fewer", g[1].str(), g[2].str(),
                       g[3].str());
  }
  if (std::regex_match(m, g, std::regex("(.+): At least (\\d+) required but received (\\d+)")) ||
      std::regex_match(m, g,
                       std::regex("Expected (?:exactly|at least) (\\d+) arguments to (.+), got "
                                  "(\\d+)"))) {
    const bool first_is_name = m.rfind("Expected", 0) != 0;
    const std::string name = first_is_name ? g[1].str() : g[2].str();
    const std::string need = first_is_name ? g[2].str() : g[1].str();
    const CLI::Option* opt = find_option(app, name);
    return fmt::format("{} takes {} values{}, got {}; see `{} --help`", name, need, described(opt),
                       g[3].str(), command);
  }
  if (std::regex_match(m, g, std::regex("(.+) was given a disallowed flag override")))
    return fmt::format("{} is a switch and takes no value; give it alone", g[1].str());
  return std::nullopt;
}

// CLI11: "Could not convert: --tp = 1.5", "--full: Should be true/false or a number",
// "The value x is not an allowed value for --y".
std::optional<std::string> conversion(const std::string& m, const CLI::App* app,
                                      const std::string& command) {
  std::smatch g;
  if (std::regex_match(m, g, std::regex("Could not convert: (.+?) = (.*)"))) {
    const std::string flag = g[1], value = g[2];
    const CLI::Option* opt = find_option(app, flag);
    const bool integer = takes(opt) == "a whole number";
    // Digits that did not convert: too large for the flag's integer type, not a fraction.
    const bool digits =
        !value.empty() && value != "-" &&
        value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos;
    if (integer && digits) {
      return fmt::format(
          "{}: '{}' is a whole number out of range; see `{} --help` for the values it takes", flag,
          value, command);
    }
    return fmt::format("{}: '{}' is not {}; see `{} --help`", flag, value, takes(opt), command);
  }
  if (std::regex_match(m, g, std::regex("(.+): Should be true/false or a number")) ||
      std::regex_match(m, g, std::regex("(.+): too many inputs for a flag"))) {
    return fmt::format("{} is a switch: give it alone (or {}=true / {}=false)", g[1].str(),
                       g[1].str(), g[1].str());
  }
  if (std::regex_match(m, g, std::regex("The value (.*) is not an allowed value for (.+)")))
    return fmt::format("{}: '{}' is not allowed; see `{} --help`", g[2].str(), g[1].str(), command);
  return std::nullopt;
}

// CLI11's checks: "--format: xml not in {table,json,dot}", "--top: Value 0 not in range 1 to
// 100000", "kind: bogus not in {models,clusters,gpus}", "--x: File does not exist: p".
std::optional<std::string> validation(const std::string& m, const CLI::App* app,
                                      const std::string& command) {
  std::smatch g;
  if (!std::regex_match(m, g, std::regex("([^:]+): (.*)"))) return std::nullopt;
  const std::string name = g[1], what = g[2];
  const CLI::Option* opt = find_option(app, name);
  const bool positional = opt != nullptr && opt->get_positional();
  const std::string who = positional ? fmt::format("`{}`'s {} argument", command, name) : name;
  std::smatch v;
  if (std::regex_match(what, v, std::regex("(.*) not in \\{(.*)\\}"))) {
    std::vector<std::string> allowed;
    std::string list = v[2];
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t comma = std::min(list.find(',', start), list.size());
      allowed.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
    return fmt::format("{}: '{}' is not one of {}{}", who, v[1].str(), join(allowed, ", "),
                       suggest(v[1], allowed));
  }
  if (std::regex_match(what, v, std::regex("Value (.*) not in range (.*) to (.*)"))) {
    return fmt::format("{}: {} is out of range; give a value from {} to {}", who, v[1].str(),
                       v[2].str(), v[3].str());
  }
  if (std::regex_match(what, v, std::regex("(?:File|Path) does not exist: (.*)")))
    return fmt::format("{}: no file '{}'; check the path", who, v[1].str());
  return fmt::format("{}: {}; see `{} --help`", who, what, command);
}

std::optional<std::string> required(const std::string& m, const CLI::App* app,
                                    const std::string& command) {
  std::smatch g;
  if (m == "A subcommand is required" || m.rfind("Requires at least", 0) == 0) {
    std::vector<std::string> subs;
    for (const CLI::App* sub : app->get_subcommands({})) subs.push_back(sub->get_name());
    return fmt::format("`{}` needs a subcommand: {}; see `{} --help`", command, join(subs, ", "),
                       command);
  }
  if (std::regex_match(m, g, std::regex("(.+) is required"))) {
    const CLI::Option* opt = find_option(app, g[1]);
    if (opt != nullptr && opt->get_positional()) {
      return fmt::format("`{}` needs its {} argument{}; see `{} --help`", command, g[1].str(),
                         described(opt), command);
    }
    return fmt::format("{} is required{}; see `{} --help`", g[1].str(), described(opt), command);
  }
  return std::nullopt;
}

}  // namespace

std::string explain_parse_error(const CLI::ParseError& e, const CLI::App& root) {
  std::string message = e.what();
  for (auto& c : message)
    if (c == '\n') c = ' ';
  const CLI::App* app = deepest(root);
  const std::string command = command_name(app);
  std::optional<std::string> said;
  std::smatch g;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    said = extras(root, app, command);
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    said = mismatch(message, app, command);
  } else if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    said = conversion(message, app, command);
  } else if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    said = validation(message, app, command);
  } else if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    said = required(message, app, command);
  } else if (dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr &&
             std::regex_match(message, g, std::regex("(.+) excludes (.+)"))) {
    said = fmt::format("{} and {} cannot be given together; keep one", g[1].str(), g[2].str());
  } else if (dynamic_cast<const CLI::RequiresError*>(&e) != nullptr &&
             std::regex_match(message, g, std::regex("(.+) requires (.+)"))) {
    said = fmt::format("{} needs {} as well; give both", g[1].str(), g[2].str());
  }
  if (said) return *said;
  return fmt::format("`{}` could not read its command line ({}); see `{} --help`", command, message,
                     command);
}

}  // namespace loom::cli
