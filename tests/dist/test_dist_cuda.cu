// tenet::dist on CUDA tensors (NCCL), run under mpirun with one GPU per rank:
//   mpirun -np 2 tenet_dist_cuda_tests
// Rank r uses cuda(r % device count). Each check computes the expected values on the CPU from the
// formula every rank used. Exits 77 (skipped) where there is no GPU, 1 on any failure.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>
#include <tenet/dist.hpp>

using namespace tenet;
namespace td = tenet::dist;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("rank %d: FAILED: %s\n", td::rank(), what.c_str());
  }
}
template <class T>
T value(int r, std::int64_t i) {
  if constexpr (std::is_same_v<T, bool>) return ((r + i) % 2) == 0;
  else return T(static_cast<float>((r + i) % 3 + 1));
}
template <class T>
double num(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? 1 : 0;
  else return static_cast<double>(static_cast<float>(v));
}
template <class T>
Tensor<T, shape<dyn>> on_device(int r, std::int64_t n, device d, std::int64_t start = 0) {
  Tensor<T, shape<dyn>> h({n});
  for (std::int64_t i = 0; i < n; ++i) h(i) = value<T>(r, start + i);
  return h.to(d);
}

template <class T>
void check_all_reduce(device d) {
  const int w = td::world_size();
  const std::int64_t n = 1000;
  for (auto op : {td::reduce_op::sum, td::reduce_op::max, td::reduce_op::min, td::reduce_op::prod}) {
    auto t = on_device<T>(td::rank(), n, d);
    td::all_reduce(t, op);
    const auto h = t.cpu();
    bool ok = true;
    for (std::int64_t i = 0; i < n; ++i) {
      double acc = op == td::reduce_op::prod ? 1 : op == td::reduce_op::max ? -1e9 : op == td::reduce_op::min ? 1e9 : 0;
      for (int r = 0; r < w; ++r) {
        const double v = num(value<T>(r, i));
        acc = op == td::reduce_op::sum ? acc + v : op == td::reduce_op::prod ? acc * v
            : op == td::reduce_op::max ? std::max(acc, v) : std::min(acc, v);
      }
      if (std::is_same_v<T, bool>) acc = acc != 0;
      ok = ok && num(h(i)) == acc;
    }
    expect(ok, std::string("all_reduce ") + td::name(op) + " " + tenet::name(dtype_of<T>));
  }
}
}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("tenet_dist_cuda_tests: no CUDA device here; skipped (exit code 77)\n");
    return 77;
  }
  td::init_process_group({.timeout_seconds = 120});
  const int r = td::rank(), w = td::world_size();
  const device d = tenet::cuda(r % devices);
  try {
    check_all_reduce<float>(d);
    check_all_reduce<double>(d);
    check_all_reduce<bfloat16>(d);
    check_all_reduce<float16>(d);
    check_all_reduce<std::int64_t>(d);
    check_all_reduce<std::int32_t>(d);
    check_all_reduce<std::uint8_t>(d);
    check_all_reduce<bool>(d);
    {  // avg, async
      auto t = on_device<float>(r, 64, d);
      auto work = td::all_reduce(t, td::reduce_op::avg, {.async_op = true});
      work.wait();
      const auto h = t.cpu();
      bool ok = true;
      for (std::int64_t i = 0; i < 64; ++i) {
        double s = 0;
        for (int q = 0; q < w; ++q) s += num(value<float>(q, i));
        ok = ok && h(i) == static_cast<float>(s / w);
      }
      expect(ok, "async all_reduce avg float32");
    }
    {  // broadcast and reduce
      auto t = on_device<double>(r, 33, d);
      td::broadcast(t, w - 1);
      auto h = t.cpu();
      bool ok = true;
      for (std::int64_t i = 0; i < 33; ++i) ok = ok && h(i) == value<double>(w - 1, i);
      expect(ok, "broadcast float64");
      auto u = on_device<std::int64_t>(r, 33, d);
      td::reduce(u, 0, td::reduce_op::sum);
      auto hu = u.cpu();
      ok = true;
      for (std::int64_t i = 0; i < 33; ++i) {
        std::int64_t s = 0;
        for (int q = 0; q < w; ++q) s += value<std::int64_t>(q, i);
        ok = ok && hu(i) == (r == 0 ? s : value<std::int64_t>(r, i));
      }
      expect(ok, "reduce int64");
    }
    {  // all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single
      const std::int64_t n = 7;
      Tensor<float, shape<dyn>> cat({n * w}, d);
      td::all_gather_into_tensor(cat, on_device<float>(r, n, d));
      auto hc = cat.cpu();
      bool ok = true;
      for (int q = 0; q < w; ++q)
        for (std::int64_t i = 0; i < n; ++i) ok = ok && hc(q * n + i) == value<float>(q, i);
      expect(ok, "all_gather_into_tensor");
      Tensor<float, shape<dyn>> part({n}, d);
      td::reduce_scatter_tensor(part, on_device<float>(r, n * w, d));
      auto hp = part.cpu();
      ok = true;
      for (std::int64_t i = 0; i < n; ++i) {
        float s = 0;
        for (int q = 0; q < w; ++q) s += value<float>(q, r * n + i);
        ok = ok && hp(i) == s;
      }
      expect(ok, "reduce_scatter_tensor");
      Tensor<std::int32_t, shape<dyn, dyn>> in_h({w, n});
      for (int q = 0; q < w; ++q)
        for (std::int64_t i = 0; i < n; ++i) in_h(q, i) = 1000 * r + 100 * q + static_cast<std::int32_t>(i);
      auto in = in_h.to(d);
      Tensor<std::int32_t, shape<dyn, dyn>> out({w, n}, d);
      td::all_to_all_single(out, in);
      auto ho = out.cpu();
      ok = true;
      for (int q = 0; q < w; ++q)
        for (std::int64_t i = 0; i < n; ++i) ok = ok && ho(q, i) == 1000 * q + 100 * r + i;
      expect(ok, "all_to_all_single");
    }
    {  // send / recv around a ring
      const int next = (r + 1) % w, prev = (r + w - 1) % w;
      Tensor<float, shape<dyn>> got({5}, d);
      auto s = td::isend(on_device<float>(r, 5, d), next);
      auto q = td::irecv(got, prev);
      s.wait();
      q.wait();
      auto hg = got.cpu();
      bool ok = true;
      for (std::int64_t i = 0; i < 5; ++i) ok = ok && hg(i) == value<float>(prev, i);
      expect(ok, "isend / irecv ring");
    }
    {  // clear errors
      auto i16 = on_device<std::int16_t>(r, 4, d);
      try {
        td::all_reduce(i16);
        expect(false, "int16 on NCCL must throw");
      } catch (const dtype_error&) {
      }
      Tensor<float, shape<dyn, dyn>> m({3, 4}, d);
      auto mt = m.t();
      try {
        td::all_reduce(mt);
        expect(false, "a non-contiguous CUDA tensor must throw");
      } catch (const value_error&) {
      }
    }
  } catch (const std::exception& e) {
    std::printf("rank %d: exception: %s\n", r, e.what());
    ++failures;
  }
  std::printf("rank %d of %d on %s: %d failed\n", r, w, d.str().c_str(), failures);
  td::destroy_process_group();
  return failures ? 1 : 0;
}
