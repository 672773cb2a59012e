// The first stage of the Metal kernel tests (docs/metal.md): writes the MSL source of every kernel
// the tests run (metal_cases.hpp) for the second stage, test_metal_kernels.cpp, to include
// through the shim, and checks the golden files that a reviewer reads.
//
//   msl_generate OUTDIR                 OUTDIR/<kernel>.metal for every kernel, OUTDIR/kernels.inc
//                                       (their #includes) and OUTDIR/registry.inc (one
//                                       TENET_METAL_KERNEL(name) line each); a file is rewritten
//                                       only when its text changes
//   msl_generate --golden DIR [--update]  compares the generated source of a few kernels with
//                                       DIR/<case>.metal (exit 1 and the first differing line on a
//                                       difference); --update rewrites them
#include "metal_cases.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

namespace {

namespace m = tenet::detail::metal;
namespace c = tenet_metal_cases;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_if_changed(const std::string& path, const std::string& text) {
  if (read_file(path) == text) return true;
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

/// The golden cases: a broadcast add, sigmoid (a shared subtree), a fused tree with a scalar, the
/// sum over the last dim and softmax.
std::map<std::string, const m::kernel_source*> golden() {
  return {{"pointwise_add_broadcast", &c::pointwise_kernel_of<c::add, c::operand, c::row_operand>()},
          {"pointwise_sigmoid", &c::pointwise_kernel_of<c::sigmoid, c::operand>()},
          {"pointwise_scaled_exp_plus", &c::pointwise_kernel_of<c::scaled_exp_plus, c::operand>()},
          {"sum_last_dim", &m::reduce_kernel<m::row_reduction::sum, 1, 1>()},
          {"softmax_last_dim", &m::softmax_kernel<1>()}};
}

int check_golden(const std::string& dir, bool update) {
  int bad = 0;
  for (const auto& [name, k] : golden()) {
    const std::string path = dir + "/" + name + ".metal";
    if (update) {
      if (!write_if_changed(path, k->source)) return std::fprintf(stderr, "cannot write %s\n", path.c_str()), 2;
      continue;
    }
    const std::string want = read_file(path);
    if (want == k->source) continue;
    ++bad;
    std::istringstream a(want), b(k->source);
    std::string la, lb;
    int line = 1;
    while (true) {
      const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
      if (!ga && !gb) break;
      if (!ga || !gb || la != lb) {
        std::fprintf(stderr, "%s differs from the generator's output at line %d:\n  golden:    %s\n  generated: %s\n",
                     path.c_str(), line, ga ? la.c_str() : "(end of file)", gb ? lb.c_str() : "(end of file)");
        break;
      }
      ++line;
    }
  }
  if (bad)
    std::fprintf(stderr, "%d golden file(s) differ; if the change is intended, run msl_generate --golden %s --update\n", bad,
                 dir.c_str());
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--golden") return check_golden(argv[2], argc >= 4 && std::string(argv[3]) == "--update");
  if (argc != 2) {
    std::fprintf(stderr, "usage: msl_generate OUTDIR | msl_generate --golden DIR [--update]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::map<std::string, const m::kernel_source*> kernels;  // by name: a kernel two cases share is written once
  c::for_each_case([&]<class C, class... A>() {
    const auto& k = c::pointwise_kernel_of<C, A...>();
    kernels[k.name] = &k;
  });
  for (const auto* k : c::row_kernels()) kernels[k->name] = k;
  // A negative control: softmax without the barrier that keeps the sum's partials from
  // overwriting the max's before every thread read them. The tests expect the emulator to report
  // the race in this generated kernel.
  m::kernel_source control = m::softmax_kernel<1>();
  const std::string barrier(m::reuse_barrier_line);
  const std::size_t at = control.source.find(barrier);
  if (at == std::string::npos) return std::fprintf(stderr, "msl_generate: the softmax kernel has no reuse barrier to remove\n"), 2;
  control.source.erase(at, barrier.size());
  for (std::size_t pos; (pos = control.source.find(control.name)) != std::string::npos;)
    control.source.replace(pos, control.name.size(), "control_softmax_without_reuse_barrier");
  control.name = "control_softmax_without_reuse_barrier";
  kernels[control.name] = &control;
  std::string includes, registry;
  for (const auto& [name, k] : kernels) {
    if (!write_if_changed(dir + "/" + name + ".metal", k->source)) return std::fprintf(stderr, "cannot write %s\n", dir.c_str()), 2;
    includes += "#include \"" + name + ".metal\"\n";
    registry += "TENET_METAL_KERNEL(" + name + ")\n";
  }
  if (!write_if_changed(dir + "/kernels.inc", includes) || !write_if_changed(dir + "/registry.inc", registry)) return 2;
  std::printf("msl_generate: %zu kernels in %s\n", kernels.size(), dir.c_str());
  return 0;
}
