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
/// sum over the last dim, softmax, cumsum, gather, scatter_add and the GEMM with its epilogue.
std::map<std::string, const m::kernel_source*> golden() {
  return {{"pointwise_add_broadcast", &c::pointwise_kernel_of<c::add, c::operand, c::row_operand>()},
          {"pointwise_sigmoid", &c::pointwise_kernel_of<c::sigmoid, c::operand>()},
          {"pointwise_scaled_exp_plus", &c::pointwise_kernel_of<c::scaled_exp_plus, c::operand>()},
          {"sum_last_dim", &m::reduce_kernel<m::row_reduction::sum, 1, 1>()},
          {"softmax_last_dim", &m::softmax_kernel<1>()},
          {"cumsum_rank2", &m::scan_kernel<tenet::prim::sum_kind, 2>()},
          {"gather_rank2", &m::gather_kernel<2, float>()},
          {"scatter_add_rank2", &m::scatter_kernel<tenet::prim::scatter_op::sum, 2, float>()},
          {"gemm_bias_gelu_tanh", &m::gemm_kernel<float, m::gemm_epilogue::bias_gelu_tanh>()}};
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
  // The scan and indexing kernels, for test_metal_scan_index.cpp, and their negative control:
  // scatter_add by a thread per index element with a plain += instead of the atomic add. The
  // tests expect the emulator to report the device memory race where two threads add at one
  // position.
  std::map<std::string, const m::kernel_source*> scan_index;
  for (const auto* k : c::scan_index_kernels()) scan_index[k->name] = k;
  m::kernel_source plain = m::scatter_add_atomic_kernel<2, float>();
  const std::pair<std::string, std::string> edits[] = {
      {"tenet_buffer<atomic_float> out", "tenet_buffer<float> out"},
      {"atomic_fetch_add_explicit(out + (", "out[("},
      {"), src[so], memory_order_relaxed);", ")] += src[so];"}};
  for (const auto& [from, to] : edits) {
    const std::size_t at = plain.source.find(from);
    if (at == std::string::npos) return std::fprintf(stderr, "msl_generate: the atomic scatter_add kernel has no '%s'\n", from.c_str()), 2;
    plain.source.replace(at, from.size(), to);
  }
  for (std::size_t pos; (pos = plain.source.find(plain.name)) != std::string::npos;)
    plain.source.replace(pos, plain.name.size(), "control_scatter_add_without_atomics");
  plain.name = "control_scatter_add_without_atomics";
  scan_index[plain.name] = &plain;

  const auto write_set = [&](const std::map<std::string, const m::kernel_source*>& set, const std::string& suffix) {
    std::string includes, registry;
    for (const auto& [name, k] : set) {
      if (!write_if_changed(dir + "/" + name + ".metal", k->source)) return false;
      includes += "#include \"" + name + ".metal\"\n";
      registry += "TENET_METAL_KERNEL(" + name + ")\n";
    }
    return write_if_changed(dir + "/kernels" + suffix + ".inc", includes) && write_if_changed(dir + "/registry" + suffix + ".inc", registry);
  };
  std::map<std::string, const m::kernel_source*> gemm;
  for (const auto* k : c::gemm_kernels()) gemm[k->name] = k;
  if (!write_set(kernels, "") || !write_set(scan_index, "_scan_index") || !write_set(gemm, "_gemm")) return std::fprintf(stderr, "cannot write in %s\n", dir.c_str()), 2;
  std::printf("msl_generate: %zu kernels in %s\n", kernels.size() + scan_index.size() + gemm.size(), dir.c_str());
  return 0;
}
