// The roscpp side of `udpros bench`: a publisher or subscriber of sensor_msgs/CompressedImage
// stamped at publish time, built by the harness with g++ and pkg-config.
//
//   roscpp_bench pub TOPIC --size BYTES --rate HZ (0: as fast as it can) --count N
//                          [--subscribers K]
//   roscpp_bench sub TOPIC --count N [--transport udp|tcp] [--idle SECONDS]
//
// Both print one line when done, `key=value` pairs the harness reads:
//   PUB sent=.. seconds=.. user=.. sys=.. rss_kb=..
//   SUB received=.. lost=.. seconds=.. p50_us=.. p99_us=.. max_us=.. user=.. sys=.. rss_kb=..
// and the subscriber prints `READY` once subscribed.
#include <ros/ros.h>
#include <ros/callback_queue.h>
#include <sensor_msgs/CompressedImage.h>
#include <sys/resource.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static std::string opt(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 0; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// Peak RSS from /proc/self/status (VmHWM), not getrusage's ru_maxrss: Linux carries
// ru_maxrss across fork and exec, so it would report the harness's own size.
static long peak_rss_kb() {
  long kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %ld", &kb) == 1) break;
    std::fclose(f);
  }
  return kb;
}

static void usage_line(char* out, size_t n) {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  std::snprintf(out, n, "user=%.6f sys=%.6f rss_kb=%ld",
                r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6,
                r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6, peak_rss_kb());
}

static std::vector<double> latencies_us;
static std::vector<long> seqs;  // of each latency, for --dump
static long expected = 0, received = 0, lost = 0;
static long last_seq = -1;
static ros::WallTime first, last;

static void on_image(const sensor_msgs::CompressedImage::ConstPtr& m) {
  ros::Time now = ros::Time::now();
  ros::WallTime wall = ros::WallTime::now();
  if (received == 0) first = wall;
  last = wall;
  latencies_us.push_back((now - m->header.stamp).toSec() * 1e6);
  long seq = static_cast<long>(m->header.seq);
  seqs.push_back(seq);
  if (last_seq >= 0 && seq > last_seq + 1) lost += seq - last_seq - 1;
  last_seq = std::max(last_seq, seq);
  if (++received >= expected) ros::shutdown();
}

static double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1) + 0.5)];
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: roscpp_bench pub|sub TOPIC [options]\n");
    return 2;
  }
  std::string mode = argv[1], topic = argv[2];
  ros::init(argc, argv, "roscpp_bench", ros::init_options::AnonymousName);
  ros::NodeHandle nh;
  char usage[160];
  if (mode == "pub") {
    size_t size = std::stoul(opt(argc, argv, "--size", "64"));
    double rate = std::stod(opt(argc, argv, "--rate", "0"));
    long count = std::stol(opt(argc, argv, "--count", "1000"));
    unsigned subscribers = std::stoul(opt(argc, argv, "--subscribers", "1"));
    ros::Publisher pub = nh.advertise<sensor_msgs::CompressedImage>(topic, 1000);
    // Wait for the subscribers, spinning so UDPROS handshakes complete.
    ros::WallTime deadline = ros::WallTime::now() + ros::WallDuration(30);
    while (ros::ok() && pub.getNumSubscribers() < subscribers && ros::WallTime::now() < deadline) {
      ros::spinOnce();
      ros::WallDuration(0.01).sleep();
    }
    ros::WallDuration(0.5).sleep();  // let every link settle
    sensor_msgs::CompressedImage msg;
    msg.format = "bench";
    msg.data.assign(size, 0x5a);
    ros::WallTime start = ros::WallTime::now();
    ros::WallDuration period(rate > 0 ? 1.0 / rate : 0.0);
    for (long i = 0; i < count && ros::ok(); ++i) {
      if (rate > 0) {
        ros::WallTime due = start + ros::WallDuration(period.toSec() * i);
        ros::WallTime now = ros::WallTime::now();
        if (due > now) (due - now).sleep();
      }
      msg.header.seq = static_cast<uint32_t>(i);
      msg.header.stamp = ros::Time::now();
      pub.publish(msg);
      ros::spinOnce();
    }
    double seconds = (ros::WallTime::now() - start).toSec();
    ros::WallDuration(1.0).sleep();  // let the last messages leave
    usage_line(usage, sizeof usage);
    std::printf("PUB sent=%ld seconds=%.3f %s\n", count, seconds, usage);
    return 0;
  }
  expected = std::stol(opt(argc, argv, "--count", "1000"));
  std::string transport = opt(argc, argv, "--transport", "udp");
  double idle = std::stod(opt(argc, argv, "--idle", "3"));
  latencies_us.reserve(expected);
  seqs.reserve(expected);
  ros::TransportHints hints = transport == "tcp" ? ros::TransportHints().tcp().tcpNoDelay()
                                                 : ros::TransportHints().udp();
  ros::Subscriber sub = nh.subscribe(topic, 100000, on_image, hints);
  std::printf("READY\n");
  std::fflush(stdout);
  ros::WallTime started = ros::WallTime::now();
  while (ros::ok()) {
    // What ros::spin() does: block on the callback queue, so delivery is not delayed.
    ros::getGlobalCallbackQueue()->callAvailable(ros::WallDuration(0.1));
    ros::WallTime now = ros::WallTime::now();
    bool quiet = received > 0 ? (now - last).toSec() > idle : (now - started).toSec() > 60;
    if (quiet) break;
  }
  std::string dump = opt(argc, argv, "--dump", "");
  if (!dump.empty()) {
    // One line per message, "seq latency_us", for the harness's fan-out figures and plot.
    if (FILE* f = std::fopen(dump.c_str(), "w")) {
      for (size_t i = 0; i < seqs.size(); ++i) std::fprintf(f, "%ld %.1f\n", seqs[i], latencies_us[i]);
      std::fclose(f);
    }
  }
  usage_line(usage, sizeof usage);
  if (last_seq >= 0) lost += std::max(0L, expected - 1 - last_seq);
  std::printf("SUB received=%ld lost=%ld seconds=%.3f p50_us=%.1f p99_us=%.1f max_us=%.1f %s\n",
              received, lost, received ? (last - first).toSec() : 0.0,
              percentile(latencies_us, 0.5), percentile(latencies_us, 0.99),
              latencies_us.empty() ? 0.0 : *std::max_element(latencies_us.begin(), latencies_us.end()),
              usage);
  return 0;
}
