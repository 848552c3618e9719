// pcl_icp.cpp: PCL's IterativeClosestPoint (point-to-point, FLANN kd-tree,
// single-threaded), timed the way bench/run times hicp: the align() call
// alone, with the model prepared beforehand.  Left to itself PCL would
// build its kd-tree of the target inside align(); here the tree is built
// once, timed apart (tree_build_ms), and handed to every align() with
// setSearchMethodTarget(tree, true), which PCL then uses as it is.
//
// usage: pcl_icp MODEL.ply SCAN.ply|@LIST ITERS REPEAT [EPSILON]
// Prints one JSON object per scan: times, median, transform, fitness score.
// EPSILON (default 0: never) stops when the fitness changes less.
#include <pcl/io/ply_io.h>
#include <pcl/point_types.h>
#include <pcl/registration/icp.h>
#include <pcl/search/kdtree.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

using Tree = pcl::search::KdTree<pcl::PointXYZ>;

static double median(std::vector<double> s)
{
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}

static int run(pcl::PointCloud<pcl::PointXYZ>::Ptr model, Tree::Ptr tree, double tree_ms,
               const std::string &path, int iters, int repeat, double eps)
{
  pcl::PointCloud<pcl::PointXYZ>::Ptr scan(new pcl::PointCloud<pcl::PointXYZ>);
  if (pcl::io::loadPLYFile(path, *scan) < 0) {
    std::fprintf(stderr, "pcl_icp: cannot read %s\n", path.c_str());
    return 1;
  }
  std::vector<double> times;
  Eigen::Matrix4f T = Eigen::Matrix4f::Identity();
  double fitness = 0.0;
  int done = 0;
  for (int r = 0; r < repeat; r++) {
    pcl::IterativeClosestPoint<pcl::PointXYZ, pcl::PointXYZ> icp;
    icp.setInputSource(scan);
    icp.setInputTarget(model);
    icp.setSearchMethodTarget(tree, true); // built in main(), not again
    icp.setMaximumIterations(iters);
    // no distance cut-off; no early stop unless eps > 0
    icp.setMaxCorrespondenceDistance(std::sqrt(std::numeric_limits<double>::max()) / 4);
    icp.setTransformationEpsilon(0.0);
    icp.setTransformationRotationEpsilon(0.0);
    icp.setEuclideanFitnessEpsilon(eps > 0 ? eps : -std::numeric_limits<double>::max());
    pcl::PointCloud<pcl::PointXYZ> out;
    auto t0 = std::chrono::steady_clock::now();
    icp.align(out);
    auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    T = icp.getFinalTransformation();
    fitness = icp.getFitnessScore();
    done = icp.nr_iterations_;
  }
  const double med = median(times);
  std::printf("{\"peer\":\"pcl\",\"version\":\"%s\",\"scan\":\"%s\",\"threads\":1,"
              "\"iterations\":%d,\"iterations_done\":%d,\"scan_points\":%zu,\"model_points\":%zu,"
              "\"median_ms\":%.4f,\"times_ms\":[",
              PCL_VERSION_PRETTY, path.c_str(), iters, done, scan->size(), model->size(), med);
  for (size_t i = 0; i < times.size(); i++)
    std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("],\"includes_tree_build\":false,\"tree_build_ms\":%.4f,\"transform\":[", tree_ms);
  for (int i = 0; i < 16; i++)
    std::printf("%s%.9g", i ? "," : "", (double)T(i / 4, i % 4));
  std::printf("],\"fitness_score\":%.9g}\n", fitness);
  std::fflush(stdout);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: pcl_icp MODEL.ply SCAN.ply|@LIST ITERS REPEAT [EPSILON]\n");
    return 2;
  }
  pcl::PointCloud<pcl::PointXYZ>::Ptr model(new pcl::PointCloud<pcl::PointXYZ>);
  if (pcl::io::loadPLYFile(argv[1], *model) < 0) {
    std::fprintf(stderr, "pcl_icp: cannot read %s\n", argv[1]);
    return 1;
  }
  const int iters = std::atoi(argv[3]), repeat = std::atoi(argv[4]);
  // The model's kd-tree, as align() would build it (pcl::search::KdTree,
  // FLANN), built three times for a median build time; the last one is used.
  Tree::Ptr tree;
  std::vector<double> builds;
  for (int b = 0; b < 3; b++) {
    tree.reset(new Tree);
    auto t0 = std::chrono::steady_clock::now();
    tree->setInputCloud(model);
    auto t1 = std::chrono::steady_clock::now();
    builds.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const double tree_ms = median(builds);
  const double eps = argc == 6 ? std::atof(argv[5]) : 0.0;
  std::vector<std::string> scans;
  if (argv[2][0] == '@') {
    std::ifstream lf(argv[2] + 1);
    std::string line;
    while (std::getline(lf, line))
      if (!line.empty())
        scans.push_back(line);
  } else {
    scans.push_back(argv[2]);
  }
  for (const auto &p : scans)
    if (run(model, tree, tree_ms, p, iters, repeat, eps) != 0)
      return 1;
  return 0;
}
