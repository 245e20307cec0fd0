import os, sys, time, mmap
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 8 << 20)
buf.write(os.urandom(8 << 20))
t0 = time.monotonic()
n = 512
for i in range(n):
    os.pwritev(fd, [buf], i << 23)
    d = t0 + (i + 1) * (8 << 20) / 240e6 - time.monotonic()
    if d > 0:
        time.sleep(d)
os.close(fd)
print(f"direct: {n * 8 / 1024} GiB in {time.monotonic() - t0:.1f} s", file=sys.stderr)
