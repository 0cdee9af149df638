// argparse's matching rules, applied before CLI11 (which has no prefix matching): options stop
// at the first positional, long options match by unambiguous prefix (exact match first, "-" and
// "_" equal), short options take "-r1", "-r=1" or "-r 1", and one lone "--" is dropped.
#include <algorithm>
#include <cctype>

#include "cli/cli_internal.h"
#include "common/errors.h"

namespace ddprun::cli {
namespace {

std::string Canonical(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// argparse takes "-1" and "-.5" as values, not options, when no option looks like a number.
bool IsNegativeNumber(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  const auto digits = std::count_if(arg.begin() + 1, arg.end(), ::isdigit);
  const auto dots = std::count(arg.begin() + 1, arg.end(), '.');
  return digits > 0 && dots <= 1 && digits + dots == static_cast<long>(arg.size()) - 1;
}

bool LooksLikeOption(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !IsNegativeNumber(arg);
}

std::string Unrecognized(const std::string& arg) {
  return "unrecognized argument " + arg + "; see ddprun --help";
}

std::string JoinNames(const std::vector<const OptionSpec*>& specs) {
  std::string joined;
  for (const OptionSpec* spec : specs) {
    joined += (joined.empty() ? "--" : ", --") + std::string(spec->dest);
  }
  return joined;
}

const OptionSpec& MatchLong(const std::string& name, const std::string& arg) {
  const std::string key = Canonical(name.substr(2));
  if (key.empty()) throw UsageError(Unrecognized(arg));
  if (const OptionSpec* exact = FindOption(key)) return *exact;
  std::vector<const OptionSpec*> candidates;
  for (const OptionSpec& spec : Options()) {
    if (std::string(spec.dest).starts_with(key)) candidates.push_back(&spec);
  }
  if (candidates.empty()) throw UsageError(Unrecognized(arg));
  if (candidates.size() > 1) {
    throw UsageError("ambiguous option: " + name + " could match " + JoinNames(candidates));
  }
  return *candidates.front();
}

const OptionSpec& MatchShort(char letter, const std::string& arg) {
  for (const OptionSpec& spec : Options()) {
    if (spec.short_name != 0 && spec.short_name == letter) return spec;
  }
  throw UsageError(Unrecognized(arg));
}

// Walks the options before the training script, emitting canonical forms.
class Normaliser {
 public:
  explicit Normaliser(const std::vector<std::string>& args) : args_(args) {}

  SplitArgs Run() {
    bool dash_dropped = false;
    while (next_ < args_.size() && !out_.script) {
      const std::string& arg = args_[next_++];
      if (arg == "--") {
        dash_dropped = true;
        TakeScript();
      } else if (arg.starts_with("--")) {
        Long(arg);
      } else if (LooksLikeOption(arg)) {
        Short(arg);
      } else {
        out_.script = arg;
      }
    }
    if (out_.script && !dash_dropped && next_ < args_.size() && args_[next_] == "--") ++next_;
    out_.script_args.assign(args_.begin() + static_cast<long>(next_), args_.end());
    return std::move(out_);
  }

 private:
  void TakeScript() {
    if (next_ < args_.size()) out_.script = args_[next_++];
  }

  void Long(const std::string& arg) {
    const auto equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const OptionSpec& spec = MatchLong(name, arg);
    std::optional<std::string> value;
    if (equals != std::string::npos) value = arg.substr(equals + 1);
    Emit(spec, value);
  }

  void Short(const std::string& arg) {
    const OptionSpec& spec = MatchShort(arg[1], arg);
    std::string rest = arg.substr(2);
    if (spec.metavar == nullptr) {
      Emit(spec, std::nullopt);
      if (!rest.empty()) Short("-" + rest);  // "-mh": clustered flags
      return;
    }
    if (rest.starts_with('=')) rest.erase(0, 1);
    Emit(spec, rest.empty() && arg.size() == 2 ? std::nullopt : std::optional(rest));
  }

  void Emit(const OptionSpec& spec, std::optional<std::string> value) {
    const std::string canonical = std::string("--") + spec.dest;
    if (spec.metavar == nullptr) {
      if (value)
        throw UsageError("argument " + canonical + ": ignored explicit argument '" + *value + "'");
      out_.options.push_back(canonical);
      return;
    }
    if (!value) {
      if (next_ >= args_.size() || LooksLikeOption(args_[next_])) {
        throw UsageError("argument " + canonical + ": expected one argument (" + spec.metavar +
                         ")");
      }
      value = args_[next_++];
    }
    out_.options.push_back(canonical);
    out_.options.push_back(*value);  // a separate token: CLI11 takes it whatever it looks like
  }

  const std::vector<std::string>& args_;
  std::size_t next_ = 0;
  SplitArgs out_;
};

}  // namespace

SplitArgs NormaliseArgs(const std::vector<std::string>& args) { return Normaliser(args).Run(); }

}  // namespace ddprun::cli
