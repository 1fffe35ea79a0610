// Who this process is within the job: rank, world size and host. Set once by launch/ at start-up
// and read by error messages and log prefixes ("[rank r/n host]").
#pragma once

#include <string>

namespace selfspec {

struct ProcessIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string host;
};

const ProcessIdentity& process_identity();
void set_process_identity(ProcessIdentity identity);

// "[rank 0/2 host]" — the prefix used by logs and errors.
std::string rank_prefix();

}  // namespace selfspec
