// nanoflann_nn.cpp: nanoflann's kd-tree answering the same nearest-neighbour
// rounds as `hicp_bench nn` (round r: the queries turned by r x 0.05 degrees
// about z through their centroid), OpenMP over queries, exact (eps = 0).
//
// usage: nanoflann_nn MODEL.ply QUERIES.ply ROUNDS REPEAT THREADS
// Reads the binary little-endian float PLY files `hicp perturb` writes.
#include <nanoflann.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

struct Cloud {
  std::vector<float> xyz;
  size_t kdtree_get_point_count() const { return xyz.size() / 3; }
  float kdtree_get_pt(size_t i, size_t d) const { return xyz[3 * i + d]; }
  template <class B> bool kdtree_get_bbox(B &) const { return false; }
};

static bool read_ply(const char *path, std::vector<float> &xyz)
{
  std::ifstream f(path, std::ios::binary);
  std::string line;
  size_t n = 0;
  int props = 0;
  bool in_vertex = false, binary = false;
  while (std::getline(f, line)) {
    if (line.rfind("format binary_little_endian", 0) == 0)
      binary = true;
    if (line.rfind("element vertex", 0) == 0) {
      n = std::strtoul(line.c_str() + 15, nullptr, 10);
      in_vertex = true;
    } else if (line.rfind("element", 0) == 0) {
      in_vertex = false;
    } else if (in_vertex && line.rfind("property float", 0) == 0) {
      props++;
    }
    if (line == "end_header")
      break;
  }
  if (!binary || props != 3 || n == 0)
    return false;
  xyz.resize(3 * n);
  f.read(reinterpret_cast<char *>(xyz.data()), (std::streamsize)(sizeof(float) * 3 * n));
  return (bool)f;
}

int main(int argc, char **argv)
{
  if (argc != 6) {
    std::fprintf(stderr, "usage: nanoflann_nn MODEL.ply QUERIES.ply ROUNDS REPEAT THREADS\n");
    return 2;
  }
  Cloud model;
  std::vector<float> q0;
  if (!read_ply(argv[1], model.xyz) || !read_ply(argv[2], q0)) {
    std::fprintf(stderr, "nanoflann_nn: cannot read the inputs\n");
    return 1;
  }
  const int rounds = std::atoi(argv[3]), repeat = std::atoi(argv[4]), threads = std::atoi(argv[5]);
  using Tree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<float, Cloud>,
                                                   Cloud, 3, uint32_t>;
  auto b0 = std::chrono::steady_clock::now();
  Tree tree(3, model, nanoflann::KDTreeSingleIndexAdaptorParams(10));
  auto b1 = std::chrono::steady_clock::now();
  const size_t n = q0.size() / 3;
  double c[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++)
      c[d] += q0[3 * i + d] / (double)n;
  std::vector<float> q(q0.size());
  std::vector<uint32_t> idx(n);
  std::vector<float> d2(n);
  std::vector<double> times;
  for (int k = 0; k < repeat; k++) {
    double busy = 0;
    for (int r = 0; r < rounds; r++) {
      double a = r * 0.05 * M_PI / 180.0, ca = std::cos(a), sa = std::sin(a);
      for (size_t i = 0; i < n; i++) {
        double x = q0[3 * i] - c[0], y = q0[3 * i + 1] - c[1];
        q[3 * i] = (float)(c[0] + ca * x - sa * y);
        q[3 * i + 1] = (float)(c[1] + sa * x + ca * y);
        q[3 * i + 2] = q0[3 * i + 2];
      }
      auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
      for (long long i = 0; i < (long long)n; i++) {
        uint32_t ix;
        float dd;
        nanoflann::KNNResultSet<float, uint32_t> rs(1);
        rs.init(&ix, &dd);
        tree.findNeighbors(rs, &q[3 * i], nanoflann::SearchParams(32, 0.0f));
        idx[i] = ix;
        d2[i] = dd;
      }
      auto t1 = std::chrono::steady_clock::now();
      busy += std::chrono::duration<double, std::milli>(t1 - t0).count();
    }
    times.push_back(busy);
  }
  std::vector<double> s = times;
  std::sort(s.begin(), s.end());
  double med = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  std::printf("{\"peer\":\"nanoflann\",\"threads\":%d,\"queries\":%zu,\"rounds\":%d,"
              "\"median_ms\":%.4f,\"ns_per_query\":%.2f,\"build_ms\":%.3f,\"checksum\":%llu}\n",
              threads, n, rounds, med, med * 1e6 / ((double)n * rounds),
              std::chrono::duration<double, std::milli>(b1 - b0).count(),
              (unsigned long long)(idx[0] + idx[n - 1]));
  return 0;
}
