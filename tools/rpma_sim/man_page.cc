#include "tools/rpma_sim/man_page.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace softrpma::rpma_sim {
namespace {

// A block of text lines: filled text when no line is indented, else kept as laid out.
void AppendBlock(const std::vector<absl::string_view>& lines, std::string* out) {
  bool indented = false;
  for (absl::string_view line : lines) indented = indented || absl::StartsWith(line, " ");
  if (!indented) {
    std::vector<std::string> words;
    for (absl::string_view line : lines) words.push_back(RoffText(absl::StripAsciiWhitespace(line)));
    absl::StrAppend(out, ".PP\n", absl::StrJoin(words, "\n"), "\n");
    return;
  }
  absl::StrAppend(out, ".PP\n.nf\n");
  for (absl::string_view line : lines) absl::StrAppend(out, RoffText(line), "\n");
  absl::StrAppend(out, ".fi\n");
}

// Paragraphs separated by blank lines (AppendBlock each).
void AppendParagraphs(absl::string_view text, std::string* out) {
  std::vector<absl::string_view> block;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StripAsciiWhitespace(line).empty()) {
      if (!block.empty()) AppendBlock(block, out);
      block.clear();
      continue;
    }
    block.push_back(line);
  }
  if (!block.empty()) AppendBlock(block, out);
}

// Lines kept as they are (synopses, examples), indented.
void AppendVerbatim(absl::string_view text, std::string* out) {
  absl::StrAppend(out, ".RS 4\n.nf\n");
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(out, RoffText(line), "\n");
  }
  absl::StrAppend(out, ".fi\n.RE\n");
}

}  // namespace

std::string RoffText(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  // A line starting with '.' or '\'' would be a request.
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

std::string ManPage(const ManSource& source) {
  std::string out = absl::StrCat(".TH RPMA\\-SIM 1 \"\" \"", RoffText(source.version),
                                 "\" \"softrpma\"\n.SH NAME\nrpma\\-sim \\- ",
                                 RoffText(source.summary), "\n.SH SYNOPSIS\n");
  AppendVerbatim(source.synopsis, &out);
  absl::StrAppend(&out, ".SH DESCRIPTION\n");
  AppendParagraphs(source.description, &out);
  absl::StrAppend(&out, ".SH COMMANDS\n");
  for (const ManCommand& command : source.commands) {
    absl::StrAppend(&out, ".SS \"rpma\\-sim ", RoffText(command.name), "\"\n");
    AppendVerbatim(command.synopsis, &out);
    AppendParagraphs(command.description, &out);
    if (!command.flags.empty()) absl::StrAppend(&out, ".PP\nFlags:\n");
    for (const ManFlag& flag : command.flags) {
      absl::StrAppend(&out, ".TP\n\\fB", RoffText(flag.spelling), "\\fR");
      if (!flag.placeholder.empty()) {
        absl::StrAppend(&out, flag.spelling.size() == 2 ? " " : "=", "\\fI",
                        RoffText(flag.placeholder), "\\fR");
      }
      if (!flag.default_value.empty()) {
        absl::StrAppend(&out, " (default: ", RoffText(flag.default_value), ")");
      }
      absl::StrAppend(&out, "\n", RoffText(absl::StripAsciiWhitespace(flag.help)), "\n");
    }
    absl::StrAppend(&out, ".PP\nExamples:\n");
    AppendVerbatim(command.examples, &out);
  }
  absl::StrAppend(&out, ".SH \"EXIT STATUS\"\n");
  AppendParagraphs(source.exit_status, &out);
  absl::StrAppend(&out, ".SH \"SEE ALSO\"\n");
  AppendParagraphs(source.see_also, &out);
  return out;
}

}  // namespace softrpma::rpma_sim
