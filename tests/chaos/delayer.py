"""A userspace packet delayer: what `tc qdisc ... netem delay MS JITTER` does, for kernels
without sch_netem (the chaos harness's delay and jitter; docs/reliability.md "Network faults").

Usage (as root, in the namespace whose packets it delays):
  delayer.py --queue N --ms MS [--jitter J] [--seed S]
and then iptables rules that send the packets to it, e.g.
  iptables -t mangle -A OUTPUT -o DEV -j NFQUEUE --queue-num N --queue-bypass

Contract:
- It binds nfnetlink_queue queue N of its namespace (standard library only: a raw
  NETLINK_NETFILTER socket, no libnetfilter_queue), asks for metadata only, and prints "ready"
  on stdout once the kernel acknowledged the binding; a failure to bind exits 2 with one line.
- Each queued packet is accepted MS +- J ms after it arrived (uniform, never below 0: netem's
  default jitter), independently of the others, so jitter reorders packets as netem's does.
  Nothing is dropped: a full kernel queue lets packets through (fail-open), and with
  --queue-bypass on the rule a delayer that is gone lets them through too.
- SIGTERM or SIGINT: every held packet is accepted at once, the queue is unbound, one summary
  line goes to stderr ("delayer: queue N: P packets, delay mean/min/max ms, released up to L ms
  late, H held at the end": L is the loop's own lag) and it exits 0.
- One event loop: select() on the netlink socket and a wake-up pipe with the next release as its
  deadline; nothing polls on a sleep.
"""
import argparse
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5
SO_RCVBUFFORCE = 33  # <asm-generic/socket.h>; the socket module lacks it
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
NLMSG_HEADER = struct.Struct("=IHHII")  # len, type, flags, seq, pid
NFGENMSG = struct.Struct("!BBH")        # family, version, res_id (the queue number, big-endian)
NLATTR = struct.Struct("=HH")           # len, type
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_UNBIND = 1, 2
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 0x1
NF_ACCEPT = 1
QUEUE_MAXLEN = 65536


def _align(n):
    return (n + 3) & ~3


def attribute(kind, data):
    raw = NLATTR.pack(NLATTR.size + len(data), kind) + data
    return raw + b"\0" * (_align(len(raw)) - len(raw))


def message(msg, queue, attributes, flags=NLM_F_REQUEST, seq=0):
    """One nfnetlink_queue message (msg: NFQNL_MSG_*) for `queue`."""
    body = NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + b"".join(attributes)
    return NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg,
                             flags, seq, 0) + body


def verdict(queue, packet_id):
    return message(NFQNL_MSG_VERDICT, queue,
                   [attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))])


def messages(data):
    """(type, payload after the nlmsghdr) of each netlink message in one datagram."""
    offset = 0
    while offset + NLMSG_HEADER.size <= len(data):
        length, kind, _, _, _ = NLMSG_HEADER.unpack_from(data, offset)
        if length < NLMSG_HEADER.size:
            break
        yield kind, data[offset + NLMSG_HEADER.size:offset + length]
        offset += _align(length)


def packet_id(payload):
    """The packet id of an NFQNL_MSG_PACKET payload (nfgenmsg, then attributes), or None."""
    offset = NFGENMSG.size
    while offset + NLATTR.size <= len(payload):
        length, kind = NLATTR.unpack_from(payload, offset)
        if length < NLATTR.size:
            return None
        if kind & 0x3fff == NFQA_PACKET_HDR:
            return struct.unpack_from("!I", payload, offset + NLATTR.size)[0]
        offset += _align(length)
    return None


class Delayer:
    def __init__(self, queue, ms, jitter, rng):
        self.queue, self.ms, self.jitter, self.rng = queue, ms, jitter, rng
        self.held = []  # heap of (release time, arrival order, packet id)
        self.count, self.total, self.least, self.most = 0, 0.0, None, 0.0
        self.late = 0.0  # the most a packet was released after its time (the loop's own lag)
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))

    def bind(self):
        """Binds the queue (metadata only, fail-open); raises OSError with the kernel's error."""
        self._configure(1, [attribute(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0,
                                                                socket.AF_INET))])
        self._configure(2, [attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
                            attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)),
                            attribute(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
                            attribute(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))])

    def _configure(self, seq, attributes):
        self.sock.send(message(NFQNL_MSG_CONFIG, self.queue, attributes,
                               NLM_F_REQUEST | NLM_F_ACK, seq))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.sock], [], [], deadline - time.monotonic())
            if not ready:
                break
            for kind, payload in messages(self.sock.recv(1 << 16)):
                if kind == NLMSG_ERROR:
                    error = -struct.unpack_from("=i", payload)[0]
                    if error:
                        raise OSError(error, os.strerror(error))
                    return
        raise OSError("no acknowledgement from nfnetlink_queue within 5 s")

    def receive(self, now):
        try:
            data = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        for kind, payload in messages(data):
            if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                continue
            pid = packet_id(payload)
            if pid is None:
                continue
            delay = max(0.0, self.rng.uniform(self.ms - self.jitter, self.ms + self.jitter))
            heapq.heappush(self.held, (now + delay / 1000.0, self.count, pid))
            self.count += 1
            self.total += delay
            self.least = delay if self.least is None else min(self.least, delay)
            self.most = max(self.most, delay)

    def release(self, now):
        """Accepts every packet due by `now` in one send; the next release time, or None."""
        batch = []
        while self.held and self.held[0][0] <= now:
            due, _, pid = heapq.heappop(self.held)
            if now != float("inf"):
                self.late = max(self.late, (now - due) * 1000.0)
            batch.append(verdict(self.queue, pid))
        if batch:
            self.sock.send(b"".join(batch))
        return self.held[0][0] if self.held else None

    def summary(self):
        mean = self.total / self.count if self.count else 0.0
        return ("delayer: queue %d: %d packets, delay mean %.1f min %.1f max %.1f ms, released "
                "up to %.1f ms late, %d held at the end" % (
                    self.queue, self.count, mean, self.least or 0.0, self.most, self.late,
                    len(self.held)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=int, default=0)
    parser.add_argument("--ms", type=float, required=True)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--seed", default=None)
    args = parser.parse_args()
    if args.ms < 0 or args.jitter < 0 or not 0 <= args.queue <= 65535:
        print("delayer: --ms and --jitter must be >= 0 and --queue 0..65535", file=sys.stderr)
        return 2

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.append(True))
    try:
        delayer = Delayer(args.queue, args.ms, args.jitter, random.Random(args.seed))
        delayer.bind()
    except OSError as e:
        print("delayer: cannot bind nfnetlink_queue %d (%s): run it as root in a namespace "
              "whose kernel has CONFIG_NETFILTER_NETLINK_QUEUE" % (args.queue, e), file=sys.stderr)
        return 2
    print("ready", flush=True)
    due = None
    while not stopping:
        timeout = None if due is None else max(0.0, due - time.monotonic())
        ready, _, _ = select.select([delayer.sock, wake_read], [], [], timeout)
        if delayer.sock in ready:
            delayer.receive(time.monotonic())
        due = delayer.release(time.monotonic())
    summary = delayer.summary()
    delayer.release(float("inf"))
    print(summary, file=sys.stderr, flush=True)
    delayer.sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
