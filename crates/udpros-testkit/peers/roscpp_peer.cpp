// A roscpp node for udpros's interop tests (built by the tests with g++ and pkg-config).
//
//   roscpp_peer pub TOPIC [--type string|bytes] [--rate HZ] [--size N] [--count N] [--latch]
//   roscpp_peer sub TOPIC [--type string|bytes|range] [--hints tcp|udp|udp,tcp|tcp,udp]
//                         [--max-datagram N] [--count N]
//
// pub sends "hello N" strings, or UInt8MultiArray messages of N bytes whose first 4 bytes
// are the message number (LE) and the rest a pattern derived from it. sub prints one line
// per message: "RECV <number> <size> <ok|corrupt>", and "READY" once subscribed.
#include <ros/ros.h>
#include <std_msgs/String.h>
#include <std_msgs/UInt8MultiArray.h>
#include <sensor_msgs/Range.h>
#include <cstdio>
#include <cstring>
#include <string>

static std::string type = "string";
static long count = -1;
static long received = 0;

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

static uint8_t pattern(uint32_t n, size_t i) { return static_cast<uint8_t>(n * 31 + i * 7); }

static void done_if_counted() {
  ++received;
  std::fflush(stdout);
  if (count > 0 && received >= count) ros::shutdown();
}

static void on_string(const std_msgs::String::ConstPtr& m) {
  std::printf("RECV %s %zu ok\n", m->data.c_str(), m->data.size());
  done_if_counted();
}

static void on_range(const sensor_msgs::Range::ConstPtr& m) {
  std::printf("RECV range %.3f %s\n", m->range, m->header.frame_id.c_str());
  done_if_counted();
}

static void on_bytes(const std_msgs::UInt8MultiArray::ConstPtr& m) {
  uint32_t n = 0;
  bool ok = m->data.size() >= 4;
  if (ok) std::memcpy(&n, m->data.data(), 4);
  for (size_t i = 4; ok && i < m->data.size(); ++i) ok = m->data[i] == pattern(n, i);
  std::printf("RECV %u %zu %s\n", n, m->data.size(), ok ? "ok" : "corrupt");
  done_if_counted();
}

int main(int argc, char** argv) {
  ros::init(argc, argv, "roscpp_peer", ros::init_options::AnonymousName);
  if (argc < 3) { std::fprintf(stderr, "usage: roscpp_peer pub|sub TOPIC [options]\n"); return 2; }
  std::string mode = argv[1], topic = argv[2], value;
  if (arg(argc, argv, "--type", &value)) type = value;
  if (arg(argc, argv, "--count", &value)) count = std::stol(value);
  ros::NodeHandle nh;
  if (mode == "pub") {
    double rate = 10;
    size_t size = 64;
    if (arg(argc, argv, "--rate", &value)) rate = std::stod(value);
    if (arg(argc, argv, "--size", &value)) size = std::stoul(value);
    bool latch = flag(argc, argv, "--latch");
    ros::Publisher pub = type == "bytes" ? nh.advertise<std_msgs::UInt8MultiArray>(topic, 100, latch)
                                         : nh.advertise<std_msgs::String>(topic, 100, latch);
    ros::Rate loop(rate);
    for (uint32_t n = 0; ros::ok() && (count < 0 || n < count); ++n) {
      if (type == "bytes") {
        std_msgs::UInt8MultiArray m;
        m.data.resize(size < 4 ? 4 : size);
        std::memcpy(m.data.data(), &n, 4);
        for (size_t i = 4; i < m.data.size(); ++i) m.data[i] = pattern(n, i);
        pub.publish(m);
      } else {
        std_msgs::String m;
        m.data = "hello " + std::to_string(n);
        pub.publish(m);
      }
      ros::spinOnce();
      loop.sleep();
    }
    // Keep serving latched data and connections until killed when counted.
    while (ros::ok() && latch) { ros::spinOnce(); ros::Duration(0.01).sleep(); }
    return 0;
  }
  ros::TransportHints hints;
  std::string h = "tcp";
  arg(argc, argv, "--hints", &h);
  size_t start = 0;
  while (start <= h.size()) {
    size_t end = h.find(',', start);
    std::string one = h.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (one == "udp") hints = hints.unreliable();
    if (one == "tcp") hints = hints.reliable();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (arg(argc, argv, "--max-datagram", &value)) hints = hints.maxDatagramSize(std::stoi(value));
  ros::Subscriber sub = type == "bytes"   ? nh.subscribe(topic, 1000, on_bytes, hints)
                       : type == "range" ? nh.subscribe(topic, 1000, on_range, hints)
                                         : nh.subscribe(topic, 1000, on_string, hints);
  std::printf("READY\n");
  std::fflush(stdout);
  // roscpp answers UDPROS requests only while its callback queue is spun.
  ros::spin();
  return 0;
}
