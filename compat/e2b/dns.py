"""A DNS server for the domain-mode tests of compat/e2b/run.sh (standard
library only): on UDP ADDR:53 it answers A queries for DOMAIN and every
name under it with ADDR, AAAA queries for them with no address, and
refuses every other name, so nothing the tests resolve leaves the host.

Usage: python3 dns.py ADDR DOMAIN
"""

import socket
import struct
import sys

addr, domain = sys.argv[1], sys.argv[2].lower().rstrip(".")
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind((addr, 53))
print("listening", flush=True)


def parse_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels), off + 1
        if n & 0xC0:  # compression never appears in a question
            raise ValueError("compressed name")
        labels.append(msg[off + 1 : off + 1 + n].decode("ascii", "replace"))
        off += 1 + n


while True:
    msg, peer = sock.recvfrom(4096)
    try:
        qid, flags, qd = struct.unpack("!HHH", msg[:6])
        name, end = parse_name(msg, 12)
        qtype, qclass = struct.unpack("!HH", msg[end : end + 4])
        question = msg[12 : end + 4]
    except (ValueError, IndexError, struct.error):
        continue
    name = name.lower().rstrip(".")
    ours = name == domain or name.endswith("." + domain)
    rd = flags & 0x0100
    answers = b""
    if not ours:
        rcode, count = 5, 0  # REFUSED
    elif qtype == 1:
        rcode, count = 0, 1
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(addr)
    else:
        rcode, count = 0, 0
    header = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | rd | 0x0080 | rcode, 1, count, 0, 0)
    sock.sendto(header + question + answers, peer)
