#include "launcher/process/cgroup_paths.h"

#include <algorithm>
#include <utility>

#include "common/integer.h"

namespace ddprun::launcher::process {
namespace {

// The lines of `text`, without their '\n'.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    lines.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return lines;
}

// The space-separated fields of one line.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t at = 0;
  while ((at = line.find_first_not_of(' ', at)) != std::string_view::npos) {
    const std::size_t end = std::min(line.find(' ', at), line.size());
    words.push_back(line.substr(at, end - at));
    at = end;
  }
  return words;
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012, \134.
std::string Unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && IsOctal(text[i + 1]) && IsOctal(text[i + 2]) &&
        IsOctal(text[i + 3])) {
      out.push_back(static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 +
                                      (text[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// One mountinfo line: "id parent major:minor root mount-point options [optional...] - type
// source super-options".
std::optional<Cgroup2Mount> Cgroup2MountOf(std::string_view line) {
  const std::vector<std::string_view> words = Words(line);
  std::size_t separator = 6;
  while (separator < words.size() && words[separator] != "-") ++separator;
  if (separator + 1 >= words.size() || words[separator + 1] != "cgroup2") return std::nullopt;
  return Cgroup2Mount{Unescape(words[3]), Unescape(words[4])};
}

// `path` relative to `root` ("" for the root itself), when `root` holds it.
std::optional<std::string_view> Below(std::string_view root, std::string_view path) {
  if (root == "/") return path == "/" ? std::string_view() : path;
  if (path.substr(0, root.size()) != root) return std::nullopt;
  const std::string_view rest = path.substr(root.size());
  if (!rest.empty() && rest.front() != '/') return std::nullopt;  // /a is not under /ab
  return rest;
}

}  // namespace

std::vector<Cgroup2Mount> Cgroup2Mounts(std::string_view mountinfo) {
  std::vector<Cgroup2Mount> mounts;
  for (const std::string_view line : Lines(mountinfo)) {
    if (auto mount = Cgroup2MountOf(line)) mounts.push_back(std::move(*mount));
  }
  return mounts;
}

std::optional<std::string> Cgroup2PathOf(std::string_view proc_cgroup) {
  constexpr std::string_view kV2 = "0::";
  constexpr std::string_view kDeleted = " (deleted)";
  for (const std::string_view line : Lines(proc_cgroup)) {
    if (line.substr(0, kV2.size()) != kV2) continue;
    const std::string_view path = line.substr(kV2.size());
    const bool deleted =
        path.size() >= kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted;
    const bool up = path == "/.." || path.find("/../") != std::string_view::npos ||
                    (path.size() >= 3 && path.substr(path.size() - 3) == "/..");
    if (path.empty() || path.front() != '/' || deleted || up) return std::nullopt;
    return std::string(path);
  }
  return std::nullopt;
}

std::optional<std::string> CgroupDirectory(const std::vector<Cgroup2Mount>& mounts,
                                           std::string_view path) {
  for (const auto& mount : mounts) {
    if (const auto rest = Below(mount.root, path)) return mount.mount_point + std::string(*rest);
  }
  return std::nullopt;
}

JobCgroupPlace JobCgroupParent(const char* setting, std::string_view mountinfo,
                               std::string_view proc_cgroup) {
  const std::string_view chosen = setting ? setting : "";
  if (chosen == "off") return {std::nullopt, "DDPRUN_JOB_CGROUP=off"};
  if (!chosen.empty()) {
    if (chosen.front() == '/') return {std::string(chosen), ""};
    return {std::nullopt, "DDPRUN_JOB_CGROUP is neither off nor an absolute path"};
  }
  const std::vector<Cgroup2Mount> mounts = Cgroup2Mounts(mountinfo);
  if (mounts.empty()) return {std::nullopt, "no cgroup2 file system is mounted"};
  const auto path = Cgroup2PathOf(proc_cgroup);
  if (!path) return {std::nullopt, "this process has no usable cgroup v2 path"};
  auto directory = CgroupDirectory(mounts, *path);
  if (!directory) return {std::nullopt, "no cgroup2 mount shows " + *path};
  return {std::move(directory), ""};
}

std::vector<int> ParsePidList(std::string_view procs) {
  std::vector<int> pids;
  for (const std::string_view line : Lines(procs)) {
    const auto pid = ParseInt(line);
    if (pid && *pid >= 1 && std::in_range<int>(*pid)) pids.push_back(static_cast<int>(*pid));
  }
  return pids;
}

std::optional<bool> ParsePopulated(std::string_view events) {
  for (const std::string_view line : Lines(events)) {
    const std::vector<std::string_view> words = Words(line);
    if (words.size() == 2 && words[0] == "populated") return words[1] != "0";
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher::process
