// Graceful stop on SIGTERM / SIGINT / SIGUSR1: what SLURM sends on preemption or at the time
// limit (`--signal`), what mpirun forwards when it is itself terminated, and Ctrl-C. The handler
// only records the signal; rank 0 polls stop_requested() between decoding steps and broadcasts a
// stop, so every rank leaves the loop at the same step, results already produced are written, and
// the job exits with 128 + signal. A second signal of the same kind ends the process at once
// (default disposition), so an impatient Ctrl-C still works.
#pragma once

namespace selfspec {

// Installs the handlers (idempotent). Called by launch/ for commands that run a job.
void install_stop_signal_handlers();

// True once a stop signal arrived (or request_stop was called).
bool stop_requested();
// The signal that requested the stop (0 when none).
int stop_signal();
// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
const char* stop_signal_name(int signal);

// For tests and for code that wants the same path without a signal.
void request_stop(int signal);
void clear_stop_request();

// Process exit code of a run stopped by `signal`: 128 + signal, the shell's convention.
int stop_exit_code(int signal);

}  // namespace selfspec
