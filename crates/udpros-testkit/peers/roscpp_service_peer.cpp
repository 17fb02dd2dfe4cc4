// A roscpp service peer for udpros's interop tests (built by the tests with g++ and pkg-config).
//
//   roscpp_service_peer serve NAME setbool|blob [--sleep-ms N]
//       setbool: data=true -> (true, "on"); data=false -> the callback returns false
//       blob: echoes the string; prints "READY" once advertised
//   roscpp_service_peer call NAME setbool|blob [--persistent] [--count N] [--size N]
//                                              [--dump FILE]
//       prints "OK <success> <message>" / "OK <size> <same|different>" per call, or "FAIL";
//       with --dump (the benchmark), writes "<call> <round trip us>" per call to FILE
//       instead and prints "CALLS ok=N failed=M" at the end
//
// blob is udpros_test/Blob, "string data --- string data", declared here by hand: both
// halves are std_msgs/String, so the service traits are all roscpp needs.
#include <ros/ros.h>
#include <std_msgs/String.h>
#include <std_srvs/SetBool.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace ros {
namespace service_traits {
template <> struct MD5Sum<std_msgs::String> {
  static const char* value() { return "a9e4701c829f791367680c5f8ed06ff4"; }
  static const char* value(const std_msgs::String&) { return value(); }
};
template <> struct DataType<std_msgs::String> {
  static const char* value() { return "udpros_test/Blob"; }
  static const char* value(const std_msgs::String&) { return value(); }
};
}  // namespace service_traits
}  // namespace ros

static bool arg(int argc, char** argv, const char* name, std::string* out) {
  for (int i = 0; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) { *out = argv[i + 1]; return true; }
  return false;
}

static bool flag(int argc, char** argv, const char* name) {
  for (int i = 0; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

static long sleep_ms = 0;

static bool on_set_bool(std_srvs::SetBool::Request& req, std_srvs::SetBool::Response& res) {
  if (sleep_ms > 0) ros::Duration(sleep_ms / 1000.0).sleep();
  if (!req.data) return false;
  res.success = true;
  res.message = "on";
  return true;
}

static bool on_blob(std_msgs::String& req, std_msgs::String& res) {
  res.data = req.data;
  return true;
}

static std::string blob_of(size_t size) {
  std::string s(size, 'a');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

int main(int argc, char** argv) {
  ros::init(argc, argv, "roscpp_service_peer", ros::init_options::AnonymousName);
  if (argc < 4) {
    std::fprintf(stderr, "usage: roscpp_service_peer serve|call NAME setbool|blob [options]\n");
    return 2;
  }
  std::string mode = argv[1], name = argv[2], type = argv[3], value;
  ros::NodeHandle nh;
  if (mode == "serve") {
    if (arg(argc, argv, "--sleep-ms", &value)) sleep_ms = std::stol(value);
    ros::ServiceServer server = type == "blob" ? nh.advertiseService(name, on_blob)
                                               : nh.advertiseService(name, on_set_bool);
    std::printf("READY\n");
    std::fflush(stdout);
    // Several threads, so one slow call does not hold the others.
    ros::MultiThreadedSpinner spinner(4);
    spinner.spin();
    return 0;
  }
  long count = 1;
  size_t size = 16;
  if (arg(argc, argv, "--count", &value)) count = std::stol(value);
  if (arg(argc, argv, "--size", &value)) size = std::stoul(value);
  bool persistent = flag(argc, argv, "--persistent");
  std::string dump_path;
  FILE* dump = arg(argc, argv, "--dump", &dump_path) ? std::fopen(dump_path.c_str(), "w") : nullptr;
  long ok_calls = 0;
  ros::ServiceClient client = type == "blob"
      ? nh.serviceClient<std_msgs::String, std_msgs::String>(name, persistent)
      : nh.serviceClient<std_srvs::SetBool>(name, persistent);
  for (long i = 0; i < count; ++i) {
    bool ok;
    if (type == "blob") {
      std_msgs::String req, res;
      req.data = blob_of(size);
      auto started = std::chrono::steady_clock::now();
      ok = client.call(req, res);
      auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count();
      if (dump) {
        if (ok) std::fprintf(dump, "%ld %.1f\n", i, us);
        ok_calls += ok ? 1 : 0;
        continue;
      }
      if (ok) std::printf("OK %zu %s\n", res.data.size(), res.data == req.data ? "same" : "different");
    } else {
      std_srvs::SetBool srv;
      srv.request.data = i % 2 == 0;
      ok = client.call(srv);
      if (ok) std::printf("OK %d %s\n", srv.response.success ? 1 : 0, srv.response.message.c_str());
    }
    if (!ok) std::printf("FAIL\n");
    std::fflush(stdout);
  }
  if (dump) {
    std::fclose(dump);
    std::printf("CALLS ok=%ld failed=%ld\n", ok_calls, count - ok_calls);
  }
  return 0;
}
