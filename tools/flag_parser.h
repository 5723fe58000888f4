// A small per-subcommand flag parser for flotilla-tool. absl flags are
// process-global, so subcommands sharing one binary would share (and
// collide on) one flag namespace; this parser keeps each subcommand's flags
// local. Accepted forms: --name value, --name=value, and for booleans --name,
// --name=true|false, --no-name. Dashes and underscores in names are
// equivalent (--max-tokens == --max_tokens). "--" ends flag parsing.
#ifndef FLOTILLA_TOOLS_FLAG_PARSER_H_
#define FLOTILLA_TOOLS_FLAG_PARSER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace flotilla::tools {

class FlagParser {
 public:
  // `usage` is the synopsis printed first by Usage().
  explicit FlagParser(std::string usage) : usage_(std::move(usage)) {}

  // Registers a flag; `out` keeps its value when the flag is absent.
  // `name` is written without dashes, e.g. "out" or "max-tokens".
  void String(const std::string& name, std::string* out,
              const std::string& help);
  void Int(const std::string& name, int64_t* out, const std::string& help);
  void Uint64(const std::string& name, uint64_t* out, const std::string& help);
  void Bool(const std::string& name, bool* out, const std::string& help);

  // Parses argv[1..argc) (argv[0] is the subcommand name). Unknown flags,
  // missing or malformed values are InvalidArgument naming the flag.
  // Non-flag arguments are collected in positional().
  absl::Status Parse(int argc, char** argv);

  // The usual front door of a subcommand: Parse, then on --help print
  // Usage() to stdout and return kExitOk; on a bad flag or any positional
  // argument print "flotilla-tool <command>: <why>" to stderr and return
  // kExitUsage; std::nullopt when the subcommand should go on.
  std::optional<int> ParseOrExitCode(int argc, char** argv,
                                     const char* command);

  bool help() const { return help_; }
  // Whether a flag appeared on the command line.
  bool IsSet(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // The synopsis followed by one line per flag.
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kUint64, kBool };
  struct Flag {
    std::string name;  // canonical, with dashes
    Kind kind;
    void* out;
    std::string help;
    bool set = false;
  };
  Flag* Lookup(const std::string& name);
  absl::Status Assign(Flag& flag, const std::string& value);

  std::string usage_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_FLAG_PARSER_H_
