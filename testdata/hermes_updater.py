"""A stand-in for the Hermes updater's hold on the checkout lock, for tests.

It takes the lock the way that updater does: the lock file opened (created)
read-write, flock(LOCK_EX | LOCK_NB) tried every 20 ms for at most 3 s, since
a reader's probe may hold it for an instant. Modes:

  hold PATH      take the lock, print "locked" (or "busy" and exit 2), keep
                 it until stdin ends
  handoff PATH   take the lock, start a child that inherits the descriptor
                 (and stdin), print "child <pid>", and exit: the child keeps
                 the checkout locked until its stdin ends
  rounds PATH N  take and drop the lock N times, print how many tries failed
"""

import fcntl
import os
import subprocess
import sys
import time


def take(path, wait=3.0):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "child":
        sys.stdin.read()
        return 0
    if mode == "rounds":
        failed = 0
        for _ in range(int(sys.argv[3])):
            fd = take(path)
            if fd is None:
                failed += 1
            else:
                os.close(fd)
        print(failed, flush=True)
        return 0
    fd = take(path)
    if fd is None:
        print("busy", flush=True)
        return 2
    if mode == "hold":
        print("locked", flush=True)
        sys.stdin.read()
        return 0
    child = subprocess.Popen([sys.executable, "-I", __file__, "child", path], pass_fds=(fd,))
    print(f"child {child.pid}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
