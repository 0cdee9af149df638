// A minimal C++ "trainer" on ddprun's worker library: it joins the job ddprun started (RANK,
// WORLD_SIZE, MASTER_ADDR, ... as PyTorch's env:// init reads them), sums a gradient-like
// vector over every rank with the bundled allreduce, shares a value through the job's c10d
// store, checks both and prints one line per rank. Exit 0 when both are right, 1 otherwise.
//   ddprun --standalone --nproc-per-node=4 ./allreduce_example
#include <ddprun/common/version.h>
#include <ddprun/worker/program.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  using namespace ddprun::worker;
  return RunProgram("allreduce_example", [] {
    Job job = Job::Join(BackendKind::kCpu, std::chrono::seconds(60));
    const int rank = job.env.rank;
    const int world = job.env.world_size;

    // Every rank contributes rank + 1 in each element: the sum is world * (world + 1) / 2.
    std::vector<float> gradient(1024, static_cast<float>(rank + 1));
    auto buffer = job.comm->Allocate(gradient.size() * sizeof(float));
    buffer->Upload(gradient.data(), gradient.size() * sizeof(float));
    job.comm->Allreduce(*buffer, gradient.size(), DataType::kFloat);
    buffer->Download(gradient.data(), gradient.size() * sizeof(float));
    const float expected = static_cast<float>(world * (world + 1) / 2);
    bool ok = true;
    for (float value : gradient) ok = ok && value == expected;

    // The store: rank 0 publishes, everyone reads (Get waits until the key exists).
    auto store = job.store->Scoped("example");
    if (rank == 0) store->SetString("greeting", "hello from rank 0");
    const std::string greeting = store->GetString("greeting");
    ok = ok && greeting == "hello from rank 0";

    job.comm->Barrier();
    std::printf("%s %s: allreduce sum %g (expected %g), store says '%s' [%s]\n", job.Who().c_str(),
                ok ? "ok" : "WRONG", gradient.front(), expected, greeting.c_str(),
                ddprun::VersionLine("libddprun_worker").c_str());
    job.Finish();
    return ok ? 0 : 1;
  });
}
