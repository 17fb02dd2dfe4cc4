"""An autopilot stand-in built on pymavlink, for mavlink_bridge interop tests.

Answers TIMESYNC requests (tc1 = its clock when the request was parsed, ts1 mirrored,
target = the requester: v2; or target 0/0 with --v1) and PING requests (mirrored, target =
the requester), sends HEARTBEAT as a PX4 autopilot at 1 Hz, and prints the first SYSTEM_TIME
messages it hears (`SYSTEM_TIME unix_usec=... boot_ms=... src=SYS/COMP at_usec=...`). Its clock is
CLOCK_MONOTONIC + offset + drift since start, so a test on the same host knows the truth.
With --foreign it also sends, for every request, the reply a second requester on the same
link would get (another ts1, another target), which must be ignored.

pymavlink 2.4.50 generates TIMESYNC without its 2022 extension fields (target_system,
target_component), so they are read from the raw payload and appended when packing.
Prints one line `READY t0_ns=... offset_ns=... drift_ppm=...` once started.
With --signing-key HEX it signs what it sends (MAVLink 2 signing, link id 7) and checks
what it hears with pymavlink's own signing code, taking unsigned frames only without
--require-signed; once a second it prints `SIGNING good=N bad=N unsigned=N rejected=N`
(pymavlink's counters).
"""

import argparse
import os
import struct
import sys
import time

os.environ["MAVLINK20"] = "1"
from pymavlink import mavutil  # noqa: E402
from pymavlink.dialects.v20 import common as mav  # noqa: E402


if "target_system" in mav.MAVLink_timesync_message.fieldnames:
    sys.exit("this pymavlink already has TIMESYNC's target fields: use them instead of the subclass")


class TimesyncWithTarget(mav.MAVLink_timesync_message):
    """TIMESYNC with the extension fields pymavlink 2.4.50 lacks."""

    def __init__(self, tc1, ts1, target_system, target_component):
        super().__init__(tc1, ts1)
        self.target = (target_system, target_component)

    def pack(self, mav_, force_mavlink1=False):
        payload = self.unpacker.pack(self.tc1, self.ts1) + struct.pack("<BB", *self.target)
        return self._pack(mav_, self.crc_extra, payload, force_mavlink1=force_mavlink1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url", help="pymavlink connection, e.g. udpout:127.0.0.1:14550")
    p.add_argument("--offset-s", type=float, default=0.0)
    p.add_argument("--drift-ppm", type=float, default=0.0)
    p.add_argument("--v1", action="store_true", help="answer TIMESYNC with target 0/0")
    p.add_argument("--foreign", action="store_true", help="also send a second requester's replies")
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--signing-key", help="the 32-byte MAVLink signing secret, in hex")
    p.add_argument("--require-signed", action="store_true", help="refuse unsigned frames")
    a = p.parse_args()

    conn = mavutil.mavlink_connection(a.url, source_system=1, source_component=1)
    if a.signing_key:
        allow = None if a.require_signed else (lambda _mav, _msg_id: True)
        conn.setup_signing(bytes.fromhex(a.signing_key), sign_outgoing=True,
                           allow_unsigned_callback=allow, link_id=7)
    next_signing_report = time.monotonic() + 1.0
    t0 = time.monotonic_ns()
    offset = int(a.offset_s * 1e9)

    def clock():
        now = time.monotonic_ns()
        return now + offset + int((now - t0) * a.drift_ppm * 1e-6)

    print(f"READY t0_ns={t0} offset_ns={offset} drift_ppm={a.drift_ppm}", flush=True)
    answered = 0
    system_times = 0
    next_heartbeat = 0.0
    end = time.monotonic() + a.duration_s
    while time.monotonic() < end:
        if a.signing_key and time.monotonic() >= next_signing_report:
            next_signing_report = time.monotonic() + 1.0
            sg = conn.mav.signing
            print(f"SIGNING good={sg.goodsig_count} bad={sg.badsig_count} "
                  f"unsigned={sg.unsigned_count} rejected={sg.reject_count}", flush=True)
        if time.monotonic() >= next_heartbeat:
            next_heartbeat = time.monotonic() + 1.0
            conn.mav.heartbeat_send(
                mav.MAV_TYPE_QUADROTOR, mav.MAV_AUTOPILOT_PX4,
                mav.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, 0, mav.MAV_STATE_ACTIVE)
        msg = conn.recv_match(blocking=True, timeout=0.05)
        if msg is None:
            continue
        stamp = clock()
        kind = msg.get_type()
        sender = (msg.get_srcSystem(), msg.get_srcComponent())
        if kind == "TIMESYNC" and msg.tc1 == 0:
            target = (0, 0) if a.v1 else sender
            conn.mav.send(TimesyncWithTarget(stamp, msg.ts1, *target))
            answered += 1
            if a.foreign:
                # The reply to another requester (a GCS at 255/190) with its own ts1.
                other = (0, 0) if a.v1 else (255, 190)
                conn.mav.send(TimesyncWithTarget(stamp, msg.ts1 + 1_000_003, *other))
        elif kind == "SYSTEM_TIME" and system_times < 5:
            # A companion's wall clock (mavros's sys_time): what arrived, and when.
            system_times += 1
            print(f"SYSTEM_TIME unix_usec={msg.time_unix_usec} boot_ms={msg.time_boot_ms} "
                  f"src={sender[0]}/{sender[1]} at_usec={time.time_ns() // 1000}", flush=True)
        elif kind == "PING" and msg.target_system == 0 and msg.target_component == 0:
            conn.mav.ping_send(msg.time_usec, msg.seq, sender[0], sender[1])
            if a.foreign:
                conn.mav.ping_send(msg.time_usec, msg.seq, 255, 190)
    print(f"DONE answered={answered}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
