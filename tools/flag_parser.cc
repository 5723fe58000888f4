#include "tools/flag_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "tools/commands.h"

namespace flotilla::tools {
namespace {

std::string Canonical(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

std::optional<int> FlagParser::ParseOrExitCode(int argc, char** argv,
                                               const char* command) {
  std::string error;
  if (absl::Status s = Parse(argc, argv); !s.ok()) {
    error = std::string(s.message());
  } else if (help_) {
    std::fputs(Usage().c_str(), stdout);
    return kExitOk;
  } else if (!positional_.empty()) {
    error = absl::StrCat("unexpected argument '", positional_[0], "'");
  } else {
    return std::nullopt;
  }
  std::fprintf(stderr, "flotilla-tool %s: %s\n", command, error.c_str());
  return kExitUsage;
}

void FlagParser::String(const std::string& name, std::string* out,
                        const std::string& help) {
  flags_.push_back({Canonical(name), Kind::kString, out, help});
}
void FlagParser::Int(const std::string& name, int64_t* out,
                     const std::string& help) {
  flags_.push_back({Canonical(name), Kind::kInt, out, help});
}
void FlagParser::Uint64(const std::string& name, uint64_t* out,
                        const std::string& help) {
  flags_.push_back({Canonical(name), Kind::kUint64, out, help});
}
void FlagParser::Bool(const std::string& name, bool* out,
                      const std::string& help) {
  flags_.push_back({Canonical(name), Kind::kBool, out, help});
}

FlagParser::Flag* FlagParser::Lookup(const std::string& name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagParser::IsSet(const std::string& name) const {
  const std::string c = Canonical(name);
  for (const Flag& f : flags_) {
    if (f.name == c) return f.set;
  }
  return false;
}

absl::Status FlagParser::Assign(Flag& flag, const std::string& value) {
  const std::string bad =
      absl::StrCat("--", flag.name, ": invalid value '", value, "'");
  flag.set = true;
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.out) = value;
      return absl::OkStatus();
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(flag.out) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(flag.out) = false;
      } else {
        return absl::InvalidArgumentError(bad + " (expected true or false)");
      }
      return absl::OkStatus();
    case Kind::kInt:
    case Kind::kUint64: {
      if (value.empty()) return absl::InvalidArgumentError(bad);
      // strtoull accepts "-1" silently; an unsigned flag must not.
      if (flag.kind == Kind::kUint64 && value[0] == '-') {
        return absl::InvalidArgumentError(bad);
      }
      char* end = nullptr;
      errno = 0;
      if (flag.kind == Kind::kInt) {
        long long v = std::strtoll(value.c_str(), &end, 10);
        *static_cast<int64_t*>(flag.out) = v;
      } else {
        unsigned long long v = std::strtoull(value.c_str(), &end, 10);
        *static_cast<uint64_t*>(flag.out) = v;
      }
      if (errno != 0 || *end != '\0') return absl::InvalidArgumentError(bad);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown flag kind");
}

absl::Status FlagParser::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    if (arg == "-h" || arg == "--help" || arg == "-help") {
      help_ = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (arg.size() > 1 && arg[0] == '-') {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag '", arg, "' (flags start with --)"));
      }
      positional_.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = Canonical(arg.substr(2, eq - 2));
    Flag* flag = Lookup(name);
    if (flag == nullptr && name.compare(0, 3, "no-") == 0) {
      Flag* negated = Lookup(name.substr(3));
      if (negated != nullptr && negated->kind == Kind::kBool &&
          eq == std::string::npos) {
        negated->set = true;
        *static_cast<bool*>(negated->out) = false;
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (eq != std::string::npos) {
      if (absl::Status s = Assign(*flag, arg.substr(eq + 1)); !s.ok()) {
        return s;
      }
    } else if (flag->kind == Kind::kBool) {
      flag->set = true;
      *static_cast<bool*>(flag->out) = true;
    } else if (i + 1 < argc) {
      if (absl::Status s = Assign(*flag, argv[++i]); !s.ok()) return s;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs a value"));
    }
  }
  return absl::OkStatus();
}

std::string FlagParser::Usage() const {
  std::string out = usage_;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\nflags:\n";
  for (const Flag& f : flags_) {
    std::string lhs = absl::StrCat("  --", f.name);
    if (f.kind != Kind::kBool) lhs += f.kind == Kind::kString ? " STR" : " N";
    if (lhs.size() < 22) lhs.append(22 - lhs.size(), ' ');
    absl::StrAppend(&out, lhs, " ", f.help, "\n");
  }
  return out;
}

}  // namespace flotilla::tools
