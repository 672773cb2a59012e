// tenet::warm_up, get_num_threads, set_num_threads (include/tenet/threads.hpp), and a small
// convolution staying on the calling thread (the conv kernel's work grain).
#include <tenet/tenet.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace tenet;

TEST_CASE("threads: warm_up runs every thread; set_num_threads checks its argument") {
  const int n = get_num_threads();
  REQUIRE(n >= 1);
  CHECK(warm_up() == n);
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  CHECK(warm_up() == 1);
  set_num_threads(n);
  CHECK(get_num_threads() == n);
  try {
    set_num_threads(0);
    FAIL("accepted 0");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("got 0") != std::string::npos);
  }
  CHECK(get_num_threads() == n);
}

TEST_CASE("threads: a convolution gives the same values on one thread and on all") {
  // 64 images: large enough for the image-parallel path with several threads (4 MFLOP and more),
  // and the same problem on one thread; the per-image GEMMs are the same, so the values are equal
  manual_seed(11);
  const auto x = randn<float, shape<dyn, 8, 16, 16>>(64);
  const auto w = randn<float, shape<16, 8, 3, 3>>();
  Tensor<float, shape<dyn, 16, dyn, dyn>> all = conv2d(x, w, {.padding = 1});
  const int n = get_num_threads();
  set_num_threads(1);
  Tensor<float, shape<dyn, 16, dyn, dyn>> one = conv2d(x, w, {.padding = 1});
  set_num_threads(n);
  REQUIRE(all.sizes() == one.sizes());
  bool same = true;
  for (std::int64_t i = 0; i < all.numel(); ++i) same = same && all.data()[i] == one.data()[i];
  CHECK(same);
}
