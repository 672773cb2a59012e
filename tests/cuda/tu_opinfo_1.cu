// The OpInfo-style table on cuda(0) (tests/opinfo.hpp with TENET_OPINFO_ON_CUDA): the unary rows.
// Without a GPU the program prints why and exits with 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gpu_main.hpp"

#include <cmath>

#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#include "../test_opinfo_unary.cpp"

// This program is compiled with TENET_CPU_KERNELS=0 (tests/CMakeLists.txt): copies still run on the
// CPU, any other expression there is a device_error that says why.
TEST_CASE("TENET_CPU_KERNELS=0: CPU copies run, other CPU expressions are a device_error") {
  const auto x = tenet::tensor<float>({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  const auto xt = x.transpose<0, 1>();
  const auto c = xt.contiguous();  // a copy (strided -> contiguous) on the CPU
  CHECK(c.is_contiguous());
  CHECK(c.data()[1] == 4.f);
  const auto d = tenet::Tensor<double, tenet::shape<tenet::dyn, tenet::dyn>>(tenet::cast<double>(x));  // a cast
  CHECK(d.data()[5] == 6.0);
  CHECK(xt.to(tenet::cuda(0)).cpu().data()[1] == 4.f);
  CHECK_THROWS_AS(tenet::eval(x * 2.f), tenet::device_error);
  CHECK_THROWS_WITH(tenet::eval(exp(x)), Catch::Contains("TENET_CPU_KERNELS=0"));
  CHECK_THROWS_WITH(tenet::eval(tenet::sum(x)), Catch::Contains("no CPU kernels except copies"));
  // the same on the GPU runs
  const auto y = tenet::eval(exp(x.to(tenet::cuda(0)))).cpu();
  CHECK(y.data()[0] == Approx(std::exp(1.f)));
}

int main(int argc, char** argv) { return tenet::test::run_or_skip("tenet CUDA OpInfo tests", argc, argv); }
