// The launcher's entry point: parse the command line, launch, report, and map every outcome to
// an exit code (0 success; the root cause's code; 128+N for signal N; 2 bad input; 1 other).
#pragma once

namespace ddprun::launcher {

int Main(int argc, char** argv);

}  // namespace ddprun::launcher
