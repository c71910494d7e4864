#!/usr/bin/python3
"""Walks the MPA streams (RFC 5044) of one TCP connection in a capture, independently of libsdp's
code and of Wireshark's MPA dissector, and checks every FPDU: framing by ULPDU_Length, padding,
each marker's place (every 512 octets from the first octet after the sender's Request or Reply)
and FPDUPTR, and the CRC32c when either side asked for it. It also counts the FPDUs that sit
alone in a TCP segment: Wireshark's dissector expects that layout when markers are on; and the
segments that begin inside an FPDU (RFC 5044 section 5 asks senders for none). A capture sees
segments only where the kernel cut them before the capture point (scripts/aligncheck.sh);
otherwise its "segments" are the kernel's larger buffers.

usage: mpacheck.py CAPTURE PORT      (PORT: the SDP port, one end of the connection)
Exit status 0 when every FPDU checks out, 1 otherwise, 2 on a usage or capture problem.
tshark reads the capture (it only reassembles TCP payload here, it decodes nothing).
"""

import struct
import subprocess
import sys

MARKER_INTERVAL = 512
KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
FLAG_M, FLAG_C = 0x80, 0x40


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def streams(capture, port):
    """Returns {source port: (bytes, set of segment boundaries)} for each direction."""
    out = subprocess.run(
        ["tshark", "-n", "-r", capture, "-o", "tcp.desegment_tcp_streams:FALSE",
         "-Y", f"tcp.port == {port} && tcp.len > 0",
         "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.seq_raw", "-e", "tcp.payload"],
        capture_output=True, text=True, check=True).stdout
    segs = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 3 or not f[2]:
            continue
        segs.setdefault(f[0], []).append((int(f[1]), bytes.fromhex(f[2].replace(":", ""))))
    result = {}
    for sport, lst in segs.items():
        base = lst[0][0]
        data = bytearray()
        bounds = set()
        for seq, payload in sorted(lst, key=lambda s: (s[0] - base) % (1 << 32)):
            off = (seq - base) % (1 << 32)
            if off + len(payload) <= len(data):
                continue  # retransmission
            if off > len(data):
                raise SystemExit(f"mpacheck: port {sport}: bytes {len(data)}..{off} were not captured")
            bounds.add(off)
            data += payload[len(data) - off:]
        bounds.add(len(data))
        result[sport] = (bytes(data), bounds)
    return result


class Direction:
    """One direction's MPA stream after its Request or Reply."""

    def __init__(self, data, start, markers):
        self.data, self.start, self.markers = data, start, markers
        self.pos = start
        self.bad_markers = 0

    def marker_at(self, pos):
        return self.markers and (pos - self.start) % MARKER_INTERVAL == 0

    def check_marker(self, hdr):
        res, ptr = struct.unpack(">HH", self.data[self.pos:self.pos + 4])
        if res != 0 or ptr != (self.pos - hdr) % 65536:
            self.bad_markers += 1
        self.pos += 4

    def take(self, n, hdr):
        """Consumes n octets of FPDU content, skipping (and checking) markers."""
        while n > 0:
            if self.pos >= len(self.data):
                raise EOFError
            if self.marker_at(self.pos):
                self.check_marker(hdr)
                continue
            step = n
            if self.markers:
                step = min(n, MARKER_INTERVAL - (self.pos - self.start) % MARKER_INTERVAL)
            self.pos += step
            n -= step
        if self.pos > len(self.data):
            raise EOFError


def walk(name, data, bounds, markers, crc_on):
    d = Direction(data, 20 + struct.unpack(">H", data[18:20])[0], markers)
    fpdus = bad_crc = alone = 0
    on_marker, starts = [], set()
    ok = True
    while d.pos < len(data):
        first = d.pos
        hdr = first
        if d.marker_at(first):  # a marker before ULPDU_Length belongs to this FPDU (FPDUPTR 0)
            d.check_marker(first)
            hdr = d.pos
        try:
            # FPDUs and markers are multiples of 4 octets from the stream's start, so no marker
            # splits ULPDU_Length.
            if d.pos + 2 > len(data):
                raise EOFError
            ulpdu_len = struct.unpack(">H", data[d.pos:d.pos + 2])[0]
            d.take(2 + ulpdu_len + (4 - (2 + ulpdu_len) % 4) % 4, hdr)
            if d.marker_at(d.pos):  # a marker between PAD and CRC belongs to this FPDU
                d.check_marker(hdr)
            if d.pos + 4 > len(data):
                raise EOFError
        except EOFError:
            print(f"  {name}: FPDU at stream offset {first} is cut short by the end of the capture")
            ok = False
            break
        starts.add(first)
        sent = struct.unpack("<I", data[d.pos:d.pos + 4])[0]
        if crc_on and crc32c(data[first:d.pos]) != sent:
            bad_crc += 1
        d.pos += 4
        fpdus += 1
        if first in bounds and d.pos in bounds and not any(first < b < d.pos for b in bounds):
            alone += 1
        if d.pos < len(data) and d.marker_at(d.pos):
            on_marker.append(first)
    # RFC 5044 section 5: a sender should start every TCP segment with an FPDU (several whole
    # FPDUs may share one). Counted over the segments the capture saw, after the Request or Reply.
    inside = sum(1 for b in bounds if d.start < b < d.pos and b not in starts)
    print(f"  {name}: markers={'on' if markers else 'off'} crc={'on' if crc_on else 'off'} "
          f"FPDUs={fpdus} bad CRC={bad_crc} bad markers={d.bad_markers} "
          f"alone in their TCP segment={alone} segments that begin inside an FPDU={inside}")
    if on_marker:
        # The marker after such an FPDU is the next FPDU's (RFC 5044 section 4.3); tshark 4.0
        # counts it in this one. Offsets from the direction's first octet (TCP's relative
        # sequence number less one), for wirecheck.sh to tell that misreading from others.
        print(f"  {name}: FPDUs that end on a marker position: {len(on_marker)}, "
              f"at stream offsets {' '.join(map(str, on_marker))}")
    return ok and fpdus > 0 and bad_crc == 0 and d.bad_markers == 0


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    dirs = streams(sys.argv[1], sys.argv[2])
    hello = {}
    for sport, (data, _) in dirs.items():
        if len(data) < 20 or data[:16] not in (KEY_REQ, KEY_REP):
            print(f"  port {sport}: the stream does not start with an MPA Request or Reply")
            return 1
        hello[sport] = data[:16], data[16]
    if len(dirs) != 2:
        print(f"  expected two directions on port {sys.argv[2]}, found {len(dirs)}")
        return 1
    ok = True
    for sport, (data, bounds) in dirs.items():
        peer = next(p for p in dirs if p != sport)
        key, flags = hello[sport]
        # M in a Request or Reply asks the *other* side to send markers; C in either turns CRC on.
        markers = bool(hello[peer][1] & FLAG_M)
        crc_on = bool((flags | hello[peer][1]) & FLAG_C)
        name = f"{'Request' if key == KEY_REQ else 'Reply'} side (port {sport})"
        ok = walk(name, data, bounds, markers, crc_on) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
