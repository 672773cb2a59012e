// Uses tenet::dist through the installed package's dist component (built by the install test, not
// run: it needs mpirun). Under `mpirun -np N` it all-reduces the ranks and checks the sum.
#include <tenet/dist.hpp>

int main() {
  tenet::dist::init_process_group();
  tenet::Tensor<std::int64_t, tenet::shape<1>> t({1});
  t(0) = tenet::dist::rank();
  tenet::dist::all_reduce(t);
  const int n = tenet::dist::world_size();
  const bool ok = t(0) == static_cast<std::int64_t>(n) * (n - 1) / 2;
  tenet::dist::destroy_process_group();
  return ok ? 0 : 1;
}
