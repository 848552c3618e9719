// pcl_icp.cpp: PCL's IterativeClosestPoint (point-to-point, FLANN kd-tree,
// single-threaded), timed the way bench/run times hicp: the align() call
// alone; PCL builds its kd-tree of the target inside it (included, said so).
//
// usage: pcl_icp MODEL.ply SCAN.ply ITERS REPEAT
// Prints one JSON object: times, median, transform, fitness score.
#include <pcl/io/ply_io.h>
#include <pcl/point_types.h>
#include <pcl/registration/icp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

int main(int argc, char **argv)
{
  if (argc != 5) {
    std::fprintf(stderr, "usage: pcl_icp MODEL.ply SCAN.ply ITERS REPEAT\n");
    return 2;
  }
  pcl::PointCloud<pcl::PointXYZ>::Ptr model(new pcl::PointCloud<pcl::PointXYZ>);
  pcl::PointCloud<pcl::PointXYZ>::Ptr scan(new pcl::PointCloud<pcl::PointXYZ>);
  if (pcl::io::loadPLYFile(argv[1], *model) < 0 || pcl::io::loadPLYFile(argv[2], *scan) < 0) {
    std::fprintf(stderr, "pcl_icp: cannot read the inputs\n");
    return 1;
  }
  const int iters = std::atoi(argv[3]), repeat = std::atoi(argv[4]);
  std::vector<double> times;
  Eigen::Matrix4f T = Eigen::Matrix4f::Identity();
  double fitness = 0.0;
  for (int r = 0; r < repeat; r++) {
    pcl::IterativeClosestPoint<pcl::PointXYZ, pcl::PointXYZ> icp;
    icp.setInputSource(scan);
    icp.setInputTarget(model);
    icp.setMaximumIterations(iters);
    // no distance cut-off and no early stop
    icp.setMaxCorrespondenceDistance(std::sqrt(std::numeric_limits<double>::max()) / 4);
    icp.setTransformationEpsilon(0.0);
    icp.setTransformationRotationEpsilon(0.0);
    icp.setEuclideanFitnessEpsilon(-std::numeric_limits<double>::max());
    pcl::PointCloud<pcl::PointXYZ> out;
    auto t0 = std::chrono::steady_clock::now();
    icp.align(out);
    auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    T = icp.getFinalTransformation();
    fitness = icp.getFitnessScore();
  }
  std::vector<double> s = times;
  std::sort(s.begin(), s.end());
  double med = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  std::printf("{\"peer\":\"pcl\",\"version\":\"%s\",\"threads\":1,\"iterations\":%d,"
              "\"scan_points\":%zu,\"model_points\":%zu,\"median_ms\":%.4f,\"times_ms\":[",
              PCL_VERSION_PRETTY, iters, scan->size(), model->size(), med);
  for (size_t i = 0; i < times.size(); i++)
    std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("],\"includes_tree_build\":true,\"transform\":[");
  for (int i = 0; i < 16; i++)
    std::printf("%s%.9g", i ? "," : "", (double)T(i / 4, i % 4));
  std::printf("],\"fitness_score\":%.9g}\n", fitness);
  return 0;
}
