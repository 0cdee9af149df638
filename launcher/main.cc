// ddprun: a native drop-in replacement for torchrun. All the work is in launcher/run.h.
#include "launcher/run.h"

int main(int argc, char** argv) { return ddprun::launcher::Main(argc, argv); }
