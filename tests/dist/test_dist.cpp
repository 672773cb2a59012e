// tenet::dist on MPI (docs/distributed.md), run by CTest under mpirun with 2 and 4 ranks.
//
// Every rank runs every test case in the same order (the collectives pair up across ranks); each
// rank computes the expected values itself from the formula every rank used for its input, and
// checks its own result exactly. Modes selected by the first argument run one scenario instead of
// the Catch2 session:
//   --timeout      rank 0 waits in all_reduce for a rank that never comes: dist_error after 1 s
//   --early-exit   the last rank returns from main at once: every other rank's all_reduce fails
//                  with a dist_error naming it (the goodbye channel), well before the timeout
// Also here (no MPI needed, but one test program is cheaper to build than two): the autograd
// post-accumulate-grad hooks and queue_callback that DistributedDataParallel is built on.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tenet/tenet.hpp>
#include <tenet/dist.hpp>

using namespace tenet;
namespace td = tenet::dist;

namespace {

int R() { return td::rank(); }
int W() { return td::world_size(); }

// A small value of rank r at element i, in 1..3 (so sums and products over 4 ranks fit in int8
// and are exact in float16 / bfloat16); bool: alternating by rank and element.
template <class T>
T value(int r, std::int64_t i) {
  if constexpr (std::is_same_v<T, bool>) return ((r + i) % 2) == 0;
  else return T(static_cast<float>((r + i) % 3 + 1));
}
template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? 1.0 : 0.0;
  else return static_cast<double>(static_cast<float>(v));
}
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return T(static_cast<float>(v));
}

/// The reduction of value<T>(r, i) over the given ranks, computed here.
template <class T>
T expected(td::reduce_op op, const std::vector<int>& ranks, std::int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    bool any = false, all = true;
    for (int r : ranks) any = any || value<T>(r, i), all = all && value<T>(r, i);
    return op == td::reduce_op::sum || op == td::reduce_op::max ? any : all;
  } else {
    double acc = op == td::reduce_op::prod ? 1 : op == td::reduce_op::max ? -1e300 : op == td::reduce_op::min ? 1e300 : 0;
    for (int r : ranks) {
      const double v = as_double(value<T>(r, i));
      if (op == td::reduce_op::sum || op == td::reduce_op::avg) acc += v;
      else if (op == td::reduce_op::prod) acc *= v;
      else if (op == td::reduce_op::max) acc = std::max(acc, v);
      else acc = std::min(acc, v);
    }
    if (op == td::reduce_op::avg) acc /= static_cast<double>(ranks.size());
    return from_double<T>(acc);
  }
}

std::vector<int> all_ranks() {
  std::vector<int> r(static_cast<std::size_t>(W()));
  for (int i = 0; i < W(); ++i) r[static_cast<std::size_t>(i)] = i;
  return r;
}

template <class T>
Tensor<T, shape<dyn>> filled(int r, std::int64_t n, std::int64_t start = 0) {
  Tensor<T, shape<dyn>> t({n});
  for (std::int64_t i = 0; i < n; ++i) t(i) = value<T>(r, start + i);
  return t;
}

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return a.bits == b.bits;
  else return a == b;
}

#define TENET_ALL_DTYPES bool, std::uint8_t, std::int8_t, std::int16_t, std::int32_t, std::int64_t, float16, bfloat16, float, double

}  // namespace

TEMPLATE_TEST_CASE("all_reduce: every op, every dtype", "[dist]", TENET_ALL_DTYPES) {
  using T = TestType;
  const std::int64_t n = 37;
  for (auto op : {td::reduce_op::sum, td::reduce_op::max, td::reduce_op::min, td::reduce_op::prod, td::reduce_op::avg}) {
    CAPTURE(td::name(op));
    auto t = filled<T>(R(), n);
    if (op == td::reduce_op::avg && !is_floating(dtype_of<T>)) {
      CHECK_THROWS_AS(td::all_reduce(t, op), dtype_error);
      continue;
    }
    td::all_reduce(t, op);
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(t(i), expected<T>(op, all_ranks(), i)));
  }
}

TEMPLATE_TEST_CASE("broadcast and reduce, every dtype", "[dist]", TENET_ALL_DTYPES) {
  using T = TestType;
  const std::int64_t n = 21;
  const int src = W() - 1;
  auto t = filled<T>(R(), n);
  td::broadcast(t, src);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(t(i), value<T>(src, i)));

  auto u = filled<T>(R(), n);
  td::reduce(u, 0, td::reduce_op::sum);
  for (std::int64_t i = 0; i < n; ++i)
    REQUIRE(same(u(i), R() == 0 ? expected<T>(td::reduce_op::sum, all_ranks(), i) : value<T>(R(), i)));  // others unchanged
}

TEMPLATE_TEST_CASE("all_gather, reduce_scatter, all_to_all, every dtype", "[dist]", TENET_ALL_DTYPES) {
  using T = TestType;
  const std::int64_t n = 5;
  const int w = W();
  SECTION("all_gather into a list") {
    std::vector<Tensor<T, shape<dyn>>> out;
    for (int i = 0; i < w; ++i) out.emplace_back(typename Tensor<T, shape<dyn>>::sizes_type{n});
    td::all_gather(out, filled<T>(R(), n));
    for (int r = 0; r < w; ++r)
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(out[static_cast<std::size_t>(r)](i), value<T>(r, i)));
  }
  SECTION("all_gather_into_tensor, concatenated and stacked") {
    Tensor<T, shape<dyn>> cat({n * w});
    td::all_gather_into_tensor(cat, filled<T>(R(), n));
    Tensor<T, shape<dyn, dyn>> stacked({w, n});
    td::all_gather_into_tensor(stacked, filled<T>(R(), n));
    for (int r = 0; r < w; ++r)
      for (std::int64_t i = 0; i < n; ++i) {
        REQUIRE(same(cat(r * n + i), value<T>(r, i)));
        REQUIRE(same(stacked(r, i), value<T>(r, i)));
      }
  }
  SECTION("reduce_scatter_tensor and reduce_scatter") {
    // rank r's input element k is value(r, k); rank r gets block r reduced over the ranks
    for (auto op : {td::reduce_op::sum, td::reduce_op::max}) {
      Tensor<T, shape<dyn>> out({n});
      td::reduce_scatter_tensor(out, filled<T>(R(), n * w), op);
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(out(i), expected<T>(op, all_ranks(), R() * n + i)));
      std::vector<Tensor<T, shape<dyn>>> in;
      for (int b = 0; b < w; ++b) in.push_back(filled<T>(R(), n, b * n));
      Tensor<T, shape<dyn>> out2({n});
      td::reduce_scatter(out2, in, op);
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(out2(i), expected<T>(op, all_ranks(), R() * n + i)));
    }
  }
  SECTION("all_to_all and all_to_all_single") {
    // rank r sends block d (values of (r, 100 d + i)) to rank d
    std::vector<Tensor<T, shape<dyn>>> in, out;
    for (int d = 0; d < w; ++d) {
      in.push_back(filled<T>(R(), n, 100 * d));
      out.emplace_back(typename Tensor<T, shape<dyn>>::sizes_type{n});
    }
    td::all_to_all(out, in);
    for (int s = 0; s < w; ++s)
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(out[static_cast<std::size_t>(s)](i), value<T>(s, 100 * R() + i)));
    Tensor<T, shape<dyn, dyn>> single_in({w, n}), single_out({w, n});
    for (int d = 0; d < w; ++d)
      for (std::int64_t i = 0; i < n; ++i) single_in(d, i) = value<T>(R(), 100 * d + i);
    td::all_to_all_single(single_out, single_in);
    for (int s = 0; s < w; ++s)
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(single_out(s, i), value<T>(s, 100 * R() + i)));
  }
  SECTION("send and recv around a ring") {
    const int next = (R() + 1) % w, prev = (R() + w - 1) % w;
    Tensor<T, shape<dyn>> got({n});
    auto s = td::isend(filled<T>(R(), n), next, 3);
    td::recv(got, prev, 3);
    s.wait();
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(same(got(i), value<T>(prev, i)));
  }
}

TEST_CASE("barrier, async work, sub-groups", "[dist]") {
  td::barrier();
  SECTION("async all_reduce: work::wait and is_completed") {
    auto a = filled<float>(R(), 1000);
    auto b = filled<std::int64_t>(R(), 10);
    auto wa = td::all_reduce(a, td::reduce_op::sum, {.async_op = true});
    auto wb = td::all_reduce(b, td::reduce_op::max, {.async_op = true});
    wb.wait();
    while (!wa.is_completed()) std::this_thread::yield();
    wa.wait();  // again: nothing happens
    for (std::int64_t i = 0; i < 1000; ++i) REQUIRE(a(i) == expected<float>(td::reduce_op::sum, all_ranks(), i));
    for (std::int64_t i = 0; i < 10; ++i) REQUIRE(b(i) == expected<std::int64_t>(td::reduce_op::max, all_ranks(), i));
    td::barrier({.async_op = true}).wait();
  }
  SECTION("a sub-group of the even ranks, and one of ranks 0 and 1") {
    std::vector<int> evens;
    for (int r = 0; r < W(); r += 2) evens.push_back(r);
    auto g = td::new_group(evens);
    auto g01 = td::new_group({1, 0});
    REQUIRE(g01.ranks() == std::vector<int>{0, 1});
    REQUIRE(g01.rank() == (R() < 2 ? R() : -1));
    if (g.is_member()) {
      REQUIRE(g.rank() == R() / 2);
      REQUIRE(g.size() == static_cast<int>(evens.size()));
      auto t = filled<std::int32_t>(R(), 9);
      td::all_reduce(t, td::reduce_op::sum, {.group = g});
      for (std::int64_t i = 0; i < 9; ++i) REQUIRE(t(i) == expected<std::int32_t>(td::reduce_op::sum, evens, i));
      auto u = filled<double>(R(), 4);
      td::broadcast(u, evens.back(), {.group = g});
      for (std::int64_t i = 0; i < 4; ++i) REQUIRE(u(i) == value<double>(evens.back(), i));
      // a rank outside the group as src: a clear error, before any communication
      if (W() > 1) CHECK_THROWS_WITH(td::broadcast(u, 1, {.group = g}), Catch::Contains("rank 1 is not in the process group"));
    } else {
      auto t = filled<std::int32_t>(R(), 9);
      CHECK_THROWS_WITH(td::all_reduce(t, td::reduce_op::sum, {.group = g}), Catch::Contains("not a member"));
    }
    if (g01.is_member()) {
      auto t = filled<bfloat16>(R(), 6);
      td::all_reduce(t, td::reduce_op::avg, {.group = g01});
      for (std::int64_t i = 0; i < 6; ++i) REQUIRE(same(t(i), expected<bfloat16>(td::reduce_op::avg, {0, 1}, i)));
    }
    td::barrier();
  }
}

TEST_CASE("all_reduce of a tensor larger than one 4 MiB segment", "[dist]") {
  // 1.5 Mi int32 = 6 MiB: two segments, the second partial
  const std::int64_t n = 3 * (std::int64_t{1} << 19) + 5;
  auto t = filled<std::int32_t>(R(), n);
  td::all_reduce(t, td::reduce_op::sum);
  for (std::int64_t i = 0; i < n; ++i)
    if (t(i) != expected<std::int32_t>(td::reduce_op::sum, all_ranks(), i)) FAIL("element " << i << " is " << t(i));
  auto h = filled<bfloat16>(R(), (std::int64_t{1} << 21) + 3);  // 4 MiB + 6 bytes of bfloat16
  td::all_reduce(h, td::reduce_op::max);
  for (std::int64_t i = 0; i < h.numel(); ++i)
    if (!same(h(i), expected<bfloat16>(td::reduce_op::max, all_ranks(), i))) FAIL("bfloat16 element " << i);
}

TEST_CASE("non-contiguous tensors are copied in and written back", "[dist]") {
  // a transposed view: all_reduce must reduce element (i, j) with element (i, j) of the others
  Tensor<float, shape<dyn, dyn>> base({3, 4});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) base(i, j) = value<float>(R(), 4 * i + j);
  auto tv = base.t();  // [4, 3], strides (1, 4)
  REQUIRE_FALSE(tv.is_contiguous());
  td::all_reduce(tv, td::reduce_op::sum);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) REQUIRE(base(i, j) == expected<float>(td::reduce_op::sum, all_ranks(), 4 * i + j));

  // every other element of a buffer as the all_gather output: the gaps are left alone
  const std::int64_t n = 3;
  Tensor<std::int16_t, shape<dyn>> wide({2 * n * W()});
  for (std::int64_t i = 0; i < wide.numel(); ++i) wide(i) = -7;
  auto strided = wide.slice<0>(0, 2 * n * W(), 2);
  td::all_gather_into_tensor(strided, filled<std::int16_t>(R(), n));
  for (int r = 0; r < W(); ++r)
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(wide(2 * (r * n + i)) == value<std::int16_t>(r, i));
      REQUIRE(wide(2 * (r * n + i) + 1) == -7);
    }
  // an output whose elements overlap cannot be written back: refused before any communication
  Tensor<float, shape<1>> one({1});
  auto expanded = one.expand<5>();
  CHECK_THROWS_WITH(td::all_reduce(expanded), Catch::Contains("overlapping elements"));
}

TEST_CASE("wrong sizes within a rank are shape_errors with both shapes; across ranks, dist_errors", "[dist]") {
  std::vector<Tensor<float, shape<dyn>>> out;
  for (int i = 0; i < W(); ++i) out.emplace_back(typename Tensor<float, shape<dyn>>::sizes_type{4});
  CHECK_THROWS_WITH(td::all_gather(out, filled<float>(R(), 5)),
                    Catch::Contains("has sizes [4]") && Catch::Contains("the input has sizes [5]"));
  out.pop_back();
  CHECK_THROWS_AS(td::all_gather(out, filled<float>(R(), 4)), value_error);
  Tensor<float, shape<dyn>> cat({3});
  CHECK_THROWS_AS(td::all_gather_into_tensor(cat, filled<float>(R(), 2)), shape_error);
  // all_gather_into_tensor in place (the input is this rank's block of the output), as torch allows
  Tensor<std::int64_t, shape<dyn>> whole({3 * W()});
  auto mine = whole.narrow<0>(3 * R(), 3);
  for (std::int64_t i = 0; i < 3; ++i) mine(i) = value<std::int64_t>(R(), i);
  td::all_gather_into_tensor(whole, mine);
  for (int q = 0; q < W(); ++q)
    for (std::int64_t i = 0; i < 3; ++i) REQUIRE(whole(3 * q + i) == value<std::int64_t>(q, i));
  // other overlaps are refused before any communication
  if (W() > 1) CHECK_THROWS_WITH(td::all_gather_into_tensor(whole, whole.narrow<0>(1, 3)),
                                 Catch::Contains("overlaps the output"));
  CHECK_THROWS_WITH(td::reduce_scatter_tensor(whole.narrow<0>(0, 3), whole), Catch::Contains("overlaps the input"));
  // across ranks: rank 0 has one element more; with the consistency check every rank throws
  td::set_check_consistency(true);
  auto t = filled<float>(R(), R() == 0 ? 5 : 4);
  CHECK_THROWS_WITH(td::all_reduce(t), Catch::Contains("disagree") && Catch::Contains("rank 0: float32, 5 elements"));
  auto ok = filled<float>(R(), 4);
  td::all_reduce(ok);  // the check passes when the ranks agree
  REQUIRE(ok(1) == expected<float>(td::reduce_op::sum, all_ranks(), 1));
  td::set_check_consistency(false);
}

TEST_CASE("collectives refuse a tensor tracked by autograd while grad mode is on", "[dist][autograd]") {
  // collectives write in place and are not recorded: as torch's in-place ops on a leaf that requires grad
  Tensor<float, shape<dyn>> leaf = filled<float>(R(), 4);
  leaf.requires_grad_();
  CHECK_THROWS_WITH(td::all_reduce(leaf), Catch::Contains("tenet::dist::all_reduce") &&
                                              Catch::Contains("autograd leaf that requires grad") &&
                                              Catch::Contains("no_grad"));
  CHECK_THROWS_WITH(td::broadcast(leaf, 0), Catch::Contains("tenet::dist::broadcast"));  // the root too: no hang
  Tensor<float, shape<dyn>> computed = leaf * 2.0f;
  CHECK_THROWS_WITH(td::reduce(computed, 0), Catch::Contains("tenet::dist::reduce") &&
                                                 Catch::Contains("computed from tensors that require grad"));
  Tensor<float, shape<dyn>> gathered({4 * W()});
  gathered.requires_grad_();
  CHECK_THROWS_WITH(td::all_gather_into_tensor(gathered, filled<float>(R(), 4)),
                    Catch::Contains("tenet::dist::all_gather_into_tensor"));
  Tensor<float, shape<dyn>> shard({4});
  shard.requires_grad_();
  CHECK_THROWS_WITH(td::reduce_scatter_tensor(shard, filled<float>(R(), 4 * W())),
                    Catch::Contains("tenet::dist::reduce_scatter_tensor"));
  // a tracked tensor as an input only (nothing written into it) is fine
  Tensor<float, shape<dyn>> out({4 * W()});
  td::all_gather_into_tensor(out, leaf);
  for (int q = 0; q < W(); ++q) REQUIRE(out(4 * q + 1) == value<float>(q, 1));
  {
    no_grad off;  // as an optimizer step: allowed, the version is bumped
    td::all_reduce(leaf);
  }
  REQUIRE(leaf(1) == expected<float>(td::reduce_op::sum, all_ranks(), 1));
  td::all_reduce(leaf.detach());  // a detached handle shares the storage
  REQUIRE(leaf(1) == W() * expected<float>(td::reduce_op::sum, all_ranks(), 1));
}

// --- autograd hooks ---------------------------------------------------------------------------

TEST_CASE("post-accumulate-grad hooks run once per backward, after the last gradient", "[dist][autograd]") {
  Tensor<double, shape<3>> w({3});
  w.fill_(2.0);
  w.requires_grad_();
  Tensor<double, shape<3>> unused({3});
  unused.fill_(1.0);
  unused.requires_grad_();
  int calls = 0, unused_calls = 0, callbacks = 0;
  std::vector<double> seen;
  auto h = autograd::register_post_accumulate_grad_hook(w, [&] {
    ++calls;
    seen.push_back(w.grad()(0));
    autograd::queue_callback([&] { ++callbacks; });
  });
  auto hu = autograd::register_post_accumulate_grad_hook(unused, [&] { ++unused_calls; });
  Tensor<double, shape<>> a = sum(w * w), b = sum(w * 3.0);  // w reaches the loss through two nodes
  Tensor<double, shape<>> loss = a + b;
  loss.backward();
  REQUIRE(calls == 1);
  REQUIRE(seen.back() == 7.0);  // 2 w + 3: the hook saw the whole gradient
  REQUIRE(callbacks == 1);
  REQUIRE(unused_calls == 0);   // not part of this graph
  Tensor<double, shape<>> loss2 = sum(w * 1.0) + sum(unused * 0.0);
  loss2.backward();             // accumulates: 7 + 1
  REQUIRE(calls == 2);
  REQUIRE(seen.back() == 8.0);
  REQUIRE(unused_calls == 1);
  h.remove();
  Tensor<double, shape<>> loss3 = sum(w * 1.0);
  loss3.backward();
  REQUIRE(calls == 2);
  // autograd::grad does not accumulate into .grad: no hook
  hu.remove();
  (void)autograd::grad(Tensor<double, shape<>>(sum(unused * 2.0)), unused);
  REQUIRE(unused_calls == 1);
  CHECK_THROWS_AS(autograd::queue_callback([] {}), value_error);
  Tensor<double, shape<3>> computed = w * 2.0;
  CHECK_THROWS_WITH(autograd::register_post_accumulate_grad_hook(computed, [] {}), Catch::Contains("not a leaf"));
}

// --- DistributedDataParallel --------------------------------------------------------------------

namespace {
template <class T>
struct Net : nn::Module {
  nn::Linear<6, 16, true, T> fc1;
  nn::Linear<16, 8, true, T> fc2;
  nn::Linear<8, 3, true, T> fc3;
  TENET_MODULE(fc1, fc2, fc3);
  template <Expression X>
  auto operator()(const X& x) const {
    return fc3(tanh(fc2(relu(fc1(x)))));
  }
};

/// The global batch: rows [0, rows) of fixed pseudo-random inputs and targets (same on every rank).
template <class T>
std::pair<Tensor<T, shape<dyn, 6>>, Tensor<T, shape<dyn, 3>>> batch(std::int64_t rows, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor<T, shape<dyn, 6>> x({rows, 6});
  Tensor<T, shape<dyn, 3>> y({rows, 3});
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < 6; ++j) x(i, j) = static_cast<T>(u(gen));
    for (std::int64_t j = 0; j < 3; ++j) y(i, j) = static_cast<T>(u(gen));
  }
  return {x, y};
}

template <class T>
double max_param_diff(const nn::Module& a, const nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (std::size_t k = 0; k < pa.size(); ++k) {
    const auto va = pa[k].value().template flat<T>(), vb = pb[k].value().template flat<T>();
    for (std::int64_t i = 0; i < va.numel(); ++i) worst = std::max(worst, std::abs(double(va(i)) - double(vb(i))));
  }
  return worst;
}

/// N SGD steps: DDP on this rank's share of each global batch vs one process on the whole batch.
template <class T>
void check_ddp_matches_single_process(double tol, double bucket_cap_mb, bool accumulate) {
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<T> reference;  // what rank 0 starts with
  manual_seed(r == 0 ? 0 : 1000 + static_cast<std::uint64_t>(r));
  Net<T> model;  // rank 0's is the reference's; the others differ until DDP broadcasts rank 0's
  if (r != 0) REQUIRE(max_param_diff<T>(model, reference) > 0);
  td::DistributedDataParallel ddp(model, {.bucket_cap_mb = bucket_cap_mb});
  REQUIRE(max_param_diff<T>(model, reference) == 0);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  optim::SGD ref_opt(reference.parameters(), {.lr = 0.1});
  for (int step = 0; step < 4; ++step) {
    // two micro-batches per step when accumulating (the first under no_sync)
    const int micro = accumulate ? 2 : 1;
    for (int m = 0; m < micro; ++m) {
      auto [x, y] = batch<T>(rows, 17u + 31u * static_cast<unsigned>(step * 2 + m));
      Tensor<T, shape<>> ref_loss = mse_loss(reference(x), y);
      ref_loss.backward();
      auto xs = x.template narrow<0>(r * per_rank, per_rank);
      auto ys = y.template narrow<0>(r * per_rank, per_rank);
      if (m + 1 < micro) {
        auto guard = ddp.no_sync();
        Tensor<T, shape<>> loss = mse_loss(ddp(xs), ys);
        loss.backward();
        // not synchronized: each rank holds its own gradient (the ranks' data differ)
        if (w > 1) {
          Tensor<T, shape<3>> hi = model.fc3.bias.grad().clone(), lo = model.fc3.bias.grad().clone();
          td::all_reduce(hi, td::reduce_op::max);
          td::all_reduce(lo, td::reduce_op::min);
          bool differs = false;
          for (std::int64_t i = 0; i < 3; ++i) differs = differs || hi(i) != lo(i);
          REQUIRE(differs);
        }
      } else {
        Tensor<T, shape<>> loss = mse_loss(ddp(xs), ys);
        loss.backward();
      }
    }
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
    CAPTURE(step);
    REQUIRE(max_param_diff<T>(model, reference) <= tol);
  }
  if (bucket_cap_mb < 0.001) {
    REQUIRE(ddp.bucket_names().size() == 6);  // one parameter each, last layer's first
    REQUIRE(ddp.bucket_names().front() == std::vector<std::string>{"fc3.bias"});
    REQUIRE(ddp.buckets_started_during_backward() >= 1);  // started while the backward ran
  } else {
    REQUIRE(ddp.bucket_names().size() == 1);
  }
}
}  // namespace

TEST_CASE("DistributedDataParallel equals single-process training on the global batch", "[dist][ddp]") {
  SECTION("float64, one bucket") { check_ddp_matches_single_process<double>(1e-12, 25.0, false); }
  SECTION("float64, a bucket per parameter") { check_ddp_matches_single_process<double>(1e-12, 1e-5, false); }
  SECTION("float32, a bucket per parameter") { check_ddp_matches_single_process<float>(1e-6, 1e-5, false); }
  SECTION("float64, gradient accumulation with no_sync") { check_ddp_matches_single_process<double>(1e-12, 1e-5, true); }
}

TEST_CASE("DistributedDataParallel recovers from a backward that threw after its first bucket", "[dist][ddp]") {
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<double> reference;
  manual_seed(0);
  Net<double> model0;  // the same values as reference (seed 0)
  td::DistributedDataParallel ddp(model0, {.bucket_cap_mb = 1e-5});
  auto [x, y] = batch<double>(rows, 99u);
  auto xs = x.narrow<0>(r * per_rank, per_rank);
  auto ys = y.narrow<0>(r * per_rank, per_rank);
  {
    // fc3's bucket starts from DDP's hook, then a hook on fc2.weight throws on every rank
    auto boom = autograd::register_post_accumulate_grad_hook(model0.fc2.weight, [] { throw value_error("boom"); });
    Tensor<double, shape<>> loss = mse_loss(ddp(xs), ys);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("boom"));
    boom.remove();
  }
  optim::SGD opt(model0.parameters(), {.lr = 0.1});
  opt.zero_grad();
  Tensor<double, shape<>> loss = mse_loss(ddp(xs), ys);
  loss.backward();
  Tensor<double, shape<>> ref_loss = mse_loss(reference(x), y);
  ref_loss.backward();
  const auto pa = model0.parameters(), pb = reference.parameters();
  double worst = 0;
  for (std::size_t k = 0; k < pa.size(); ++k) {
    const auto ga = pa[k].grad().flat<double>(), gb = pb[k].grad().flat<double>();
    for (std::int64_t i = 0; i < ga.numel(); ++i) worst = std::max(worst, std::abs(ga(i) - gb(i)));
  }
  REQUIRE(worst <= 1e-12);
}

// --- FullyShardedDataParallel -------------------------------------------------------------------

namespace {
/// Every value of a floating any_tensor as double.
std::vector<double> values_of(const any_tensor& a) {
  std::vector<double> v(static_cast<std::size_t>(a.numel()));
  td::detail::convert(a.raw_data(), a.scalar_type(), v.data(), dtype::float64, a.numel());
  return v;
}
/// max |a - b| over the reference module's parameters, `full` being a full state dict.
double max_dict_diff(const tensor_dict& full, const nn::Module& reference) {
  double worst = 0;
  for (const auto& [name, r] : reference.named_parameters()) {
    CAPTURE(name);
    REQUIRE(full.contains(name));
    REQUIRE(full.at(name).sizes() == r.sizes());
    const auto a = values_of(full.at(name)), b = values_of(r.value());
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

/// N steps of SGD or AdamW: FSDP on this rank's share of each global batch vs one process on the
/// whole batch; `micro` backwards (accumulated in the shard's .grad) per step.
template <class T>
void check_fsdp_matches_single_process(double tol, bool adamw, int micro) {
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<T> reference;
  manual_seed(r == 0 ? 0 : 1000 + static_cast<std::uint64_t>(r));
  Net<T> model;  // differs from rank 0's until FSDP broadcasts
  td::FullyShardedDataParallel fsdp(model);
  // 6*16+16 + 16*8+8 + 8*3+3 = 275 elements: padded to a multiple of 2 and 4, so the last shard has zeros
  REQUIRE(fsdp.flat_numel() == 275);
  REQUIRE(fsdp.shard_numel() == (275 + w - 1) / w);
  REQUIRE(fsdp.parameters().size() == 1);
  REQUIRE(fsdp.flat_param().scalar_type() == dtype_of<T>);
  REQUIRE_FALSE(model.fc1.weight.defined());  // the module holds no full parameter between steps
  REQUIRE(max_dict_diff(fsdp.full_state_dict(), reference) == 0);
  auto make = [&](std::vector<nn::tensor_ref> ps) -> std::unique_ptr<optim::Optimizer> {
    if (adamw) return std::make_unique<optim::AdamW>(ps, optim::adamw_options{.lr = 0.01, .weight_decay = 0.1});
    return std::make_unique<optim::SGD>(ps, optim::sgd_options{.lr = 0.1});
  };
  auto opt = make(fsdp.parameters()), ref_opt = make(reference.parameters());
  for (int step = 0; step < 4; ++step) {
    for (int m = 0; m < micro; ++m) {
      auto [x, y] = batch<T>(rows, 5u + 13u * static_cast<unsigned>(step * 2 + m));
      Tensor<T, shape<>> ref_loss = mse_loss(reference(x), y);
      ref_loss.backward();
      auto xs = x.template narrow<0>(r * per_rank, per_rank);
      auto ys = y.template narrow<0>(r * per_rank, per_rank);
      Tensor<T, shape<>> loss = mse_loss(fsdp(xs), ys);
      REQUIRE(fsdp.is_unsharded());
      REQUIRE(model.fc1.weight.defined());
      REQUIRE(model.fc1.weight.requires_grad());
      loss.backward();
      REQUIRE_FALSE(fsdp.is_unsharded());  // freed at the end of the backward
      REQUIRE_FALSE(model.fc1.weight.defined());
      REQUIRE(fsdp.flat_param().grad().defined());
    }
    opt->step();
    opt->zero_grad();
    ref_opt->step();
    ref_opt->zero_grad();
    CAPTURE(step);
    REQUIRE(max_dict_diff(fsdp.full_state_dict(), reference) <= tol);
  }
  // evaluation under no_grad: gathered, run, freed when the forward returns
  auto [x, y] = batch<T>(rows, 777u);
  (void)y;
  const no_grad off;
  Tensor<T, shape<dyn, 3>> got = fsdp(x);
  REQUIRE_FALSE(fsdp.is_unsharded());
  Tensor<T, shape<dyn, 3>> want = reference(x);
  double worst = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < 3; ++j) worst = std::max(worst, std::abs(double(got(i, j)) - double(want(i, j))));
  REQUIRE(worst <= 10 * tol);
}

struct MixedDtypes : nn::Module {
  nn::Linear<2, 2, true, float> a;
  nn::Linear<2, 2, true, double> b;
  TENET_MODULE(a, b);
};

/// A path every rank agrees on (rank 0's process id), in the temporary directory.
std::string shared_temp_path(const std::string& stem) {
  Tensor<std::int64_t, shape<1>> id({1});
  id(0) = static_cast<std::int64_t>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
  td::broadcast(id, 0);
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(id(0)))).string();
}
}  // namespace

TEST_CASE("FullyShardedDataParallel equals single-process training on the global batch", "[dist][fsdp]") {
  SECTION("float64, SGD") { check_fsdp_matches_single_process<double>(1e-12, false, 1); }
  SECTION("float64, AdamW (padding stays zero)") { check_fsdp_matches_single_process<double>(1e-12, true, 1); }
  SECTION("float64, two backwards accumulated per step") { check_fsdp_matches_single_process<double>(1e-12, false, 2); }
  SECTION("float32, SGD") { check_fsdp_matches_single_process<float>(1e-6, false, 1); }
}

TEST_CASE("FullyShardedDataParallel: two forwards, one backward; a forward without backward before a step",
          "[dist][fsdp]") {
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<double> reference;
  manual_seed(0);
  Net<double> model;
  td::FullyShardedDataParallel fsdp(model);
  REQUIRE(max_dict_diff(fsdp.full_state_dict(), reference) == 0);
  optim::SGD opt(fsdp.parameters(), {.lr = 0.1});
  optim::SGD ref_opt(reference.parameters(), {.lr = 0.1});
  for (int step = 0; step < 2; ++step) {
    auto [x1, y1] = batch<double>(rows, 61u + static_cast<unsigned>(step));
    auto [x2, y2] = batch<double>(rows, 71u + static_cast<unsigned>(step));
    // a forward in grad mode whose graph is dropped: its gathered parameters are reused below
    // while the shard is unchanged, and gathered afresh after the optimizer step changed it
    { Tensor<double, shape<>> unused = mse_loss(fsdp(x1.narrow<0>(r * per_rank, per_rank)), y1.narrow<0>(r * per_rank, per_rank)); }
    Tensor<double, shape<>> ref_loss = mse_loss(reference(x1), y1) + mse_loss(reference(x2), y2);
    ref_loss.backward();
    Tensor<double, shape<>> loss = mse_loss(fsdp(x1.narrow<0>(r * per_rank, per_rank)), y1.narrow<0>(r * per_rank, per_rank)) +
                                   mse_loss(fsdp(x2.narrow<0>(r * per_rank, per_rank)), y2.narrow<0>(r * per_rank, per_rank));
    {
      const no_grad off;  // an evaluation between the forward and its backward frees nothing
      Tensor<double, shape<dyn, 3>> peek = fsdp(x1);
      REQUIRE(fsdp.is_unsharded());
    }
    loss.backward();
    // gathered again by this forward, then stale after the step: the next forward must gather afresh
    { Tensor<double, shape<>> unused = mse_loss(fsdp(x2.narrow<0>(r * per_rank, per_rank)), y2.narrow<0>(r * per_rank, per_rank)); }
    REQUIRE(fsdp.is_unsharded());
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
    CAPTURE(step);
    REQUIRE(max_dict_diff(fsdp.full_state_dict(), reference) <= 1e-12);
  }
}

TEST_CASE("FullyShardedDataParallel: one unit per layer, called from the forward", "[dist][fsdp]") {
  // per-block sharding: each Linear its own unit (its own flat parameter and reduce-scatter)
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<double> reference;
  manual_seed(0);
  Net<double> model;
  td::FullyShardedDataParallel u1(model.fc1);
  td::FullyShardedDataParallel u2(model.fc2);
  td::FullyShardedDataParallel u3(model.fc3);
  REQUIRE(u1.flat_numel() == 6 * 16 + 16);
  REQUIRE(u3.shard_numel() == (8 * 3 + 3 + w - 1) / w);
  std::vector<nn::tensor_ref> shards{u1.flat_param(), u2.flat_param(), u3.flat_param()};
  optim::SGD opt(shards, {.lr = 0.1});
  optim::SGD ref_opt(reference.parameters(), {.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = batch<double>(rows, 91u + static_cast<unsigned>(step));
    Tensor<double, shape<>> ref_loss = mse_loss(reference(x), y);
    ref_loss.backward();
    auto xs = x.narrow<0>(r * per_rank, per_rank);
    Tensor<double, shape<>> loss = mse_loss(u3(tanh(u2(relu(u1(xs))))), y.narrow<0>(r * per_rank, per_rank));
    loss.backward();
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
    double worst = 0;
    for (const auto& [name, full] : std::vector<std::pair<std::string, tensor_dict>>{
             {"fc1.", u1.full_state_dict()}, {"fc2.", u2.full_state_dict()}, {"fc3.", u3.full_state_dict()}})
      for (const auto& k : full.keys()) {
        const auto a = values_of(full.at(k));
        const auto b = values_of(reference.state_dict().at(name + k));
        for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      }
    CAPTURE(step);
    REQUIRE(worst <= 1e-12);
  }
}

TEST_CASE("FullyShardedDataParallel mixed precision: bfloat16 compute, float32 shards and reduction", "[dist][fsdp]") {
  const int w = W(), r = R();
  const std::int64_t per_rank = 4, rows = per_rank * w;
  manual_seed(0);
  Net<bfloat16> model;
  td::FullyShardedDataParallel fsdp(model, {.shard_dtype = dtype::float32, .reduce_dtype = dtype::float32});
  REQUIRE(fsdp.compute_dtype() == dtype::bfloat16);
  REQUIRE(fsdp.flat_param().scalar_type() == dtype::float32);
  const tensor_dict start = fsdp.full_state_dict();
  REQUIRE(start.at("fc1.weight").scalar_type() == dtype::float32);  // the masters' dtype
  // the float32 reference starts from the same values (bfloat16's, widened)
  Net<float> reference;
  (void)reference.load_state_dict(start);
  optim::SGD opt(fsdp.parameters(), {.lr = 0.1});
  optim::SGD ref_opt(reference.parameters(), {.lr = 0.1});
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = batch<float>(rows, 3u + 7u * static_cast<unsigned>(step));
    Tensor<float, shape<>> ref_loss = mse_loss(reference(x), y);
    ref_loss.backward();
    const auto xs = Tensor<bfloat16, shape<dyn, 6>>(x.narrow<0>(r * per_rank, per_rank).to<bfloat16>());
    const auto ys = Tensor<bfloat16, shape<dyn, 3>>(y.narrow<0>(r * per_rank, per_rank).to<bfloat16>());
    Tensor<bfloat16, shape<>> loss = mse_loss(fsdp(xs), ys);
    loss.backward();
    REQUIRE(fsdp.flat_param().grad().scalar_type() == dtype::float32);
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
  }
  // bfloat16's forward and backward round to 8 bits: close to float32 training, not equal; the
  // parameters moved much further than that from where they started
  const double diff = max_dict_diff(fsdp.full_state_dict(), reference);
  const double moved = max_dict_diff(start, reference);
  CAPTURE(diff, moved);
  REQUIRE(diff <= 3e-3);  // measured: 6e-5 on 2 ranks, 5e-4 on 4
  REQUIRE(moved >= 10 * diff);
}

TEST_CASE("FullyShardedDataParallel state dicts: full (safetensors) and sharded", "[dist][fsdp]") {
  manual_seed(0);
  Net<double> model;
  td::FullyShardedDataParallel fsdp(model);
  const std::string path = shared_temp_path("tenet_fsdp_full") + ".safetensors";
  fsdp.save_full_state_dict(path);
  const tensor_dict loaded = safetensors::load_file(path);
  const tensor_dict full = fsdp.full_state_dict();
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  REQUIRE(sorted(loaded.keys()) == sorted(full.keys()));  // (safetensors orders by dtype and name)
  for (const auto& k : full.keys()) REQUIRE(values_of(loaded.at(k)) == values_of(full.at(k)));

  // into another model of other values: each rank takes its shard
  manual_seed(42);
  Net<double> other;
  td::FullyShardedDataParallel f2(other);
  REQUIRE(values_of(f2.full_state_dict().at("fc2.weight")) != values_of(full.at("fc2.weight")));
  f2.load_full_state_dict(loaded);
  for (const auto& k : full.keys()) REQUIRE(values_of(f2.full_state_dict().at(k)) == values_of(full.at(k)));
  tensor_dict partial;
  for (const auto& k : full.keys())
    if (k != "fc3.bias") partial.insert(k, full.at(k));
  CHECK_THROWS_WITH(f2.load_full_state_dict(partial), Catch::Contains("missing keys [\"fc3.bias\"]"));

  // sharded: one dict per rank, back after a step changed the shard
  const tensor_dict mine = fsdp.sharded_state_dict();
  const std::string shard_path = path + ".rank" + std::to_string(R());
  safetensors::save_file(mine, shard_path);
  const auto before = values_of(fsdp.flat_param().value());
  auto [x, y] = batch<double>(4, 11u);
  Tensor<double, shape<>> loss = mse_loss(fsdp(x), y);
  loss.backward();
  optim::SGD(fsdp.parameters(), {.lr = 0.5}).step();
  REQUIRE(values_of(fsdp.flat_param().value()) != before);
  fsdp.load_sharded_state_dict(safetensors::load_file(shard_path));
  REQUIRE(values_of(fsdp.flat_param().value()) == before);
  tensor_dict wrong = mine;
  wrong.set("world_size", tenet::detail::int_field(W() + 1));
  CHECK_THROWS_WITH(fsdp.load_sharded_state_dict(wrong),
                    Catch::Contains("saved by rank " + std::to_string(R()) + " of " + std::to_string(W() + 1)) &&
                        Catch::Contains("this is rank " + std::to_string(R()) + " of " + std::to_string(W())));
  td::barrier();  // every rank's shard file is written
  // resharding: the first ceil(W / 2) ranks load the W files (4 -> 2 ranks, 2 -> 1)
  std::vector<int> half;
  for (int q = 0; q < (W() + 1) / 2; ++q) half.push_back(q);
  auto g = td::new_group(half);
  if (g.is_member()) {
    manual_seed(9);
    Net<double> m3;
    td::FullyShardedDataParallel f3(m3, {.group = g});
    f3.load_sharded_state_dict([&](int q) { return safetensors::load_file(path + ".rank" + std::to_string(q)); });
    for (const auto& k : full.keys()) REQUIRE(values_of(f3.full_state_dict().at(k)) == values_of(full.at(k)));
  }
  td::barrier();
  std::filesystem::remove(shard_path);
  if (R() == 0) std::filesystem::remove(path);
}

TEST_CASE("FullyShardedDataParallel refuses what it cannot shard, with the values", "[dist][fsdp]") {
  MixedDtypes mixed;
  CHECK_THROWS_WITH(td::FullyShardedDataParallel(mixed),
                    Catch::Contains("\"b.weight\" is float64 but \"a.weight\" is float32"));
  manual_seed(0);
  Net<float> model;
  CHECK_THROWS_WITH(td::FullyShardedDataParallel(model, {.shard_dtype = dtype::int64}),
                    Catch::Contains("shard_dtype must be a floating dtype, got int64"));
}

// --- DTensor ------------------------------------------------------------------------------------

namespace {
/// A [4, 8, 3] tensor of distinct values (the same on every rank): element (i, j, k) = 100 i + 10 j + k.
Tensor<double, dyn_shape<3>> dtensor_input() {
  Tensor<double, dyn_shape<3>> t({4, 8, 3});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 8; ++j)
      for (std::int64_t k = 0; k < 3; ++k) t(i, j, k) = 100.0 * i + 10.0 * j + k;
  return t;
}
/// Every element of a equals b's (same sizes).
bool same_values(const Tensor<double, dyn_shape<3>>& a, const Tensor<double, dyn_shape<3>>& b) {
  if (a.sizes() != b.sizes()) return false;
  for (std::int64_t i = 0; i < a.size(0); ++i)
    for (std::int64_t j = 0; j < a.size(1); ++j)
      for (std::int64_t k = 0; k < a.size(2); ++k)
        if (a(i, j, k) != b(i, j, k)) return false;
  return true;
}
/// Chunk q of W along dim d of `full`, computed by indexing.
Tensor<double, dyn_shape<3>> chunk_by_index(const Tensor<double, dyn_shape<3>>& full, int d, int q, int w) {
  auto s = full.sizes();
  const std::int64_t c = s[static_cast<std::size_t>(d)] / w;
  s[static_cast<std::size_t>(d)] = c;
  Tensor<double, dyn_shape<3>> out(s);
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t k = 0; k < s[2]; ++k)
        out(i, j, k) = full(i + (d == 0 ? q * c : 0), j + (d == 1 ? q * c : 0), k + (d == 2 ? q * c : 0));
  return out;
}
}  // namespace

TEST_CASE("DTensor on a 1-D mesh: distribute_tensor, redistribute, full_tensor", "[dist][dtensor]") {
  const int w = W(), r = R();
  const td::DeviceMesh mesh;
  REQUIRE(mesh.size() == w);
  REQUIRE(mesh.coordinate() == r);
  const auto full = dtensor_input();  // dims 0 and 1 divide by 2 and 4; dim 2 (3) by neither
  SECTION("Shard and Replicate, every redistribution between them") {
    for (int d : {0, 1}) {
      CAPTURE(d);
      auto s = td::distribute_tensor(full, mesh, td::Shard{d});
      REQUIRE(td::to_string(s.placements()) == "Shard(" + std::to_string(d) + ")");
      REQUIRE(same_values(s.to_local(), chunk_by_index(full, d, r, w)));
      REQUIRE(same_values(s.full_tensor(), full));
      auto rep = s.redistribute(td::Replicate{});  // all_gather
      REQUIRE(same_values(rep.to_local(), full));
      auto back = rep.redistribute(td::Shard{d});  // local chunk
      REQUIRE(same_values(back.to_local(), chunk_by_index(full, d, r, w)));
      auto other = s.redistribute(td::Shard{1 - d});  // Shard(a) -> Shard(b)
      REQUIRE(same_values(other.to_local(), chunk_by_index(full, 1 - d, r, w)));
      REQUIRE(same_values(other.full_tensor(), full));
    }
    auto last = td::distribute_tensor(full.permute<0, 2, 1>().contiguous(), mesh, td::Shard{-1});  // dim 2 of [4, 3, 8]
    REQUIRE(std::get<td::Shard>(last.placements()).dim == 2);
    REQUIRE(last.to_local().size(2) == 8 / w);
  }
  SECTION("distribute_tensor takes the first rank's values") {
    auto mine = dtensor_input();
    mine(0, 0, 0) = 1000.0 + r;
    auto rep = td::distribute_tensor(mine, mesh, td::Replicate{});
    REQUIRE(rep.to_local()(0, 0, 0) == 1000.0);
  }
  SECTION("Partial: all_reduce to Replicate, reduce_scatter to Shard") {
    // rank q holds (q + 1) * full: the value is (1 + ... + w) * full, or its average
    Tensor<double, dyn_shape<3>> part = full * static_cast<double>(r + 1);
    const double total = w * (w + 1) / 2.0;
    Tensor<double, dyn_shape<3>> want = full * total, want_avg = full * (total / w);
    auto p = td::DTensor<double, 3>::from_local(part, mesh, td::Partial{});
    part(0, 0, 0) = -1;  // from_local copied it
    REQUIRE(td::to_string(p.placements()) == "Partial(sum)");
    REQUIRE(same_values(p.full_tensor(), want));
    REQUIRE(same_values(p.redistribute(td::Replicate{}).to_local(), want));
    for (int d : {0, 1}) REQUIRE(same_values(p.redistribute(td::Shard{d}).to_local(), chunk_by_index(want, d, r, w)));
    auto a = td::DTensor<double, 3>::from_local(Tensor<double, dyn_shape<3>>(full * static_cast<double>(r + 1)), mesh,
                                                td::Partial{td::reduce_op::avg});
    REQUIRE(same_values(a.redistribute(td::Shard{1}).to_local(), chunk_by_index(want_avg, 1, r, w)));
    // from_local with Shard: the global size is the local one times the mesh size
    auto s = td::DTensor<double, 3>::from_local(chunk_by_index(full, 1, r, w), mesh, td::Shard{1});
    REQUIRE(s.sizes() == std::array<std::int64_t, 3>{4, 8, 3});
    REQUIRE(same_values(s.full_tensor(), full));
  }
  SECTION("errors name the values") {
    if (w > 1)
      CHECK_THROWS_WITH(td::distribute_tensor(full, mesh, td::Shard{2}),
                        Catch::Contains("Shard(2) of sizes [4, 8, 3] on a mesh of " + std::to_string(w) +
                                        " ranks: dim 2 (3) is not a multiple of " + std::to_string(w)));
    CHECK_THROWS_WITH(td::distribute_tensor(full, mesh, td::Shard{3}), Catch::Contains("the dim must be in [-3, 2]"));
    CHECK_THROWS_WITH(td::distribute_tensor(full, mesh, td::Partial{}), Catch::Contains("cannot be distributed"));
    auto rep = td::distribute_tensor(full, mesh, td::Replicate{});
    CHECK_THROWS_WITH(rep.redistribute(td::Partial{}), Catch::Contains("from Replicate() to Partial(sum) is not supported"));
  }
}

TEST_CASE("tensor-parallel MLP (column- then row-parallel Linear) equals the unsharded one, forward and backward",
          "[dist][tp]") {
  const int w = W(), r = R();
  const td::DeviceMesh mesh;
  manual_seed(3);
  nn::Linear<6, 8, true, double> fc1;  // hidden 8: a multiple of 2 and 4
  nn::Linear<8, 3, true, double> fc2;
  auto [xv, y] = batch<double>(5, 23u);
  Tensor<double, shape<dyn, 6>> x = xv.clone(), x_ref = xv.clone();
  x.requires_grad_();
  x_ref.requires_grad_();
  auto up = td::ColwiseParallelLinear<double>::from_full(fc1.weight, fc1.bias, mesh);
  auto down = td::RowwiseParallelLinear<double>::from_full(fc2.weight, fc2.bias, mesh);
  REQUIRE(up.weight.size(0) == 8 / w);
  REQUIRE(down.weight.size(1) == 8 / w);
  Tensor<double, shape<dyn, dyn>> out = down(relu(up(x)));
  Tensor<double, shape<dyn, 3>> ref = fc2(relu(fc1(x_ref)));
  double worst = 0;
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 3; ++j) worst = std::max(worst, std::abs(out(i, j) - ref(i, j)));
  REQUIRE(worst <= 1e-12);
  Tensor<double, shape<>> loss = mse_loss(Tensor<double, shape<dyn, 3>>(out), y);
  Tensor<double, shape<>> ref_loss = mse_loss(ref, y);
  loss.backward();
  ref_loss.backward();
  // every gradient is the matching slice of the unsharded one; x's needed the backward all_reduce
  auto diff = [](const auto& a, const auto& b) {
    REQUIRE(a.sizes() == b.sizes());
    double m = 0;
    const auto fa = a.contiguous(), fb = b.contiguous();
    for (std::int64_t i = 0; i < fa.numel(); ++i) m = std::max(m, std::abs(fa.data()[i] - fb.data()[i]));
    return m;
  };
  const std::int64_t c = 8 / w;
  REQUIRE(diff(x.grad(), x_ref.grad()) <= 1e-12);
  REQUIRE(diff(up.weight.grad(), Tensor<double, shape<dyn, dyn>>(fc1.weight.grad().narrow<0>(r * c, c))) <= 1e-12);
  REQUIRE(diff(up.bias.grad(), Tensor<double, shape<dyn>>(fc1.bias.grad().narrow<0>(r * c, c))) <= 1e-12);
  REQUIRE(diff(down.weight.grad(), Tensor<double, shape<dyn, dyn>>(fc2.weight.grad().narrow<1>(r * c, c))) <= 1e-12);
  REQUIRE(diff(down.bias.grad(), Tensor<double, shape<dyn>>(fc2.bias.grad())) <= 1e-12);
  // a feature count the mesh does not divide
  if (w > 1) {
    nn::Linear<6, 3, true, double> odd;
    if (3 % w != 0)
      CHECK_THROWS_WITH(td::ColwiseParallelLinear<double>::from_full(odd.weight, odd.bias, mesh),
                        Catch::Contains("dim 0 (3) is not a multiple of " + std::to_string(w)));
  }
}

// --- the failure scenarios (modes of this program) ----------------------------------------------

static int run_timeout_mode() {
  td::init_process_group({.timeout_seconds = 1.0});
  int rc = 0;
  if (R() == 0) {
    auto t = filled<float>(0, 8);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      td::all_reduce(t);
      std::printf("rank 0: all_reduce returned, but rank 1 never called it\n");
      rc = 1;
    } catch (const dist_error& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string m = e.what();
      const bool ok = m.find("timed out") != std::string::npos && m.find("rank 0") != std::string::npos && s < 10;
      std::printf("rank 0: dist_error after %.2f s: %s\n%s\n", s, e.what(), ok ? "TIMEOUT-OK" : "TIMEOUT-WRONG");
      rc = ok ? 0 : 1;
      // later operations fail at once instead of waiting again
      try {
        td::barrier();
        rc = 1;
      } catch (const dist_error& e2) {
        std::printf("rank 0: then: %s\n", e2.what());
      }
    }
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // never calls all_reduce
  }
  td::destroy_process_group();
  return rc;
}

static int run_early_exit_mode() {
  td::init_process_group({.timeout_seconds = 60.0});
  const int leaver = W() - 1;
  if (R() == leaver) return 0;  // leaves at once: the atexit handler says goodbye
  auto t = filled<double>(R(), 8);
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 1;
  try {
    td::all_reduce(t);
    std::printf("rank %d: all_reduce returned without rank %d\n", R(), leaver);
  } catch (const dist_error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string m = e.what();
    const bool ok = m.find("rank " + std::to_string(leaver) + " left") != std::string::npos && s < 30;
    std::printf("rank %d: dist_error after %.2f s: %s\n%s\n", R(), s, e.what(), ok ? "EARLY-EXIT-OK" : "EARLY-EXIT-WRONG");
    rc = ok ? 0 : 1;
  }
  td::destroy_process_group();
  return rc;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--timeout") return run_timeout_mode();
  if (argc > 1 && std::string(argv[1]) == "--early-exit") return run_early_exit_mode();
  td::init_process_group({.timeout_seconds = 60.0});
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  // one report per rank would interleave: rank 0 reports, the others only fail
  const int failed = session.run();
  std::printf("rank %d of %d: %d failed\n", R(), W(), failed);
  td::destroy_process_group();
  return failed == 0 ? 0 : 1;
}
