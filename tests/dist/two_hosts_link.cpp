// strata_two_hosts_link: a point-to-point link between two network namespaces that delays every packet, for
// tests/dist/two_hosts_test.sh where the kernel has no netem qdisc.
//
//   strata_two_hosts_link DELAY_US NAMESPACE1 TUN1 NAMESPACE2 TUN2
//
// Note [A delaying link without netem]
// `tc qdisc add ... netem delay 1ms` needs CONFIG_NET_SCH_NETEM, which some kernels (this machine's, a Firecracker
// guest's) lack. The same link is made in user space: a TUN device in each namespace (made beforehand by `ip tuntap
// add`, with its address and route), and this program holding both. Every packet read from one device is written
// to the other DELAY_US microseconds later, in order, with no loss and no rate limit: what netem's `delay` on both
// ends of a veth pair does (each direction delayed once). The program enters each namespace to attach to its device
// (TUNSETIFF finds a device by name in the caller's namespace); the file descriptors then keep the devices whatever
// namespace the program is in. It prints "attached" once both are held, and runs until a signal ends it.
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "strata_two_hosts_link: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

int attach(const std::string& ns, const std::string& device) {
  const std::string path = "/run/netns/" + ns;
  const int ns_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) fail("cannot open " + path);
  if (setns(ns_fd, CLONE_NEWNET) != 0) fail("cannot enter network namespace " + ns);
  close(ns_fd);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail("cannot open /dev/net/tun");
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(request.ifr_name, IFNAMSIZ, "%s", device.c_str());
  if (ioctl(fd, TUNSETIFF, &request) != 0) fail("cannot attach to " + device + " in " + ns);
  return fd;
}

struct Packet {
  Clock::time_point due;
  std::vector<char> bytes;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s DELAY_US NAMESPACE1 TUN1 NAMESPACE2 TUN2\n", argv[0]);
    return 2;
  }
  const auto delay = std::chrono::microseconds(std::strtol(argv[1], nullptr, 10));
  const int fds[2] = {attach(argv[2], argv[3]), attach(argv[4], argv[5])};
  std::printf("attached\n");
  std::fflush(stdout);

  std::deque<Packet> queues[2];  // queues[i]: read from fds[i], to be written to fds[1 - i]
  std::vector<char> buffer(65536);
  for (;;) {
    Clock::time_point next = Clock::time_point::max();
    for (const auto& q : queues)
      if (!q.empty() && q.front().due < next) next = q.front().due;
    timespec timeout{};
    timespec* wait = nullptr;  // no packet queued: wait for one
    if (next != Clock::time_point::max()) {
      const auto left = std::max(Clock::duration::zero(), next - Clock::now());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timeout.tv_sec = ns / 1000000000;
      timeout.tv_nsec = ns % 1000000000;
      wait = &timeout;
    }
    pollfd polled[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (ppoll(polled, 2, wait, nullptr) < 0 && errno != EINTR) fail("ppoll");
    const auto now = Clock::now();
    for (int i = 0; i < 2; ++i) {
      if (!(polled[i].revents & POLLIN)) continue;
      for (;;) {  // every packet waiting now
        const ssize_t n = read(fds[i], buffer.data(), buffer.size());
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n < 0) fail("read");
        queues[i].push_back({now + delay, std::vector<char>(buffer.begin(), buffer.begin() + n)});
      }
    }
    for (int i = 0; i < 2; ++i) {
      while (!queues[i].empty() && queues[i].front().due <= Clock::now()) {
        const auto& bytes = queues[i].front().bytes;
        // A write the device refuses (its queue full) drops the packet, as a full link does; TCP resends it.
        if (write(fds[1 - i], bytes.data(), bytes.size()) < 0 && errno != EAGAIN) fail("write");
        queues[i].pop_front();
      }
    }
  }
}
