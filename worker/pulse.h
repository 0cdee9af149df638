// Progress for ddprun's hang detection (--hang_timeout) from any program: a pulse is one line
// written to the FIFO named by $DDPRUN_PULSE_FILE, which the launcher reads.
#pragma once

namespace ddprun::worker {

// Writes "\n" to $DDPRUN_PULSE_FILE (opened O_WRONLY|O_NONBLOCK|O_CLOEXEC, then closed). Returns
// true when the pulse was delivered; false when the variable is unset or empty, the FIFO has no
// reader (nobody watches), or the write fails. Never blocks, never throws; safe from any thread.
bool Pulse() noexcept;

}  // namespace ddprun::worker
