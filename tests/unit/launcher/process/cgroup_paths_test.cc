#include "launcher/process/cgroup_paths.h"

#include <catch2/catch.hpp>

using namespace ddprun::launcher::process;

namespace {

// A hybrid host's mountinfo (this project's CI VM): v1 controllers under a tmpfs, v2 at
// /sys/fs/cgroup/unified.
constexpr const char* kHybrid =
    "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw,discard\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A pure v2 host (systemd): optional fields before the separator.
constexpr const char* kPureV2 =
    "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

}  // namespace

TEST_CASE("the cgroup2 mount is found on hybrid and pure v2 hosts", "[launcher][cgroup]") {
  CHECK(Cgroup2Mounts(kHybrid) == std::vector<Cgroup2Mount>{{"/", "/sys/fs/cgroup/unified"}});
  CHECK(Cgroup2Mounts(kPureV2) == std::vector<Cgroup2Mount>{{"/", "/sys/fs/cgroup"}});
  CHECK(Cgroup2Mounts("").empty());
  CHECK(Cgroup2Mounts("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n").empty());
}

TEST_CASE("a mountinfo line's escapes and odd forms", "[launcher][cgroup]") {
  // A mount point with a space (\040) and a bind-mounted subtree as root; no trailing newline.
  CHECK(Cgroup2Mounts("50 1 0:40 /jobs/a\\040b /mnt/my\\040cg rw - cgroup2 none rw") ==
        std::vector<Cgroup2Mount>{{"/jobs/a b", "/mnt/my cg"}});
  // The type is read after the separator, not from the options or the source.
  CHECK(Cgroup2Mounts("50 1 0:40 / /mnt rw,cgroup2 - ext4 cgroup2 rw\n").empty());
  CHECK(Cgroup2Mounts("50 1 0:40 / /mnt rw cgroup2\n").empty());  // no separator
  CHECK(Cgroup2Mounts("garbage\n - cgroup2\n").empty());
}

TEST_CASE("this process's v2 path is the 0:: line's", "[launcher][cgroup]") {
  CHECK(Cgroup2PathOf("9:name=systemd:/\n4:memory:/x\n0::/\n") == "/");
  CHECK(Cgroup2PathOf("0::/user.slice/user-1000.slice/session-2.scope\n") ==
        "/user.slice/user-1000.slice/session-2.scope");
  CHECK_FALSE(Cgroup2PathOf("4:memory:/x\n"));             // v1 only
  CHECK_FALSE(Cgroup2PathOf("0::/gone (deleted)\n"));      // removed meanwhile
  CHECK_FALSE(Cgroup2PathOf("0::/../../system.slice\n"));  // outside our cgroup namespace
  CHECK_FALSE(Cgroup2PathOf("0::/a/..\n"));
  CHECK_FALSE(Cgroup2PathOf("0::relative\n"));
  CHECK_FALSE(Cgroup2PathOf("0::\n"));
}

TEST_CASE("the cgroup's directory is its path below the mount's root", "[launcher][cgroup]") {
  const std::vector<Cgroup2Mount> root{{"/", "/sys/fs/cgroup"}};
  CHECK(CgroupDirectory(root, "/") == "/sys/fs/cgroup");
  CHECK(CgroupDirectory(root, "/a/b") == "/sys/fs/cgroup/a/b");
  const std::vector<Cgroup2Mount> subtree{{"/jobs", "/mnt/cg"}, {"/", "/sys/fs/cgroup"}};
  CHECK(CgroupDirectory(subtree, "/jobs") == "/mnt/cg");
  CHECK(CgroupDirectory(subtree, "/jobs/7") == "/mnt/cg/7");
  CHECK(CgroupDirectory(subtree, "/jobsx/7") == "/sys/fs/cgroup/jobsx/7");  // not /jobs's
  CHECK_FALSE(CgroupDirectory({{"/jobs", "/mnt/cg"}}, "/other"));
  CHECK_FALSE(CgroupDirectory({}, "/"));
}

TEST_CASE("where the job cgroup goes: the setting, else this process's cgroup",
          "[launcher][cgroup]") {
  const char* self = "0::/a\n";
  CHECK(JobCgroupParent(nullptr, kHybrid, self).parent == "/sys/fs/cgroup/unified/a");
  CHECK(JobCgroupParent("", kPureV2, "0::/\n").parent == "/sys/fs/cgroup");
  CHECK(JobCgroupParent("/srv/cg", "", "").parent == "/srv/cg");
  const auto off = JobCgroupParent("off", kHybrid, self);
  CHECK_FALSE(off.parent);
  CHECK(off.why_none.find("off") != std::string::npos);
  CHECK_FALSE(JobCgroupParent("relative/dir", kHybrid, self).parent);
  const auto v1 = JobCgroupParent(nullptr, "35 31 0:32 / /m rw - cgroup cgroup rw\n", self);
  CHECK_FALSE(v1.parent);
  CHECK(v1.why_none == "no cgroup2 file system is mounted");
  CHECK_FALSE(JobCgroupParent(nullptr, kHybrid, "0::/x (deleted)\n").parent);
  CHECK_FALSE(JobCgroupParent(nullptr, "50 1 0:40 /jobs /m rw - cgroup2 none rw\n", self).parent);
}

TEST_CASE("cgroup.procs and cgroup.events texts", "[launcher][cgroup]") {
  CHECK(ParsePidList("12\n345\n") == std::vector<int>{12, 345});
  CHECK(ParsePidList("") == std::vector<int>{});
  CHECK(ParsePidList("0\n7\nx\n-3\n99999999999\n8") == std::vector<int>{7, 8});
  CHECK(ParsePopulated("populated 1\nfrozen 0\n") == true);
  CHECK(ParsePopulated("populated 0\nfrozen 0\n") == false);
  CHECK_FALSE(ParsePopulated("frozen 0\n"));
}
