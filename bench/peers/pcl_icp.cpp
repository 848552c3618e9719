// pcl_icp.cpp: PCL's IterativeClosestPoint (point-to-point, FLANN kd-tree,
// single-threaded), timed the way bench/run times hicp: the align() call
// alone, with the model prepared beforehand.  Left to itself PCL would
// build its kd-tree of the target inside align(); here the tree is built
// once, timed apart (tree_build_ms), and handed to every align() with
// setSearchMethodTarget(tree, true), which PCL then uses as it is.
//
// usage: pcl_icp MODEL.ply SCAN.ply|@LIST ITERS REPEAT [EPSILON [track]]
// Prints one JSON object per scan: times, median, transform, fitness score.
// EPSILON (default 0: never) stops when the MSE changes by less.  `track`
// registers the listed scans in order as a tracker's frames, each from the
// pose found for the one before (the first from the identity); each repeat
// runs the whole sequence again.
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

// One scan: its cloud, and what its registrations gave.
struct Frame {
  std::string path;
  pcl::PointCloud<pcl::PointXYZ>::Ptr cloud{new pcl::PointCloud<pcl::PointXYZ>};
  std::vector<double> times;
  Eigen::Matrix4f T = Eigen::Matrix4f::Identity();
  double fitness = 0.0;
  int done = 0;
};

// One align() from `guess`, timed; the pose and facts kept in `f`.
static void align(pcl::PointCloud<pcl::PointXYZ>::Ptr model, Tree::Ptr tree, Frame &f, int iters,
                  double eps, const Eigen::Matrix4f &guess)
{
  pcl::IterativeClosestPoint<pcl::PointXYZ, pcl::PointXYZ> icp;
  icp.setInputSource(f.cloud);
  icp.setInputTarget(model);
  icp.setSearchMethodTarget(tree, true); // built in main(), not again
  icp.setMaximumIterations(iters);
  // no distance cut-off; no early stop unless eps > 0, and then hicp's
  // rule: the MSE changed by less than eps.  Every criterion of PCL's
  // DefaultConvergenceCriteria is set: its absolute MSE test, left at its
  // default of 1e-12, stopped tracked frames of fandisk_large 1-2
  // iterations early (stop 43), and the relative one (euclidean fitness
  // epsilon) is off, as a relative 1e-11 is below the precision of PCL's
  // float distances and never stopped anything.
  const double never = -std::numeric_limits<double>::max();
  icp.setMaxCorrespondenceDistance(std::sqrt(std::numeric_limits<double>::max()) / 4);
  icp.setTransformationEpsilon(0.0);
  icp.setTransformationRotationEpsilon(0.0);
  icp.setEuclideanFitnessEpsilon(never);
  icp.getConvergeCriteria()->setAbsoluteMSE(eps > 0 ? eps : never);
  pcl::PointCloud<pcl::PointXYZ> out;
  auto t0 = std::chrono::steady_clock::now();
  icp.align(out, guess);
  auto t1 = std::chrono::steady_clock::now();
  f.times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  f.T = icp.getFinalTransformation();
  f.fitness = icp.getFitnessScore();
  f.done = icp.nr_iterations_;
}

static void print(const Frame &f, size_t model_points, int iters, double tree_ms)
{
  std::printf("{\"peer\":\"pcl\",\"version\":\"%s\",\"scan\":\"%s\",\"threads\":1,"
              "\"iterations\":%d,\"iterations_done\":%d,\"scan_points\":%zu,\"model_points\":%zu,"
              "\"median_ms\":%.4f,\"times_ms\":[",
              PCL_VERSION_PRETTY, f.path.c_str(), iters, f.done, f.cloud->size(), model_points,
              median(f.times));
  for (size_t i = 0; i < f.times.size(); i++)
    std::printf("%s%.4f", i ? "," : "", f.times[i]);
  std::printf("],\"includes_tree_build\":false,\"tree_build_ms\":%.4f,\"transform\":[", tree_ms);
  for (int i = 0; i < 16; i++)
    std::printf("%s%.9g", i ? "," : "", (double)f.T(i / 4, i % 4));
  std::printf("],\"fitness_score\":%.9g}\n", f.fitness);
  std::fflush(stdout);
}

int main(int argc, char **argv)
{
  const bool track = argc == 7 && std::string(argv[6]) == "track";
  if (argc != 5 && argc != 6 && !track) {
    std::fprintf(stderr, "usage: pcl_icp MODEL.ply SCAN.ply|@LIST ITERS REPEAT [EPSILON [track]]\n");
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
  const double eps = argc >= 6 ? std::atof(argv[5]) : 0.0;
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
  // read first: a tracker's frames arrive in memory
  std::vector<Frame> frames(scans.size());
  for (size_t i = 0; i < scans.size(); i++) {
    frames[i].path = scans[i];
    if (pcl::io::loadPLYFile(scans[i], *frames[i].cloud) < 0) {
      std::fprintf(stderr, "pcl_icp: cannot read %s\n", scans[i].c_str());
      return 1;
    }
  }
  const Eigen::Matrix4f I = Eigen::Matrix4f::Identity();
  if (track) {
    for (int r = 0; r < repeat; r++)
      for (size_t i = 0; i < frames.size(); i++)
        align(model, tree, frames[i], iters, eps, i ? frames[i - 1].T : I);
  } else {
    for (auto &f : frames)
      for (int r = 0; r < repeat; r++)
        align(model, tree, f, iters, eps, I);
  }
  for (const auto &f : frames)
    print(f, model->size(), iters, tree_ms);
  return 0;
}
