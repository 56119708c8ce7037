#include "tools/rpma_sim/command_line.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "simverbs/did_you_mean.h"

namespace softrpma::rpma_sim {
namespace {

bool IsHelpWord(absl::string_view arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull";
}

const SubcommandSpec* FindSubcommand(const std::vector<SubcommandSpec>& subcommands,
                                     absl::string_view name) {
  for (const SubcommandSpec& s : subcommands) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string Names(const std::vector<SubcommandSpec>& subcommands) {
  return absl::StrJoin(subcommands, ", ",
                       [](std::string* out, const SubcommandSpec& s) { out->append(s.name); });
}

bool IsBool(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

}  // namespace

std::string FlagSpelling(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", absl::StrReplaceAll(name, {{"_", "-"}}));
}

absl::StatusOr<CommandLine> ParseArgs(const std::vector<SubcommandSpec>& subcommands,
                                      const std::vector<std::string>& args) {
  CommandLine line;
  size_t end = std::find(args.begin(), args.end(), "--") - args.begin();
  bool has_separator = end < args.size();
  if (has_separator) line.program.assign(args.begin() + end + 1, args.end());

  const SubcommandSpec* sub = nullptr;
  // The subcommand is the first word that is not --help; `help [SUBCOMMAND]` asks for help.
  size_t sub_at = end;
  for (size_t i = 0; i < end; ++i) {
    if (IsHelpWord(args[i])) {
      line.help = true;
    } else if (sub_at == end) {
      sub_at = i;
    }
  }
  if (sub_at < end && absl::StartsWith(args[sub_at], "-")) {
    if (line.help) return line;
    return absl::InvalidArgumentError(absl::StrCat(
        "the subcommand comes first, then its flags: rpma-sim SUBCOMMAND [FLAGS] (got \"",
        args[sub_at], "\" first)"));
  }
  if (sub_at < end && args[sub_at] == "help") {
    line.help = true;
    for (size_t i = sub_at + 1; i < end && line.subcommand.empty(); ++i) {
      if (!IsHelpWord(args[i])) line.subcommand = args[i];
    }
  } else if (sub_at < end) {
    line.subcommand = args[sub_at];
  }
  if (!line.subcommand.empty()) {
    sub = FindSubcommand(subcommands, line.subcommand);
    if (sub == nullptr) {
      std::vector<std::string> names;
      for (const SubcommandSpec& spec : subcommands) names.push_back(spec.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown subcommand \"", line.subcommand, "\"",
          DidYouMeanSuffix(line.subcommand, names), "; the subcommands are ", Names(subcommands)));
    }
  }
  if (line.help) return line;
  if (sub == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no subcommand given; the subcommands are ", Names(subcommands)));
  }

  for (size_t i = 0; i < end; ++i) {
    if (i == sub_at) continue;
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      line.args.push_back(arg);
      continue;
    }
    absl::string_view body = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    std::string name;
    std::optional<std::string> value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = std::string(body.substr(0, eq));
      value = std::string(body.substr(eq + 1));
    } else {
      name = std::string(body);
    }
    // -j4: a one-letter flag with its number attached.
    if (!value.has_value() && name.size() > 1 && name[0] == 'j' && absl::ascii_isdigit(name[1])) {
      value = name.substr(1);
      name = "j";
    }
    absl::StrReplaceAll({{"-", "_"}}, &name);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
      if (positive != nullptr && IsBool(*positive) && !value.has_value()) {
        flag = positive;
        name = name.substr(2);
        negated = true;
      }
    }
    bool taken = flag != nullptr &&
                 std::find(sub->flags.begin(), sub->flags.end(), name) != sub->flags.end();
    if (flag == nullptr || !taken) {
      std::string known =
          sub->flags.empty()
              ? absl::StrCat("`rpma-sim ", sub->name, "` takes no flags")
              : absl::StrCat(
                    "`rpma-sim ", sub->name, "` takes ",
                    absl::StrJoin(sub->flags, ", ", [](std::string* out, const std::string& f) {
                      out->append(FlagSpelling(f));
                    }));
      std::vector<std::string> spellings;
      for (const std::string& f : sub->flags) spellings.push_back(FlagSpelling(f));
      const std::string typed = absl::StrCat(name.size() == 1 ? "-" : "--",
                                             absl::StrReplaceAll(name, {{"_", "-"}}));
      return absl::InvalidArgumentError(absl::StrCat(
          flag == nullptr ? "unknown flag " : "flag ", arg,
          flag == nullptr ? "" : absl::StrCat(" is not a flag of `rpma-sim ", sub->name, "`"),
          DidYouMeanSuffix(typed, spellings), "; ", known));
    }
    if (negated) {
      value = "false";
    } else if (!value.has_value()) {
      if (IsBool(*flag)) {
        value = "true";
      } else if (i + 1 < end && i + 1 != sub_at) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag ", FlagSpelling(name), " needs a value (", FlagSpelling(name), "=VALUE)"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      // A duration without its unit ("10") is the usual slip: say what one looks like.
      double number = 0;
      if (flag->IsOfType<absl::Duration>() && absl::SimpleAtod(*value, &number)) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad value for ", FlagSpelling(name), ": \"", *value,
                         "\" has no unit; a duration is a number and its unit: ", *value,
                         "s, 500ms, 2m, 1h"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("bad value for ", FlagSpelling(name), ": \"", *value, "\" (", error, ")"));
    }
    line.given.insert(name);
    line.flag_words.push_back(absl::StrCat("--", name, "=", *value));
  }

  int count = static_cast<int>(line.args.size());
  if (count < sub->min_args || count > sub->max_args) {
    if (count < sub->min_args) {
      return absl::InvalidArgumentError(
          absl::StrCat("`rpma-sim ", sub->name, "` needs ", sub->min_args,
                       sub->min_args == 1 ? " argument" : " arguments"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("`rpma-sim ", sub->name, "`: unexpected argument \"", line.args[sub->max_args],
                     "\"", sub->takes_program ? "; the program to run comes after \"--\"" : ""));
  }
  if (sub->takes_program && (!has_separator || line.program.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("`rpma-sim ", sub->name,
                                                   "` needs the program to run after \"--\": "
                                                   "rpma-sim ",
                                                   sub->name, " [FLAGS] -- PROGRAM [ARGS...]"));
  }
  if (!sub->takes_program && has_separator) {
    return absl::InvalidArgumentError(
        absl::StrCat("`rpma-sim ", sub->name, "` runs no program (nothing may follow \"--\")"));
  }
  return line;
}

}  // namespace softrpma::rpma_sim
